"""Billing windows and grace periods: the time-only dimensions of the state tuple.

Everything here is a pure function of a size, a launch time (from the cloud, so it survives a
controller restart) and ``now``. Each answer carries the time it will next change by time alone.

Billing (see :class:`nodemanager.model.Size`):

* ``shutdown_windows`` (minutes, Arvados ``ShutdownTimer`` style) alternate closed, open, closed,
  ... counted from launch; an odd-length list merges its first (closed) entry into the last, so
  the cycle keeps alternating. ``[54, 5, 1]`` is open during minutes 54-59 of each hour of uptime;
  ``[20, 999999]`` is open from minute 20 on. A one-entry list ``[N]`` is closed for N minutes, then
  open for good.
* otherwise ``billing_period`` > 0: the window is the last ``shutdown_window`` seconds of each
  period counted from launch;
* otherwise (per-second billing): closed until ``min_charge`` seconds have been paid, then open.

The open test is strict on both ends, as Arvados' ``window_open()`` is: at the exact instant a
window opens, or closes, it is closed (with ``[54, 5, 1]``: closed at 54:00, open at 54:01,
closed at 59:00, next opening at minute 114).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from nodemanager.model import Size
from policy_matrix.vocabulary import (BOOT_EXCEEDED, BOOT_WAIT, CLOSED, IDLE, IDLE_EXCEEDED,
                                      IDLE_WAIT, NOT_IDLE, OPEN)

__all__ = ["TimedValue", "Schedule", "schedule_for", "window_state", "boot_grace_state",
           "idle_grace_state", "paid_seconds_for", "charged_between", "late_give_back",
           "WINDOW_OPENS", "WINDOW_CLOSES", "BOOT_GRACE_ENDS", "IDLE_GRACE_ENDS"]

WINDOW_OPENS = "billing window opens"
WINDOW_CLOSES = "billing window closes"
BOOT_GRACE_ENDS = "boot grace ends"
IDLE_GRACE_ENDS = "idle grace ends"


class TimedValue(NamedTuple):
    """A tuple dimension's value, when it next changes by time alone (None: never), and what."""

    value: str
    next_change: float | None
    next_what: str | None



# values that never change by time alone, built once (they are returned for most nodes every cycle)
_ALWAYS = {v: TimedValue(v, None, None) for v in (OPEN, NOT_IDLE, BOOT_EXCEEDED, IDLE_EXCEEDED)}

class Schedule(NamedTuple):
    """A billing window schedule in seconds: closed for ``first_closed`` after launch, then the
    ``(open, closed)`` pairs of ``cycle`` repeat for ever."""

    first_closed: float
    cycle: tuple[tuple[float, float], ...]


_ALWAYS_OPEN: tuple[tuple[float, float], ...] = ((math.inf, 0.0),)


def schedule_for(size: Size) -> Schedule:
    """The window schedule a size's billing settings describe (see the module docstring)."""
    if size.shutdown_windows:
        minutes = [60.0 * m for m in size.shutdown_windows]
        first, rest = minutes[0], minutes[1:]
        if not rest:
            return Schedule(first, _ALWAYS_OPEN)
        if len(rest) % 2:
            rest.append(first)
        else:
            rest[-1] += first
        pairs = tuple((rest[i], rest[i + 1]) for i in range(0, len(rest), 2))
        if sum(o + c for o, c in pairs) <= 0:
            return Schedule(first, _ALWAYS_OPEN)
        return Schedule(first, pairs)
    if size.billing_period > 0:
        period = float(size.billing_period)
        window = min(max(float(size.shutdown_window), 0.0), period)
        if window <= 0:
            return Schedule(math.inf, _ALWAYS_OPEN)
        return Schedule(period - window, ((window, period - window),))
    return Schedule(max(float(size.min_charge), 0.0), _ALWAYS_OPEN)


def paid_seconds_for(size: Size, runtime: float) -> float:
    """Seconds the cloud charges for a node of ``size`` that ran ``runtime`` seconds."""
    runtime = max(0.0, runtime)
    if size.billing_period > 0:
        return max(1, math.ceil(runtime / size.billing_period)) * float(size.billing_period)
    return max(runtime, float(size.min_charge))


def late_give_back(size: Size, launched_at: float, destroyed_at: float) -> bool:
    """A node of ``size`` destroyed less than its ``shutdown_window`` into a billing period after
    the first: that period was paid for almost nothing (per-second billing: never)."""
    period = size.billing_period
    if period <= 0 or size.shutdown_windows:
        return False
    up = destroyed_at - launched_at
    return up >= period and up % period < size.shutdown_window


def charged_between(size: Size, launched_at: float, start: float, end: float) -> float:
    """Seconds the cloud charges, between ``start`` and ``end``, for a node of ``size`` launched at
    ``launched_at`` (all of its charge so far if it was launched after ``start``)."""
    before = paid_seconds_for(size, start - launched_at) if launched_at <= start else 0.0
    return paid_seconds_for(size, end - launched_at) - before


def window_state(size: Size | None, launched_at: float, now: float) -> TimedValue:
    """``open`` or ``closed`` for a node of ``size`` launched at ``launched_at``.

    An unknown size (None) has no billing information: its window is always open.
    """
    if size is None:
        return _ALWAYS[OPEN]
    return _window(schedule_for(size), launched_at, now)


def _window(schedule: Schedule, launched_at: float, now: float) -> TimedValue:
    start = launched_at + schedule.first_closed
    if now <= start:
        return TimedValue(CLOSED, start if math.isfinite(start) else None, WINDOW_OPENS)
    pairs = schedule.cycle
    if len(pairs) == 1 and math.isinf(pairs[0][0]):
        return _ALWAYS[OPEN]
    cycle_len = sum(o + c for o, c in pairs)
    elapsed = now - start
    n = math.floor(elapsed / cycle_len)
    base = start + n * cycle_len
    offset = now - base
    pos = 0.0
    for open_for, closed_for in pairs:
        opens, closes = base + pos, base + pos + open_for
        if now == opens:
            return TimedValue(CLOSED, opens, WINDOW_OPENS)
        if opens < now < closes:
            return TimedValue(OPEN, closes, WINDOW_CLOSES)
        pos += open_for + closed_for
        if offset < pos:
            return TimedValue(CLOSED, base + pos, WINDOW_OPENS)
    return TimedValue(CLOSED, base + cycle_len, WINDOW_OPENS)


def boot_grace_state(launched_at: float, now: float, grace: float) -> TimedValue:
    """``boot wait`` while ``now - launched_at < grace``, then ``boot exceeded``."""
    ends = launched_at + grace
    if now < ends:
        return TimedValue(BOOT_WAIT, ends, BOOT_GRACE_ENDS)
    return _ALWAYS[BOOT_EXCEEDED]


def idle_grace_state(worker_state: str, idle_since: float, now: float, grace: float) -> TimedValue:
    """``not idle`` unless ``worker_state`` is idle; then ``idle wait`` while the scheduler's
    idle-since time is less than ``grace`` ago, else ``idle exceeded``."""
    if worker_state != IDLE:
        return _ALWAYS[NOT_IDLE]
    ends = idle_since + grace
    if now < ends:
        return TimedValue(IDLE_WAIT, ends, IDLE_GRACE_ENDS)
    return _ALWAYS[IDLE_EXCEEDED]
