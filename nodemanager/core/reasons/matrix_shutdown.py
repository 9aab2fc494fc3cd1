"""The matrix says START_SHUTDOWN: destroy the node (cancellable when it may run jobs: then only
after a drain of ours, and within min_nodes, demand and the destroy budget). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Action, Cause, ItemKind
from policy_matrix.vocabulary import DOWN, UNPAIRED

__all__ = ["MatrixShutdown"]


@dataclass(frozen=True)
class MatrixShutdown(Reason):
    name: str = "matrix_shutdown"
    stage: Stage = Stage.WANTS
    budget: ClassVar[str | None] = "matrix_shutdown"

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        causes: dict[str, Cause] = {}
        shutdown = Action.START_SHUTDOWN  # a local: an enum member read through its class costs ~0.1 us per node
        return [d.wanting(ItemKind.DESTROY, causes.get(d.facts.rule) or causes.setdefault(
                              d.facts.rule, Cause(self.name, d.facts.rule)),
                          f"matrix says START_SHUTDOWN: {d.facts.cls.why}",
                          cancellable=d.facts.core_state not in (DOWN, UNPAIRED))
                for d in candidates if d.facts.maction is shutdown]
