"""A site's own job history as replay input: one :class:`HistoryFormat` per format, all in
:data:`FORMATS`, which ``simulate --format`` and ``advise --format`` offer.

A format is a name and a reader ``(path, log) -> records``; :func:`read_history` applies the
window of days and the sort every format shares. Adding a format is one module and one line here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from nodemanager.sim.history.condor import read_condor
from nodemanager.sim.history.lines import HistoryError, HistoryLog, Record, jobs_of
from nodemanager.sim.history.sacct import read_sacct
from nodemanager.sim.swf import SwfJob

__all__ = ["HistoryFormat", "FORMATS", "HistoryError", "HistoryLog", "ReplayInput", "load_input", "read_history"]


@dataclass(frozen=True, slots=True)
class HistoryFormat:
    """One history format: its ``--format`` name, what it reads, and its reader."""

    name: str
    what: str
    reader: Callable[[str, HistoryLog], list[Record]]


FORMATS: dict[str, HistoryFormat] = {f.name: f for f in (
    HistoryFormat(name="sacct", what="SLURM sacct --parsable2", reader=read_sacct),
    HistoryFormat(name="condor", what="HTCondor condor_history -json or -af", reader=read_condor),
)}


def read_history(path: str, fmt: str, *, skip_days: float = 0.0,
                 days: float | None = None) -> tuple[list[SwfJob], HistoryLog]:
    """The jobs of ``path`` read as ``fmt`` within the window, and what reading left out."""
    if fmt not in FORMATS:
        raise HistoryError(f"--format {fmt}: one of {', '.join(FORMATS)}")
    log = HistoryLog(path=path)
    records = FORMATS[fmt].reader(path, log)
    return jobs_of(records, skip_days=skip_days, days=days), log


@dataclass(frozen=True, slots=True)
class ReplayInput:
    """The jobs a replay reads, with what reading them left out: ``skipped`` counts by reason (``first_line`` the first of each;
    ``named`` the first lines skipped, with their reason),
    ``notes`` are the lines the tables print under them, ``credit`` who provided an archive trace."""

    jobs: list[SwfJob]
    name: str
    skipped: dict[str, int]
    first_line: dict[str, int]
    named: list[tuple[int, str]]
    notes: list[str]
    credit: list[str]


def load_input(*, trace: str | None = None, history: str | None = None, fmt: str | None = None,
               skip_days: float = 0.0, days: float | None = None, absolute: bool = False) -> ReplayInput:
    """An SWF ``trace`` or a site ``history`` in ``fmt``, read once. ValueError (HistoryError,
    SwfError) names the file and line; OSError when it cannot be opened."""
    import os

    from nodemanager.sim.swf import read_jobs

    if history is not None:
        if fmt is None:
            raise HistoryError(f"--history {history}: --format is needed, one of {', '.join(FORMATS)}")
        if not os.path.exists(history):
            raise HistoryError(f"{history}: no such history file")
        jobs, log = read_history(history, fmt, skip_days=skip_days, days=days)
        return ReplayInput(jobs=jobs, name=os.path.basename(history), skipped=dict(log.skipped),
                           first_line=dict(log.first_skipped_line), named=list(log.named),
                           notes=log.notes(),
                           credit=[])
    assert trace is not None
    jobs, reader = read_jobs(trace, skip_days=skip_days, days=days, absolute=absolute)
    notes = [f"{v} jobs skipped: {k} (first at line {reader.first_skipped_line[k]})"
             for k, v in reader.skipped.items()]
    credit = ([f"trace provided by {'; '.join(reader.header.acknowledge)} (Parallel Workloads Archive)"]
              if reader.header.acknowledge else [])
    return ReplayInput(jobs=jobs, name=os.path.basename(trace), skipped=dict(reader.skipped),
                       first_line=dict(reader.first_skipped_line), named=[], notes=notes,
                       credit=credit)
