"""Budgets over time (``max_destroys_per_hour``, ``max_boots_per_hour``, ``rebuy_hold``) counted from
what the cloud keeps, so a restart or an HA takeover (both heads list the same cloud) starts from
the same count. Pure.

- a destroy: a listed node of ours, terminated or not, carrying ``TAG_DESTROY`` (written before the
  destroy call, with its time); EC2 lists a terminated instance, tags and all, for about an hour;
- a boot: a listed node of ours, terminated or not, launched in the window: its request time from
  ``TAG_REQUEST`` (``<id>.<epoch>``, on our clock), else its launch time.

The actuator's own record (what it did that no listing shows yet; kept in the store, so a cloud that
drops a destroyed VM at once does not make a restart forget it) is merged in by key (node id for
destroys, request id for boots) by :func:`merge`, so nothing is counted twice.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from nodemanager.model import CloudNode
from nodemanager.tags import TAG_DESTROY, TAG_REQUEST

__all__ = ["HOUR", "requested_at", "listed_destroys", "listed_boots", "merge"]

HOUR = 3600.0   # seconds: the window of every "per hour" budget


def requested_at(request_id: str | None) -> float | None:
    """The epoch a boot was requested, from a ``TAG_REQUEST`` value ``<id>.<epoch>`` (else None)."""
    if not request_id:
        return None
    _, dot, tail = request_id.rpartition(".")
    return float(tail) if dot and tail.isdigit() else None


def _in_window(t: float, now: float) -> bool:
    return 0.0 <= now - t < HOUR


def listed_destroys(listing: Iterable[CloudNode], now: float) -> dict[str, float]:
    """Node id -> when it was destroyed (its ``TAG_DESTROY`` time), for the last hour."""
    out: dict[str, float] = {}
    for n in listing:
        tag = n.tags.get(TAG_DESTROY) if n.tags else None
        if tag:
            try:
                at = float(tag)
            except ValueError:
                continue
            if _in_window(at, now):
                out[n.id] = at
    return out


def listed_boots(listing: Iterable[CloudNode], now: float) -> dict[str, float]:
    """Request id (the node id without one) -> when the boot was requested, for the last hour."""
    out: dict[str, float] = {}
    for n in listing:
        request = n.tags.get(TAG_REQUEST) if n.tags else None
        at = requested_at(request)
        at = n.launched_at if at is None else at
        if _in_window(at, now):
            out[request or n.id] = at
    return out


def merge(listed: Mapping[str, float], own: Mapping[str, float], now: float) -> tuple[float, ...]:
    """The times of the last hour's actions, the listing's and this process's, each key once
    (the earlier time where both have it), oldest first."""
    both = dict(listed)
    for key, at in own.items():
        both[key] = min(at, both.get(key, at))
    return tuple(sorted(t for t in both.values() if _in_window(t, now)))
