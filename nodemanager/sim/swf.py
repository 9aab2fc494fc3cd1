"""Read workload traces in the Standard Workload Format (SWF) of the Parallel Workloads Archive.

A trace is ``;`` header lines (``; Key: value``) followed by one job per line, 18
whitespace-separated numeric fields (-1 means unknown). The replay uses:

====  ===================  ==============================================================
 #     field                used as
====  ===================  ==============================================================
 2     submit time          :attr:`SwfJob.submit` (seconds since the header's UnixStartTime)
 3     wait time            :attr:`SwfJob.trace_wait` (what the original cluster made it wait)
 4     run time             :attr:`SwfJob.runtime`
 5     allocated procs      :attr:`SwfJob.cores` (else field 8, requested procs)
 7     used memory (KB/proc) :attr:`SwfJob.mem_mb` when field 10 is unknown
 9     requested time       :attr:`SwfJob.requested_time`
 10    requested memory     :attr:`SwfJob.mem_mb` (KB per processor, times the cores)
 11    status               :attr:`SwfJob.status`
 12    user id              :attr:`SwfJob.user` (who spent what; runtime prediction's key)
 13    group id             :attr:`SwfJob.group`
 14    executable number    :attr:`SwfJob.executable` (runtime prediction's job name)
====  ===================  ==============================================================

Files may be gzip-compressed (``.gz``). :class:`SwfReader` streams: it never holds the whole
trace. ``-1`` is "unknown" in any field, as the Parallel Workloads Archive defines it: a job line
that cannot be replayed (unknown submit time or run time, no processor count, out of order, not
18 numbers) is skipped and counted by reason in :attr:`SwfReader.skipped`. Only a file that cannot
be read raises :class:`SwfError`, naming ``file:line``.
"""

from __future__ import annotations

import gzip
import io
import math
import os
from dataclasses import dataclass, field, replace
from typing import IO, Iterator

__all__ = ["SwfJob", "SwfHeader", "SwfReader", "SwfError", "read_jobs", "DAY"]

DAY = 86400.0
_FIELDS = 18


class SwfError(ValueError):
    """A trace line that is not valid SWF; the message starts with ``file:line:``."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line


@dataclass(frozen=True, slots=True)
class SwfJob:
    """One job of the trace. Times are seconds; ``submit`` is relative to the trace start.

    ``mem_mb`` is the whole job's memory (0 when the trace does not say); ``requested_time`` is
    -1 when unknown.
    """

    id: int
    submit: float
    runtime: float
    cores: int
    mem_mb: int = 0
    requested_time: float = -1.0
    trace_wait: float = -1.0
    status: int = 1
    user: int = -1        # field 12, the user id (-1: unknown)
    group: int = -1       # field 13, the group id
    executable: int = -1  # field 14, the executable (application) number
    gpus: int = 0         # GPUs asked for (a site history's; SWF has none)


@dataclass
class SwfHeader:
    """The ``; Key: value`` header lines, in order (a key may repeat, e.g. ``Note``)."""

    fields: list[tuple[str, str]] = field(default_factory=list)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The first value for ``key`` (case-insensitive), without a trailing ``# comment``."""
        lk = key.lower()
        for k, v in self.fields:
            if k.lower() == lk:
                return v.split("#", 1)[0].strip()
        return default

    def all(self, key: str) -> list[str]:
        lk = key.lower()
        return [v for k, v in self.fields if k.lower() == lk]

    @property
    def unix_start_time(self) -> float | None:
        v = self.get("UnixStartTime")
        try:
            return float(v) if v is not None else None
        except ValueError:
            return None

    @property
    def acknowledge(self) -> list[str]:
        """Who provided the log (the archive asks users to acknowledge them)."""
        return self.all("Acknowledge")


def _open(path: str) -> IO[str]:
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


@dataclass
class SwfReader:
    """Stream the jobs of one SWF file, optionally a window of days.

    Days count from the first job's submit time (cleaned traces often start weeks after the
    header's ``UnixStartTime``). ``skip_days`` drops jobs submitted in the first that many days;
    ``days`` keeps only jobs submitted within that many days after the skipped part. Iteration
    stops once past the window (SWF traces are sorted by submit time). As the archive defines the
    format, ``-1`` means unknown in any field: a line that cannot be replayed (unknown or negative
    submit time, submitted before the line above it, not 18 finite numbers) is skipped and counted
    by reason in ``skipped``, with its first line number in ``first_skipped_line``; reading never
    stops on one. ``window_start``/``window_end`` are set once the first job is read (seconds, in
    the trace's time base).
    """

    path: str
    skip_days: float = 0.0
    days: float | None = None
    header: SwfHeader = field(default_factory=SwfHeader)
    skipped: dict[str, int] = field(default_factory=dict)
    first_skipped_line: dict[str, int] = field(default_factory=dict)
    lines_read: int = 0
    first_submit: float | None = None

    def __post_init__(self) -> None:
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"{self.path}: no such trace file")
        if self.skip_days < 0 or (self.days is not None and self.days <= 0):
            raise ValueError("--skip-days must be >= 0 and --days > 0")

    @property
    def window_start(self) -> float:
        return (self.first_submit or 0.0) + self.skip_days * DAY

    @property
    def window_end(self) -> float:
        if self.days is None:
            return math.inf
        return (self.first_submit or 0.0) + (self.skip_days + self.days) * DAY

    def _skip(self, why: str, lineno: int) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1
        self.first_skipped_line.setdefault(why, lineno)

    def __iter__(self) -> Iterator[SwfJob]:
        last_submit = -math.inf
        start = end = math.inf
        try:
            fh = _open(self.path)
        except OSError as exc:
            raise SwfError(self.path, 0, f"cannot open: {exc}") from exc
        with fh:
            lineno = 0
            try:
                for lineno, raw in enumerate(fh, 1):
                    self.lines_read = lineno
                    line = raw.strip()
                    if not line:
                        continue
                    if line.startswith(";"):
                        body = line[1:].strip()
                        if ":" in body:
                            k, v = body.split(":", 1)
                            self.header.fields.append((k.strip(), v.strip()))
                        continue
                    try:
                        job = self._parse(line)
                    except _Unusable as why:
                        self._skip(str(why), lineno)
                        continue
                    if job.submit < last_submit:
                        self._skip("submitted before the job above it", lineno)
                        continue
                    last_submit = job.submit
                    if self.first_submit is None:
                        self.first_submit = job.submit
                        start, end = self.window_start, self.window_end
                    if job.submit < start:
                        continue
                    if job.submit >= end:
                        return
                    if job.runtime < 0:
                        self._skip("unknown run time", lineno)
                        continue
                    if job.cores <= 0:
                        self._skip("no processor count", lineno)
                        continue
                    yield job
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                raise SwfError(self.path, lineno, f"cannot read: {exc}") from exc

    @staticmethod
    def _parse(line: str) -> SwfJob:
        parts = line.split()
        if len(parts) != _FIELDS:
            raise _Unusable(f"not {_FIELDS} fields")
        try:
            v = [float(p) for p in parts]
        except ValueError:
            raise _Unusable("a field is not a number") from None
        if not all(math.isfinite(x) for x in v):
            raise _Unusable("a field is not a finite number")
        submit = v[1]
        if submit < 0:
            raise _Unusable("unknown submit time")
        procs = int(v[4]) if v[4] > 0 else int(v[7]) if v[7] > 0 else 0
        mem_kb = v[9] if v[9] > 0 else v[6] if v[6] > 0 else 0.0
        return SwfJob(
            id=int(v[0]),
            submit=submit,
            runtime=v[3],
            cores=procs,
            mem_mb=int(math.ceil(mem_kb * max(procs, 1) / 1024.0)) if mem_kb > 0 else 0,
            requested_time=v[8] if v[8] > 0 else -1.0,
            trace_wait=v[2],
            status=int(v[10]),
            user=int(v[11]),
            group=int(v[12]),
            executable=int(v[13]),
        )


class _Unusable(ValueError):
    """A job line that cannot be replayed; its message is the reason it is counted under."""


def read_jobs(path: str, *, skip_days: float = 0.0, days: float | None = None,
              absolute: bool = False) -> tuple[list[SwfJob], SwfReader]:
    """All usable jobs of the window as a list, and the reader (for its header and counts).
    ``absolute``: submit times as Unix times (plus the header's ``UnixStartTime``, when it has one),
    for what reads the trace's own clock (a schedule)."""
    reader = SwfReader(path, skip_days=skip_days, days=days)
    jobs = list(reader)
    start = reader.header.unix_start_time if absolute else None
    if start:
        jobs = [replace(j, submit=j.submit + start) for j in jobs]
    return jobs, reader
