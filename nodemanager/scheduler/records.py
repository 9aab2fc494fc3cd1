"""Scheduler records (jobs, nodes) holding a value the adapters cannot use, and how they are told.

Both adapters read numbers a scheduler user or admin controls (a job's ``RequestMemory``, a slot's
``Cpus``, SLURM's JSON). A value that is not a number, not finite (``real("INF")``, ``NaN``,
``1e400``), negative or beyond :data:`MAX_COUNT` is *unusable*: the adapter leaves the job out of
demand (or reads the node conservatively, see its module doc) and reports a
:class:`RecordProblem`; the poll itself succeeds. :class:`ProblemLog` turns the problems into one
warning per record and field per period, so a hostile job cannot flood the log.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = ["MAX_COUNT", "REASONS", "KINDS", "RecordProblem", "ProblemLog", "number_problem"]

# The largest count (cores, MB, slots, tasks) taken as real: 2^31-1 cores or MB (2 PiB) is beyond any machine.
MAX_COUNT = 2**31 - 1
# Bounded metric labels: why a value was unusable.
REASONS = ("wrong_type", "not_finite", "out_of_range", "undefined", "error", "unreadable")
KINDS = ("job", "node")


@dataclass(frozen=True, slots=True)
class RecordProblem:
    """One unusable field of one record: ``kind`` is ``job`` or ``node``, ``name`` the job id or
    node/slot name, ``reason`` one of :data:`REASONS`, ``problem`` the words (with the value)."""

    kind: str
    name: str
    field: str
    problem: str
    reason: str = "unreadable"

    @property
    def what(self) -> str:
        return f"{self.kind} {self.name}"

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: field {self.field!r} {self.problem}"


def number_problem(value: Any, low: float = 0, high: float = MAX_COUNT) -> tuple[str, str] | None:
    """None if ``value`` is a usable number in [``low``, ``high``], else (reason, words).

    Booleans and strings are not numbers; ints are compared exactly (never converted to float,
    which overflows for a 400-digit JSON integer).
    """
    if type(value) is int and low <= value <= high:  # the common case, checked first
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "wrong_type", f"is not a number: {_short(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return "not_finite", f"is not finite: {value!r}"
    if not low <= value <= high:
        return "out_of_range", f"is out of range [{low:.0f}, {high:.0f}]: {_short(value)}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ProblemLog:
    """Logs each record's problem at most once per ``period`` seconds (per kind, name and field).

    ``report`` is called after every poll with that poll's problems; what it remembers is bounded
    by the records that had a problem within the last period.
    """

    def __init__(self, logger: logging.Logger, prefix: str, clock: Callable[[], float],
                 period: float = 3600.0) -> None:
        self._log, self._prefix, self._clock, self.period = logger, prefix, clock, period
        self._told: dict[tuple[str, str, str], float] = {}

    def report(self, problems: Iterable[RecordProblem]) -> int:
        """Warn about the problems not told within the period; returns how many were logged."""
        now = self._clock()
        told = self._told
        if len(told) > 1024:  # forget problems told more than a period ago
            self._told = told = {k: t for k, t in told.items() if now - t < self.period}
        logged = 0
        for p in problems:
            key = (p.kind, p.name, p.field)
            last = told.get(key)
            if last is not None and now - last < self.period:
                continue
            told[key] = now
            logged += 1
            self._log.warning("%s: %s (said once per %.0f s)", self._prefix, p, self.period)
        return logged
