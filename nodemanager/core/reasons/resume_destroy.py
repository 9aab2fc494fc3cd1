"""Recovery: a listed node marked ``TAG_DESTROY`` (a destroy interrupted by a restart or a failed
call) is destroyed again until it is gone, as long as it still qualifies: no job runs on it, and
its worker is gone, lost or down (our drain finished). A node that recovered since (its worker
heard, idle or busy, no drain of ours under way) gets its tag removed instead; any other waits. Never a node an operator
holds or whose pairing is ambiguous, not while actions are frozen or paused, not for a node this
process destroyed moments ago. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nodemanager.core.plan_node import Decision, NodeFacts
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Blocked, Cause, ItemKind
from nodemanager.tags import TAG_DESTROY
from nodemanager.text import duration
from policy_matrix.vocabulary import BUSY, DOWN, IDLE, UNPAIRED

__all__ = ["ResumeDestroy", "decided", "qualifies"]

_LEFT_ALONE = (Blocked.HELD, Blocked.AMBIGUOUS, Blocked.ID_CONFLICT)


def decided(tag: str, now: float) -> str:
    """When an earlier process decided a destroy, from its ``TAG_DESTROY`` value (an epoch)."""
    try:
        return f"decided {duration(now - float(tag))} ago" if 0 < float(tag) <= now else "decided earlier"
    except ValueError:
        return "decided earlier"


def qualifies(f: NodeFacts) -> bool:
    """Whether a destroy decided earlier still holds: no job runs, the worker is gone, lost or
    down (a drained worker is down)."""
    w = f.worker
    if w is None:
        return True
    return w.running_jobs == 0 and w.cpus_busy == 0 and (f.lost or f.core_state in (DOWN, UNPAIRED))


@dataclass(frozen=True)
class ResumeDestroy(Reason):
    name: str = "resume_destroy"
    stage: Stage = Stage.LAST

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        snap = ctx.snapshot
        if ctx.frozen or snap.paused:
            return []
        # most cycles no listed node is tagged: one scan of the listing, cheaper than of the decisions
        if not any(TAG_DESTROY in n.tags for n in snap.cloud_nodes):
            return []
        done = snap.destroyed
        out = [d for d in candidates if d.facts.node.tags.get(TAG_DESTROY) and d.want is not ItemKind.DESTROY
               and not d.facts.gone and d.facts.node.id not in done and d.blocked not in _LEFT_ALONE]
        if not out:
            return []
        listed = {n.id: i for i, n in enumerate(snap.cloud_nodes)}
        out.sort(key=lambda d: listed[d.facts.node.id])  # in listing order, as the listing shows them
        proposed = []
        for d in out:
            when = decided(d.facts.node.tags[TAG_DESTROY], snap.now)
            if qualifies(d.facts):
                proposed.append(d._replace(
                    want=ItemKind.DESTROY, cancellable=False, blocked=None, request_id=None, schedule=None,
                    cause=Cause(self.name, f"{TAG_DESTROY} tag"), reason=f"finishing the destroy {when}"))
            elif d.facts.our_drain is None and not d.facts.lost and d.facts.core_state in (IDLE, BUSY):
                # recovered: the cancel clears the tag (our drain, if one is under way, decides later)
                proposed.append(d._replace(
                    want=ItemKind.CANCEL_DRAIN, cancellable=False, blocked=None, request_id=None, schedule=None,
                    cause=Cause(self.name, f"{TAG_DESTROY} tag"),
                    reason=f"not destroyed: the destroy {when} no longer holds ({d.facts.cls.why}); "
                           f"removing its {TAG_DESTROY} tag"))
        return proposed
