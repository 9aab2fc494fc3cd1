"""A graceful drain of ours never ends by evicting jobs: a drain (the matrix's, for consolidation,
``max_lifetime``, drift or any other cause; not an operator's, nor of a node the cloud reclaims) of
a busy node whose running jobs are not all expected to end before its retirement ends is not
started, and a drain of ours under way whose jobs would be evicted is cancelled before that (unless ``[Drain]`` escalation is set:
then the site chose how our drains end). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nodemanager.core.facts import matches
from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.core.retirement import would_evict
from nodemanager.model import Blocked, Cause, ItemKind
from policy_matrix.vocabulary import BUSY

__all__ = ["WouldEvict"]


@dataclass(frozen=True)
class WouldEvict(Reason):
    name: str = "would_evict"
    stage: Stage = Stage.AFTER_DEMAND

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        snap = ctx.snapshot
        now = snap.now
        drain = ItemKind.DRAIN
        out = []
        for d in candidates:
            # most nodes: no drain wanted, none of ours under way
            if d.want is drain:
                # a node like down (a cloud reclaim notice) goes whatever we do: its drain only
                # keeps new jobs off it
                if d.forced or d.facts.core_state != BUSY:
                    continue
                why = would_evict(d.facts.worker, now)
                if why:
                    out.append(d.held_back(Blocked.WOULD_EVICT,
                                           f"drain held back: a graceful drain would evict: {why}; {d.reason}"))
            elif (d.drain is not None and d.want is None and ctx.escalation is None
                  and not matches(d.facts.node, d.facts.worker, snap.forced_drains)):
                why = would_evict(d.facts.worker, now)
                if why:
                    out.append(d._replace(want=ItemKind.CANCEL_DRAIN, cancellable=True, blocked=None,
                                          request_id=d.drain.request_id, schedule=None,
                                          cause=Cause(self.name, "retirement"),
                                          reason=f"cancel our drain: it would evict: {why}"))
        return out
