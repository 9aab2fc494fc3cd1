"""Why a whole plan stops: input too old to act on (nothing is done), or so many nodes down at
once that a scheduler outage is likelier than broken nodes (no drain or destroy). Pure."""

from __future__ import annotations

from nodemanager.core.clocks import future_poll
from nodemanager.model import Snapshot
from nodemanager.core.settings import CoreSettings

__all__ = ["stale_inputs", "mass_down", "stale_clouds"]

_INPUTS = ("cloud", "scheduler")


def stale_inputs(snapshot: Snapshot, poll_stale_after: float, tolerance: float = 30.0) -> str | None:
    """Why the inputs are too old to act on (None: fresh). A missing input counts as stale, and so
    does one stamped more than ``tolerance`` after ``now`` (our clock stepped back since)."""
    old = []
    for name in sorted(set(_INPUTS) | set(snapshot.polled_at)):
        t = snapshot.polled_at.get(name)
        future = future_poll(name, t, snapshot.now, tolerance) if t is not None else None
        if t is None:
            old.append(f"{name} never polled")
        elif future:
            old.append(future)
        elif snapshot.now - t > poll_stale_after:
            old.append(f"{name} poll is {snapshot.now - t:.0f}s old")
    if not old:
        return None
    return f"input is stale ({', '.join(old)}; poll_stale_after {poll_stale_after:.0f}s)"


def stale_clouds(snapshot: Snapshot, poll_stale_after: float) -> dict[str, str]:
    """Each named cloud whose own listing is too old to act on -> why: its nodes are neither
    drained nor destroyed and its sizes not booted, while the other clouds go on."""
    out = {}
    for name, t in snapshot.cloud_polled.items():
        if t <= 0.0:
            out[name] = f"cloud {name} has not answered a listing since the start"
        elif snapshot.now - t > poll_stale_after:
            out[name] = (f"cloud {name}'s listing is {snapshot.now - t:.0f}s old (poll_stale_after "
                         f"{poll_stale_after:.0f}s)")
    return out


def mass_down(bad: int, total: int, settings: CoreSettings) -> str | None:
    """The freeze reason when ``bad`` of ``total`` nodes are down or never came up beyond
    ``down_freeze_count`` and ``down_freeze_fraction`` (None: no freeze)."""
    if bad > settings.down_freeze_count and bad > settings.down_freeze_fraction * total:
        return (f"{bad} of {total} nodes are down or never came up (more than "
                f"{settings.down_freeze_count} and {settings.down_freeze_fraction:.0%}): "
                f"drains and destroys frozen, likely a scheduler outage")
    return None
