"""Clock sanity: the cloud's clock against ours, and timestamps from the future. Pure.

``skew`` is the cloud's clock minus ours, in seconds (positive: the cloud is ahead), as the cloud
adapter measured it from the Date header of its last reply (None: unknown). Within
``clock_tolerance`` a skew is noise (the header has one-second resolution) and nothing is
corrected; beyond ``max_clock_skew`` something is wrong with one of the two clocks and drains and
destroys are frozen (:func:`skew_freeze`). Boots go on: they depend on demand, not on any clock,
and leaving queued jobs waiting is the harm an operator would notice first. And which of a clock
object's two clocks measures intervals (:func:`monotonic_of`; the clocks themselves are the
actors', :mod:`nodemanager.actors.clock`).
"""

from __future__ import annotations

from typing import Callable

__all__ = ["launch_time", "skew_freeze", "future_poll", "date_skew", "monotonic_of"]


def launch_time(launched_at: float, requested: float | None, skew: float | None, listed_at: float,
                tolerance: float, previous: float | None = None) -> float:
    """A cloud launch time on our clock, for boot grace and billing windows.

    ``launched_at`` is shifted by ``skew`` when that is beyond ``tolerance``; it is never before our
    boot request ``requested`` (our clock); and one still later than ``listed_at`` (when the
    listing was taken, our clock) by more than ``tolerance`` is not believed: the earliest of the
    request time, the time this process took last (``previous``) and ``listed_at`` is used, so a
    future launch time never extends boot grace nor shifts the billing window.
    """
    t = launched_at - skew if skew is not None and abs(skew) > tolerance else launched_at
    if requested is not None and requested > t:
        t = requested
    if t > listed_at + tolerance:
        t = min(x for x in (requested, previous, listed_at) if x is not None)
    return t


def skew_freeze(skew: float | None, max_skew: float) -> str | None:
    """Why drains and destroys are frozen because of the cloud's clock (None: they are not).
    ``max_skew`` 0 never freezes."""
    if skew is None or max_skew <= 0 or abs(skew) <= max_skew:
        return None
    side = "ahead of" if skew > 0 else "behind"
    return (f"cloud clock {abs(skew):.0f}s {side} ours (max_clock_skew {max_skew:.0f}s): drains "
            f"and destroys frozen until the clocks agree (check NTP on this host and the cloud's "
            f"time)")


def future_poll(name: str, polled_at: float, now: float, tolerance: float) -> str | None:
    """Why a poll stamped after ``now`` (beyond ``tolerance``) is suspect: our clock stepped back
    since, and its age says nothing about how fresh it is (None: not in the future)."""
    ahead = polled_at - now
    if ahead <= tolerance:
        return None
    return f"{name} poll is {ahead:.0f}s in the future (our clock stepped back?)"


def date_skew(date: float, sent: float, received: float) -> float:
    """The cloud's clock minus ours, from a reply's HTTP Date (``date``: epoch seconds, whole, as
    the header has them) and our clock when the request was ``sent`` and the reply ``received``:
    the header is stamped somewhere in between, within the second it names."""
    return date + 0.5 - (sent + received) / 2.0


def monotonic_of(clock: Callable[[], float]) -> Callable[[], float]:
    """The monotonic clock that goes with ``clock``: its ``monotonic`` when it has one, else
    ``clock`` itself (a plain callable a test injects is both)."""
    mono = getattr(clock, "monotonic", None)
    return mono if callable(mono) else clock
