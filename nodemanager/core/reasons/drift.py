"""Settings drift: a busy node booted with other size or image settings than configured now (its
``TAG_SETTINGS`` against ``size_digests``) is relabelled ``expired``; the matrix says what it gets
(the cost matrix drains it, to be replaced as demand needs). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping, Sequence

from nodemanager.core.consolidate import EXPIRED, relabel_candidate, relabelled
from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import CloudNode
from nodemanager.tags import TAG_SETTINGS

__all__ = ["Drift", "drifted"]


def drifted(node: CloudNode, digests: Mapping[str, str]) -> bool:
    """Whether ``node`` was booted with other settings than its size's digest now."""
    tags = node.tags
    booted = tags.get(TAG_SETTINGS) if tags else None
    return bool(booted) and booted != digests.get(node.size, booted)


@dataclass(frozen=True)
class Drift(Reason):
    name: str = "drift"
    stage: Stage = Stage.LABELS
    budget: ClassVar[str | None] = "drift"
    switches: ClassVar[tuple[str, ...]] = ("size_digests",)
    time_settings: ClassVar[tuple[str, ...]] = ()
    relabels: ClassVar[str | None] = EXPIRED

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        if not ctx.settings.size_digests:
            return []
        digests = dict(ctx.settings.size_digests)
        out = []
        for d in candidates:
            n = d.facts
            if drifted(n.node, digests) and relabel_candidate(n):
                new = relabelled(n, EXPIRED, f"expired: booted with other [Size {n.node.size}] or [Cloud Create] "
                                             f"settings than configured now; replaced as demand needs", ctx.matrix, self.name)
                if new is not None:
                    out.append(d._replace(facts=new))
        return out
