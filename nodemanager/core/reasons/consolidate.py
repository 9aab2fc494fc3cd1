"""Consolidation (``[Daemon] consolidate``): while no job is queued and the nodes taking jobs have
more free cores than ``consolidate_margin``, the busy node whose last job ends soonest (the
scheduler's job end times, else the draining design's estimate), then the one holding the least work, is
relabelled ``underused``, then the next, while the cores left free elsewhere still cover the
margin; a node whose graceful drain would evict a job (:mod:`nodemanager.core.retirement`) is
passed by; while consolidation of a size backs off (:mod:`nodemanager.core.consolidation_backoff`)
its nodes keep a wider margin, or none is drained. The matrix says what it gets: drained
gracefully (the cost matrix), it takes no new jobs and leaves when its last job ends; queued jobs that need its cores cancel the drain (placement's
draining tier comes before new boots). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from nodemanager.core.consolidate import (UNDERUSED, busy_cores, consolidating_why, free_cores, last_end,
                                          relabel_candidate, relabelled)
from nodemanager.core.plan_node import Decision, NodeFacts
from nodemanager.core.reasons.base import Context, Reason, Stage
from nodemanager.core.retirement import would_evict

__all__ = ["Consolidate"]


@dataclass(frozen=True)
class Consolidate(Reason):
    name: str = "consolidate"
    stage: Stage = Stage.LABELS
    budget: ClassVar[str | None] = "consolidate"
    switches: ClassVar[tuple[str, ...]] = ("consolidate",)
    time_settings: ClassVar[tuple[str, ...]] = ("consolidate",)
    relabels: ClassVar[str | None] = UNDERUSED

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        settings = ctx.settings
        # only while no job is queued: queued jobs may need any free core, nothing is spare
        if not settings.consolidate or any(q.count > 0 for q in ctx.snapshot.demand):
            return []
        now = ctx.snapshot.now
        # each candidate's free cores once; only busy nodes stay up anyway: an idle node's cores
        # would keep it from being given back
        free = {d.facts.node.id: (d, free_cores(d.facts)) for d in candidates if relabel_candidate(d.facts)}
        spare = sum(cores for _, cores in free.values())
        ends = {node_id: last_end(d.facts, ctx.estimator, now) for node_id, (d, cores) in free.items() if cores > 0}
        out = []
        # soonest end first (it leaves soonest), then the fewest busy cores (the least work held)
        for node_id in sorted(ends, key=lambda k: (ends[k], busy_cores(free[k][0].facts), k)):
            d, cores = free[node_id]
            margin, backoff = _margin(d.facts, settings.consolidate_margin, ctx)
            # a node whose drain would evict jobs is no candidate: its cores stay spare
            if spare - cores < margin or would_evict(d.facts.worker, now):
                continue
            spare -= cores
            why = consolidating_why(d.facts, ends[node_id] - now, spare) + (f" ({backoff})" if backoff else "")
            new = relabelled(d.facts, UNDERUSED, why, ctx.matrix, self.name)
            if new is not None:
                out.append(d._replace(facts=new))
        return out


def _margin(facts: NodeFacts, configured: int, ctx: Context) -> tuple[float, str]:
    """The free cores to keep before draining this node, widened (or infinite: paused) while
    consolidation of its size backs off, and the words why."""
    size = facts.size
    factor, why = ctx.snapshot.consolidation_backoff.get(size.name if size else facts.node.size, (1.0, ""))
    if factor == 1.0:
        return float(configured), ""
    return factor * max(configured, size.cores if size else 1), why
