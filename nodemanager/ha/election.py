"""The leader election as a pure state machine: given lease events and the monotonic clock, am I
the leader, and may I act now?

The leader acts only until ``renewed_at + ttl - margin``, where ``renewed_at`` is when the last
successful keepalive (or the grant) was *sent*: etcd counts the TTL from when it *received* it, so
the leader always stops before etcd can let another process take the key, whatever etcd says
later. I/O lives in :mod:`nodemanager.ha.lease`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Leadership", "acting", "deadline", "elected", "renewed", "deposed", "expired", "observed"]


@dataclass(frozen=True)
class Leadership:
    """What this process knows about the election. Times are monotonic seconds."""

    me: str                          # "host:pid"
    leading: bool = False
    lease: int | None = None         # our etcd lease while we lead
    fence: int | None = None         # create revision of the election key we hold: the fencing value
    renewed_at: float | None = None  # when the last successful keepalive (or the grant) was sent
    since: float | None = None       # when we became leader
    leader: str | None = None        # the election key's value: "host:pid since <time>"
    elections: int = 0               # how often this process became leader
    acting_from: float | None = None  # a leader elected after etcd lost its data acts from then on


def deadline(state: Leadership, ttl: float, margin: float) -> float | None:
    """Monotonic time at which the leader must have stopped acting; None when not leading."""
    if not state.leading or state.renewed_at is None:
        return None
    return state.renewed_at + ttl - margin


def acting(state: Leadership, now: float, ttl: float, margin: float) -> bool:
    """True if this process leads and its lease is certainly still its own at ``now``."""
    end = deadline(state, ttl, margin)
    return end is not None and now < end and (state.acting_from is None or now >= state.acting_from)


def elected(state: Leadership, lease: int, fence: int, sent_at: float, value: str,
            acting_from: float | None = None) -> Leadership:
    """We created the election key with ``lease`` (granted by a request sent at ``sent_at``);
    ``acting_from``: not before then (a leader of before may still be acting until then)."""
    return replace(state, leading=True, lease=lease, fence=fence, renewed_at=sent_at, since=sent_at,
                   leader=value, elections=state.elections + 1, acting_from=acting_from)


def renewed(state: Leadership, sent_at: float, ttl_left: float) -> Leadership:
    """A keepalive sent at ``sent_at`` came back with ``ttl_left`` (0: the lease is gone)."""
    if not state.leading:
        return state
    if ttl_left <= 0:
        return deposed(state)
    return replace(state, renewed_at=max(sent_at, state.renewed_at or sent_at))


def deposed(state: Leadership, leader: str | None = None) -> Leadership:
    """We no longer lead (lease gone, key taken, or our deadline passed)."""
    return replace(state, leading=False, lease=None, fence=None, renewed_at=None, since=None,
                   leader=leader, acting_from=None)


def expired(state: Leadership, now: float, ttl: float, margin: float) -> Leadership:
    """Deposed if our deadline passed without a successful keepalive."""
    end = deadline(state, ttl, margin)
    return deposed(state) if end is not None and now >= end else state


def observed(state: Leadership, leader: str | None) -> Leadership:
    """A standby read the election key: ``leader`` is its value (None: nobody leads)."""
    return state if state.leading else replace(state, leader=leader)
