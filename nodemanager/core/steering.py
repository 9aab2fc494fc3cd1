"""Placement steering: which of our nodes new jobs should fill first. Pure.

:func:`keep_ranks` ranks the workers of our nodes that take jobs by how long the controller
expects to keep them: the reverse of the victim order (:func:`nodemanager.core.victims.order_victims`,
the order nodes are given back in), so the node given back last is rank 1 and the nodes being
given back now (a drain of ours under way, or a drain or destroy planned this cycle) come last.
Nodes are ranked first by when their last job is expected to end (latest first: the scheduler's
job end times, else the victim estimate's time to go, as consolidation reads them), then in the
victim order reversed.
The adapters turn ranks into what their scheduler prefers (SLURM: a lower node ``Weight``;
HTCondor: a machine attribute the negotiator's ``NEGOTIATOR_PRE_JOB_RANK`` prefers low).
A worker not ranked (another's node, down, lost, booting) keeps the site's own setting.
"""

from __future__ import annotations

from typing import Mapping

from nodemanager.core.consolidate import worker_last_end
from nodemanager.core.victims import Estimator, order_victims
from nodemanager.model import ItemKind, Plan, Snapshot, VictimCost

__all__ = ["keep_ranks"]

_LEAVING = (ItemKind.DRAIN, ItemKind.DESTROY)


def keep_ranks(plan: Plan, snapshot: Snapshot, horizon: float, estimator: Estimator,
               prices: Mapping[str, tuple[float, int]] | None = None) -> dict[str, int]:
    """Worker name -> rank (1: fill first, kept longest) for the workers of our nodes that take
    jobs or drain for us. ``horizon`` is ``victim_horizon``; ``prices``: size name -> (price per
    hour, cores), as the victim order weighs what keeping a node costs."""
    workers = {w.name: w for w in snapshot.workers}
    now = plan.now
    staying: list[tuple[str, VictimCost]] = []
    ends: dict[str, float] = {}
    keeping: dict[str, tuple[float, int]] = {}
    leaving: list[str] = []
    for e in plan.nodes:
        w = workers.get(e.worker) if e.worker is not None else None
        if w is None or e.gone or e.lost:
            continue
        if e.our_drain_since is not None or e.action in _LEAVING:
            leaving.append(w.name)
        elif e.up:
            staying.append((w.name, estimator(w, now)))
            ends[w.name] = worker_last_end(w, estimator, now)
            if prices is not None and e.size in prices:
                keeping[w.name] = prices[e.size]
    # the victim order reversed, then (a stable sort) the latest expected end first
    kept_longest = sorted(order_victims(staying, horizon, keeping)[::-1], key=lambda name: -ends[name])
    order = kept_longest + sorted(leaving)
    return {name: k for k, name in enumerate(order, start=1)}
