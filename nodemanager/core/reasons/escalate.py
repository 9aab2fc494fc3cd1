"""Make a drain of ours harsher (quick or fast) when ``[Drain] escalate_quick``/``escalate_fast``
or the deadline say so (the ``escalation`` callback); never while drains are frozen. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Cause, ItemKind

__all__ = ["Escalate"]


@dataclass(frozen=True)
class Escalate(Reason):
    name: str = "escalate"
    stage: Stage = Stage.AFTER_GATES

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        escalation = ctx.escalation
        if escalation is None or ctx.frozen:
            return []
        now = ctx.snapshot.now
        out = []
        for d in candidates:
            worker = d.facts.worker
            if d.drain is not None and d.want is None and worker is not None:
                schedule = escalation(worker, d.drain, now)
                if schedule:
                    out.append(d._replace(want=ItemKind.ESCALATE, schedule=schedule,
                                          cause=Cause(self.name, f"[Drain] escalate_{schedule}"),
                                          reason=f"escalate our drain to {schedule}: {d.reason}"))
        return out
