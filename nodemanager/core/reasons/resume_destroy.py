"""Recovery: a listed node marked ``TAG_DESTROY`` (a destroy interrupted by a restart or a failed
call) is destroyed again until it is gone; a destroy is never left half-done. Not while actions
are frozen or paused, not for a node this process destroyed moments ago. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Stage
from nodemanager.model import Cause, ItemKind
from nodemanager.tags import TAG_DESTROY
from nodemanager.text import duration

__all__ = ["ResumeDestroy", "decided"]


def decided(tag: str, now: float) -> str:
    """When an earlier process decided a destroy, from its ``TAG_DESTROY`` value (an epoch)."""
    try:
        return f"decided {duration(now - float(tag))} ago" if 0 < float(tag) <= now else "decided earlier"
    except ValueError:
        return "decided earlier"


@dataclass(frozen=True)
class ResumeDestroy:
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
               and not d.facts.gone and d.facts.node.id not in done]
        if not out:
            return []
        listed = {n.id: i for i, n in enumerate(snap.cloud_nodes)}
        out.sort(key=lambda d: listed[d.facts.node.id])  # in listing order, as the listing shows them
        return [d._replace(want=ItemKind.DESTROY, cancellable=False, blocked=None, request_id=None,
                           schedule=None, cause=Cause(self.name, f"{TAG_DESTROY} tag"),
                           reason=f"finishing the destroy {decided(d.facts.node.tags[TAG_DESTROY], snap.now)}")
                for d in out]
