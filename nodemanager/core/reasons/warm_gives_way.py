"""Warm capacity gives way: an idle warm node that queued jobs need the slot or the money of
(``max_nodes``, the quota, ``max_total_price``: :func:`nodemanager.core.warm.give_way`) is drained
now, not at the end of its idle grace, and destroyed once drained (finishing our drain). Only an
idle node nothing else claimed; the budgets apply as to any drain (budget reason
``warm_gives_way``), and the graceful drain leaves a job the node took meanwhile to finish. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Cause, ItemKind
from policy_matrix.vocabulary import IDLE

__all__ = ["WarmGivesWay"]


@dataclass(frozen=True)
class WarmGivesWay(Reason):
    name: str = "warm_gives_way"
    stage: Stage = Stage.AFTER_DEMAND
    budget: ClassVar[str | None] = "warm_gives_way"

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        going = ctx.gives_way
        if not going:
            return []
        cause = Cause(self.name, "queued demand")
        out = []
        for d in candidates:
            f = d.facts
            why = going.get(f.node.id)
            # an idle node no reason claimed, with no drain of anyone's: a matrix drain already gives it back
            if (why is None or d.want is not None or d.blocked or d.needed or d.forced or f.our_drain is not None
                    or f.worker is None or f.worker.draining or f.core_state != IDLE):
                continue
            out.append(d.wanting(ItemKind.DRAIN, cause, f"{why}: drained now, destroyed once drained"))
        return out
