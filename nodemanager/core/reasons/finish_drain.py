"""A drain of ours under way: destroy the node once drained (or when the matrix asks for a
shutdown of a node that runs nothing); until then, say so. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Action, Cause, ItemKind
from nodemanager.text import duration
from policy_matrix.vocabulary import DOWN, UNPAIRED

__all__ = ["FinishOurDrain"]


@dataclass(frozen=True)
class FinishOurDrain(Reason):
    name: str = "finish_drain"
    stage: Stage = Stage.WANTS

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        now = ctx.snapshot.now
        out = []
        for d in candidates:
            f = d.facts
            drain = f.our_drain
            if drain is None:
                continue
            shutdown = f.core_state in (DOWN, UNPAIRED) and f.maction is Action.START_SHUTDOWN
            if f.drained or shutdown:
                text = (f"our drain (started {duration(now - drain.since)} ago) finished: {f.cls.why}"
                        if f.drained else f"matrix says START_SHUTDOWN during our drain: {f.cls.why}")
                out.append(d._replace(want=ItemKind.DESTROY, cancellable=False, drain=drain,
                                      request_id=drain.request_id, reason=text,
                                      cause=Cause(self.name, "our drain" if f.drained else f.rule)))
            else:
                out.append(d._replace(drain=drain, request_id=drain.request_id,
                                      reason=f"our drain under way for {duration(now - drain.since)}: "
                                             f"{f.cls.why}"))
        return out
