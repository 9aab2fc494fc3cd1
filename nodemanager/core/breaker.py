"""Capacity circuit breakers, one per size (a size is one instance type, market and zone). Pure.

A capacity error on a boot (the cloud has no room for the size now) opens the size's breaker:
it is not booted for a cooldown, ``cooldown`` after the first error in a row and doubling with
each further one up to ``max_cooldown``; demand falls back to the next eligible size meanwhile.
When the cooldown ends the breaker is half-open: one probe boot at a time decides (a created VM
closes it, another capacity error opens it again for the doubled cooldown). The actuator keeps the
:class:`Breaker` records (:mod:`nodemanager.cycle.breakers`); the snapshot carries what placement
needs (``open_breakers``: not booted, with why; ``probe_sizes``: one boot at a time). A size whose
VMs boot but never join is protected mode's (:mod:`nodemanager.core.protected`), not this.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodemanager.text import duration

__all__ = ["Breaker", "OPEN", "HALF_OPEN", "CLOSED", "trip", "state", "open_words"]

OPEN, HALF_OPEN, CLOSED = "open", "half-open", "closed"


@dataclass(frozen=True)
class Breaker:
    """One size's breaker: ``failures`` capacity errors in a row, open ``until`` (wall time)."""

    failures: int
    until: float
    error: str = ""   # the last capacity error, in words


def trip(b: Breaker | None, now: float, error: str, cooldown: float, max_cooldown: float) -> Breaker:
    """The breaker after a capacity error at ``now``: open for the next cooldown in the doubling."""
    failures = (b.failures if b is not None else 0) + 1
    return Breaker(failures=failures, until=now + min(cooldown * 2 ** (failures - 1), max_cooldown),
                   error=error)


def state(b: Breaker | None, now: float) -> str:
    """``open`` during the cooldown, ``half-open`` after it (a probe boot decides), ``closed``
    without a record."""
    if b is None:
        return CLOSED
    return OPEN if now < b.until else HALF_OPEN


def open_words(size: str, b: Breaker, now: float) -> str:
    """Why an open breaker's size is not booted, in words."""
    return (f"capacity breaker open: {b.failures} capacity error(s) in a row ({b.error}); "
            f"one probe boot in {duration(b.until - now)}")
