"""``max_lifetime``: a busy node up longer than it (0: never) is relabelled ``expired``; the matrix
says what it gets (the cost matrix drains it, to be replaced as demand needs). A younger busy
node's coming end of life is its next change by time alone, when that comes before the tuple's
own. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from nodemanager.core.consolidate import EXPIRED, relabel_candidate, relabelled
from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.text import duration

__all__ = ["MaxLifetime", "LIFETIME_ENDS"]

LIFETIME_ENDS = "max_lifetime ends"


@dataclass(frozen=True)
class MaxLifetime(Reason):
    name: str = "max_lifetime"
    stage: Stage = Stage.LABELS
    budget: ClassVar[str | None] = "max_lifetime"
    switches: ClassVar[tuple[str, ...]] = ("max_lifetime",)
    time_settings: ClassVar[tuple[str, ...]] = ("max_lifetime",)
    relabels: ClassVar[str | None] = EXPIRED

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        lifetime = ctx.settings.max_lifetime
        if lifetime <= 0:
            return []
        now = ctx.snapshot.now
        out = []
        for d in candidates:
            n = d.facts
            if not relabel_candidate(n):
                continue
            age = now - n.node.launched_at
            new = relabelled(n, EXPIRED, f"expired: up {duration(age)}, past max_lifetime {duration(lifetime)}; "
                                         f"replaced as demand needs", ctx.matrix, self.name) if age > lifetime else None
            if new is not None:
                out.append(d._replace(facts=new))
                continue
            end = n.node.launched_at + lifetime
            if n.next_change is None or end < n.next_change:
                out.append(d._replace(facts=n._replace(next_change=end, next_what=LIFETIME_ENDS)))
        return out
