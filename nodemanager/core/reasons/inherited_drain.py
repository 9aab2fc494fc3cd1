"""A listed node whose worker drains with our reason since before the VM was launched: the drain
was an older VM's of that name (a destroy cut short before the scheduler was told); it is
cancelled, whatever else was proposed for the node, never finished by a destroy. Pure.

The drain's start is on the scheduler's clock, the launch time on ours (the cloud's, corrected by
the measured skew); the scheduler's host may keep either clock, so a drain is older than the VM
only when it is older than the launch on both: a head node whose clock is off (a new leader)
never takes a drain started after the launch for an inherited one."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Sequence

from nodemanager.core.classify import is_our_drain
from nodemanager.core.pair import HEARD_SKEW
from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.model import Cause, ItemKind

__all__ = ["InheritedDrain"]

_DRAINING = attrgetter("draining")


@dataclass(frozen=True)
class InheritedDrain(Reason):
    name: str = "inherited_drain"
    stage: Stage = Stage.LAST

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        if ctx.frozen or ctx.snapshot.paused:
            return []
        # most cycles no worker drains: one scan of the workers, cheaper than of the decisions
        if not any(map(_DRAINING, ctx.snapshot.workers)):
            return []
        out = []
        # the launch on the cloud's clock is that much earlier than on ours when ours is ahead
        back = min(0.0, ctx.snapshot.cloud_clock_skew or 0.0)
        for d in candidates:
            w = d.facts.worker
            if (w is not None and w.draining and is_our_drain(w) and not d.facts.held
                    and 0 < w.drain_since < d.facts.node.launched_at + back - HEARD_SKEW):
                out.append(d._replace(
                    want=ItemKind.CANCEL_DRAIN, cancellable=False, blocked=None, schedule=None,
                    request_id=w.drain_request_id, cause=Cause(self.name, "drain older than the VM"),
                    reason=f"worker {w.name} joined drained by us ({w.drain_reason}) for an older VM "
                           "of this name: the drain is cancelled"))
        return out
