"""A node's row in the words an operator means, from the core's explanation (nothing is decided
here): the tuple always in the matrix's own words (what ``matrix explain`` takes), with what else
is known beside it, never in its place (``joined``: its worker joined, so its boot grace no longer
matters; ``drained by us``; ``our drain under way``); a give-back named as what it is
(``drained``); and a next change for every node (the next timed change that matters to it, else
what a blocked node waits for)."""

from __future__ import annotations

from typing import Any

from nodemanager.core.billing import BOOT_GRACE_ENDS
from nodemanager.model import Blocked, NodeExplanation
from policy_matrix.vocabulary import BOOT_WAIT

__all__ = ["JOINED", "DRAINED", "DRAINED_BY_US", "UNBLOCKS", "beside", "shown_tuple", "given_back_as",
           "next_change"]

JOINED = "joined"
DRAINED = "drained"
DRAINED_BY_US = "drained by us"
OUR_DRAIN = "our drain under way"

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


def beside(e: NodeExplanation) -> tuple[str, ...]:
    """What the table shows beside the matrix's tuple: facts the tuple does not carry."""
    out: list[str] = []
    if _joined(e) and e.tuple.boot_grace == BOOT_WAIT:
        out.append(JOINED)
    if e.drained:
        out.append(DRAINED_BY_US)
    elif e.our_drain_since is not None:
        out.append(OUR_DRAIN)
    return tuple(out)


def shown_tuple(e: NodeExplanation) -> str:
    """The matrix's tuple, then what else is known: ``(idle, open, boot wait, idle wait) joined``."""
    extra = beside(e)
    return f"{e.tuple} {', '.join(extra)}" if extra else str(e.tuple)


def given_back_as(e: NodeExplanation) -> str | None:
    """What a give-back is, when the matrix's worker state alone would mislead: ``drained`` for a
    node destroyed after our drain finished (its worker reads ``down`` only because we drained it)."""
    if e.drained and e.cause is not None and e.cause.by == "our drain":
        return DRAINED
    return None


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
