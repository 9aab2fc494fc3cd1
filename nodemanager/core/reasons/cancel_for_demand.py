"""Queued jobs need a node we are draining: cancel our drain (before any freeze or budget: a
cancel gives capacity back). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Cause, ItemKind

__all__ = ["CancelForDemand"]


@dataclass(frozen=True)
class CancelForDemand(Reason):
    name: str = "cancel_for_demand"
    stage: Stage = Stage.AFTER_DEMAND

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        return [d._replace(want=ItemKind.CANCEL_DRAIN, cancellable=True, cause=Cause(self.name, "queued demand"),
                           reason=f"cancel our drain: {d.needed}")
                for d in candidates if d.drain is not None and d.needed]
