"""An operator's forced drain (``nodemanager admin drain``): passes min_nodes and the drain
budget (but counts in both). Not for a node that runs nothing (down, unpaired). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nodemanager.core.facts import matches
from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Cause, ItemKind
from policy_matrix.vocabulary import DOWN, UNPAIRED

__all__ = ["OperatorDrain"]


@dataclass(frozen=True)
class OperatorDrain(Reason):
    name: str = "operator_drain"
    stage: Stage = Stage.WANTS

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        forced = ctx.snapshot.forced_drains
        if not forced:
            return []
        out = []
        for d in candidates:
            f = d.facts
            if f.core_state in (DOWN, UNPAIRED) or not matches(f.node, f.worker, forced):
                continue
            if f.worker is not None and f.worker.draining:
                out.append(d._replace(reason=f"operator asked for a drain; already draining: {f.cls.why}"))
            else:
                out.append(d._replace(want=ItemKind.DRAIN, forced=True, cause=Cause(self.name, "operator"),
                                      reason=f"operator asked for a drain: {f.cls.why}"))
        return out
