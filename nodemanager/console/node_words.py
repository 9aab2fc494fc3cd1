"""A node's row in the words an operator means, from the core's explanation (nothing is decided
here): a joined worker's boot grace shown as ``joined`` (the matrix's tuple is kept beside it), a
node drained by us shown ``drained`` beside its matrix state, and a next change for every node
(the next timed change that matters to it, else what a blocked node waits for)."""

from __future__ import annotations

from typing import Any

from nodemanager.core.billing import BOOT_GRACE_ENDS
from nodemanager.model import Blocked, NodeExplanation

__all__ = ["JOINED", "DRAINED", "UNBLOCKS", "shown_worker_state", "shown_tuple", "next_change"]

JOINED = "joined"
DRAINED = "drained"

# what a blocked node waits for, when no timed change of its tuple comes first
UNBLOCKS: dict[str, str] = {
    Blocked.STALE: "when the stale input is polled again",
    Blocked.PAUSED: "when an operator resumes actions",
    Blocked.FROZEN: "when the freeze in the header lifts",
    Blocked.HELD: "when an operator releases the hold",
    Blocked.DEMAND: "when the queued jobs no longer need it",
    Blocked.MIN_NODES: "when more nodes than min_nodes are up",
    Blocked.BUDGET: "when a drain finishes or the destroy budget refills",
    Blocked.IN_FLIGHT: "when the destroy under way finishes",
    Blocked.NO_WORKER: "when its worker joins or its boot grace ends",
    Blocked.UNCONFIRMED: "when this controller's own polls confirm it (the next poll or two)",
    Blocked.FOREIGN_DRAIN: "when the other drain ends or reclaim_foreign_after passes",
    Blocked.AMBIGUOUS: "when one worker or VM alone matches it",
    Blocked.ID_CONFLICT: "when the worker that answers to its name advertises its instance id",
    Blocked.MIN_LIFETIME: "when it is older than min_lifetime",
    Blocked.WOULD_EVICT: "when its jobs can retire within a graceful drain",
}


def _joined(e: NodeExplanation) -> bool:
    return e.worker is not None


def shown_worker_state(e: NodeExplanation) -> str:
    """The tuple's worker state, with ``: drained`` when our drain of it finished."""
    state = e.tuple.worker_state
    return f"{state}: {DRAINED}" if e.drained else state


def shown_tuple(e: NodeExplanation) -> str:
    """The tuple as the node table shows it: the boot grace of a joined worker is ``joined``."""
    ws, window, boot, idle = e.tuple.as_tuple()
    return f"({shown_worker_state(e)}, {window}, {JOINED if _joined(e) else boot}, {idle})"


def next_change(e: NodeExplanation) -> tuple[float | None, str | None, str | None]:
    """(when, what, words): the next timed change that matters to the node, or, with no time,
    the words of what it waits for (a blocked node) or that nothing changes by time alone."""
    at, what = e.next_change, e.next_change_what
    if at is not None and what == BOOT_GRACE_ENDS and _joined(e):
        at, what = e.after_boot if e.after_boot is not None else (None, None)
    if at is not None:
        return at, what, None
    if e.blocked_by:
        return None, None, UNBLOCKS.get(e.blocked_by, f"when {e.blocked_by} no longer holds it back")
    return None, None, "none by time alone"


def dash(value: Any) -> str:
    """A cell's text: ``-`` for a missing value, never a blank."""
    return "-" if value is None or value == "" else str(value)
