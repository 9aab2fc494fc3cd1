"""An operator cancels a drain of ours (``nodemanager admin cancel``): it replaces whatever else the
node gets, except finishing a recorded destroy; even while actions are frozen or paused. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Cause, ItemKind
from nodemanager.tags import TAG_DESTROY

__all__ = ["OperatorCancel"]


@dataclass(frozen=True)
class OperatorCancel(Reason):
    name: str = "operator_cancel"
    stage: Stage = Stage.LAST

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        snap = ctx.snapshot
        if not snap.cancel_drains:
            return []
        draining = {f.node: f for f in snap.in_flight if f.action == "drain"}
        by_id = {d.facts.node.id: d for d in candidates if d.facts.node.id in snap.cancel_drains}
        out = []
        for node_id in sorted(by_id):
            d = by_id[node_id]
            if node_id in draining and not d.facts.node.tags.get(TAG_DESTROY):
                out.append(d._replace(want=ItemKind.CANCEL_DRAIN, cancellable=True, blocked=None,
                                      request_id=draining[node_id].request_id, schedule=None,
                                      cause=Cause(self.name, "operator"),
                                      reason="operator cancelled the drain"))
        return out
