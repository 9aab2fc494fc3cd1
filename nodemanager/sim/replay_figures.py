"""One replay's figures: waits, paid and busy node-hours and where the rest went, kills and
badput split by cause, from the world at the end of the replay."""

from __future__ import annotations

import math
from typing import Any, Sequence

from nodemanager.sim.baselines import Policy
from nodemanager.sim.figures import HOUR, Bounds, Figures, destroy_boot_pairs, percentile
from nodemanager.sim.replay_jobs import JobSplit
from nodemanager.sim.replay_world import ReplayWorld
from nodemanager.sim.swf import SwfJob

__all__ = ["replay_figures"]

_INF = math.inf


def replay_figures(jobs: Sequence[SwfJob], split: JobSplit, policy: Policy, bounds: Bounds, w: ReplayWorld,
             counts: dict[str, int], drained_at: dict[str, float], end: float, alive_s: float,
             busy_s: float, peak: int, trace: str, window: str, wall: float) -> Figures:
    pool, cloud = w.pool, w.cloud
    st = pool.stats
    starts = pool.first_starts()
    job_start: list[float] = [-_INF] * len(jobs)
    started = [0] * len(jobs)
    for p in split.pieces:
        s = starts.get(p.job.id)
        if s is not None:
            started[p.index] += 1
            if s > job_start[p.index]:
                job_start[p.index] = s
    need = [0] * len(jobs)
    for p in split.pieces:
        need[p.index] += 1
    waits = sorted(job_start[k] - jobs[k].submit for k in range(len(jobs)) if started[k] == need[k])
    turnarounds = _turnarounds(jobs, split, pool.completions(), need)
    unfinished = len(jobs) - len(waits)
    paid = sum(cloud.billing_by_size(end).values())
    booting = 0.0
    for nid, launched in w.launched.items():
        gone = w.gone.get(nid, end)
        up_at = w.came_up.get(nid)
        joined = _INF if up_at is None else up_at + w.pool.join_delay
        booting += max(0.0, min(gone, joined) - launched)
    draining = 0.0
    for nid, t in drained_at.items():
        ended = w.gone.get(nid)
        if ended is not None:
            draining += max(0.0, ended - max(t, w.last_busy.get(nid, t)))
    idle = max(0.0, alive_s - busy_s - booting - draining)
    waste = {"busy": busy_s / HOUR, "idle": idle / HOUR, "booting": booting / HOUR,
             "draining": draining / HOUR, "billing": max(0.0, paid - alive_s) / HOUR}
    paid_h = paid / HOUR
    return Figures(
        policy=policy.name, trace=trace, window=window, cores_per_node=bounds.cores_per_node,
        paid_node_hours=paid_h, busy_node_hours=busy_s / HOUR,
        idle_paid_node_hours=paid_h - busy_s / HOUR,
        lower_bound_work_node_hours=bounds.work_node_hours,
        lower_bound_nowait_node_hours=bounds.nowait_node_hours,
        cost_ratio=paid_h / bounds.nowait_node_hours if bounds.nowait_node_hours else 0.0,
        wait_p50=percentile(waits, 50), wait_p95=percentile(waits, 95),
        wait_p99=percentile(waits, 99), wait_max=waits[-1] if waits else 0.0,
        wait_mean=sum(waits) / len(waits) if waits else 0.0,
        jobs_submitted=len(jobs), jobs_completed=len(jobs) - unfinished, jobs_killed=st.killed,
        jobs_unfinished=unfinished, badput_core_hours=st.badput / HOUR,
        boots=counts["boots"], drains=counts["drains"], drain_cancels=counts["drain_cancels"],
        destroys=counts["destroys"], late_give_backs=cloud.late_give_backs(), peak_nodes=peak,
        wall_seconds=wall,
        wide_jobs_split=split.wide_jobs, pieces=len(split.pieces), cycles=counts["cycles"],
        cycles_skipped=counts["skipped"], escalations=counts["escalations"], waste=waste,
        params={**{k: v for k, v in policy.params.items()}, "baseline": policy.baseline,
                "memory_capped": split.memory_capped},
        **_spot_figures(w, end),
        turnaround_p50=percentile(turnarounds, 50), turnaround_p95=percentile(turnarounds, 95),
        placement=w.pool.placement,
        destroy_boot_60s=destroy_boot_pairs(list(w.gone.values()), w.boot_times),
    )


def _spot_figures(w: ReplayWorld, end: float) -> dict[str, Any]:
    """Money paid and the kills split by cause: the cloud's reclaims, a graceful drain's
    retirement running out (evictions), or our other decisions."""
    st = w.pool.stats
    killed, badput = w.reclaim_kills
    return dict(money=w.cloud.cost(end), reclaims=len(w.cloud.reclaimed), jobs_evicted=st.evicted,
                jobs_killed_by={"by_reclaim": int(killed), "by_eviction": st.evicted,
                                "by_us": st.killed - int(killed) - st.evicted},
                badput_core_hours_by={"by_reclaim": round(badput / HOUR, 4),
                                      "by_us": round((st.badput - badput) / HOUR, 4)})


def _turnarounds(jobs: Sequence[SwfJob], split: JobSplit, done: Any, need: Sequence[int]) -> list[float]:
    """Completion minus submit of each trace job whose pieces all completed, sorted."""
    last = [-_INF] * len(jobs)
    count = [0] * len(jobs)
    for p in split.pieces:
        t = done.get(p.job.id)
        if t is not None:
            count[p.index] += 1
            last[p.index] = max(last[p.index], t)
    return sorted(last[k] - jobs[k].submit for k in range(len(jobs)) if count[k] == need[k])
