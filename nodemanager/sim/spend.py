"""Who spent what in a replay (``nodemanager simulate --by user|group|size``): the daemon's
attribution (:mod:`nodemanager.core.attribution`) over the simulated cloud's nodes, each node's
paid time (billing rounding included) shared by the trace jobs that ran on it, pro rata by their
core-seconds; users and groups are the SWF's user and group ids (fields 12 and 13)."""

from __future__ import annotations

import bisect
from typing import Any, Sequence

from nodemanager.core.attribution import NodeUse, attribute, top
from nodemanager.sim.cloud import SimCloud
from nodemanager.sim.replay_jobs import JobSplit
from nodemanager.sim.pool import SimPool
from nodemanager.sim.swf import SwfJob

__all__ = ["replay_spend", "spend_lines", "SPEND_ROWS"]

SPEND_ROWS = 10  # rows shown per policy; the rest as "other"


def _who(job: SwfJob) -> tuple[str, str]:
    return (f"user {job.user}" if job.user >= 0 else "user unknown",
            f"group {job.group}" if job.group >= 0 else "group unknown")


def replay_spend(jobs: Sequence[SwfJob], split: JobSplit, cloud: SimCloud, pool: SimPool, launched: dict[str, float],
                 end: float, by: str) -> list[dict[str, Any]]:
    """Node-hours and money per ``by`` over the whole replay, dearest first, bounded."""
    owner = {p.job.id: _who(jobs[p.index]) for p in split.pieces}
    # a name is used again by a later VM: a job belongs to the last VM of its name launched before it started
    by_machine: dict[str, list[tuple[float, str]]] = {}
    for nid, start in launched.items():
        node = cloud.node(nid)
        if node is not None:
            by_machine.setdefault(node.hostname or f"{node.name}.{pool.domain}", []).append((start, nid))
    for vms in by_machine.values():
        vms.sort()
    shares: dict[str, dict[tuple[str, str], float]] = {}
    for e in pool.ended_log or ():
        key, vms = owner.get(e.job.id), by_machine.get(e.node, [])
        k = bisect.bisect_right(vms, (e.start, "\uffff")) - 1
        if key is not None and k >= 0:
            mine = shares.setdefault(vms[k][1], {})
            mine[key] = mine.get(key, 0.0) + e.job.cpus * (e.end - e.start)
    prices = {s.name: s.price for s in cloud.sizes.values()}
    uses = []
    for nid, start in launched.items():
        node = cloud.node(nid)
        if node is not None:
            uses.append(NodeUse(node_id=nid, size=node.size, price=prices.get(node.size, 0.0), start=start,
                                end=start + cloud.paid_seconds(nid, end), shares=shares.get(nid, {})))
    rows = top(attribute(uses, -float("inf"), float("inf"), by), SPEND_ROWS)
    return [{by: r.name, "node_hours": round(r.node_hours, 4), "money": round(r.money, 4),
             "core_hours": round(r.core_hours, 4)} for r in rows]


def spend_lines(policy: str, by: str, rows: Sequence[dict[str, Any]]) -> list[str]:
    """The rows of one policy as text lines under a heading."""
    out = [f"who spent what under {policy}, by {by} (a node's paid time shared by its jobs' core-seconds):"]
    out += [f"  {r[by]:<16} {r['node_hours']:>10.1f} nh {r['money']:>10.2f} money {r['core_hours']:>10.1f} ch"
            for r in rows]
    return out
