"""Pending SLURM jobs as demand: the jobs more nodes would start, grouped by what one node must
offer them (cores, memory, GPUs, the sizes that can run them, requested time). Pure.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from nodemanager.model import Demand, Size
from nodemanager.scheduler.slurm_json import SlurmJob
from nodemanager.scheduler.slurm_match import SlurmMatcher
from nodemanager.core.walltime import walltime_bucket

__all__ = ["demand_from_jobs", "DEMAND_REASONS"]

# Pending reasons that more nodes would cure; held, dependent, throttled or limited jobs are not
# demand (docs/slurm.md says why for each). Constraints: the features exist on no node up now.
DEMAND_REASONS = frozenset({"None", "Resources", "Priority", "NodeDown", "ReqNodeNotAvail", "Constraints"})


def demand_from_jobs(jobs: Iterable[SlurmJob], partitions: frozenset[str] = frozenset(),
                     reasons: frozenset[str] = DEMAND_REASONS,
                     sizes: Sequence[Size] = (), by_owner: bool = False) -> tuple[Demand, ...]:
    """Pending jobs that more nodes would start, grouped by per-node need.

    A job asking for N nodes counts as N nodes' worth of demand (``count``); per node it needs
    ``ceil(cpus / nodes)`` cores and ``memory_per_node`` (or ``memory_per_cpu`` × cores) MB.
    Held, dependent, throttled (``JobArrayTaskLimit``) or limit-blocked jobs are not demand, nor
    jobs whose size could not be read (``sized``). With ``sizes``, each item also says which
    sizes can run its jobs (:class:`~nodemanager.scheduler.slurm_match.SlurmMatcher`). Jobs are
    also grouped by their ``--time`` rounded up to a bucket (``Demand.walltime``, see
    :mod:`nodemanager.core.walltime`). With ``by_owner`` (runtime prediction), also by user and
    job name (``Demand.user``, ``Demand.name``).
    """
    matcher = SlurmMatcher(sizes) if sizes else None
    groups: dict[tuple[Any, ...], list[float]] = {}
    counts: dict[tuple[Any, ...], int] = {}
    for job in jobs:
        if job.state != "PENDING" or job.state_reason not in reasons or not job.sized:
            continue
        if partitions and not (set(job.partition.split(",")) & partitions):
            continue
        per_node_cpus = math.ceil(job.cpus / job.node_count)
        if job.memory_per_node is not None:
            mem = job.memory_per_node
        elif job.memory_per_cpu is not None:
            mem = job.memory_per_cpu * per_node_cpus
        else:
            mem = 0
        walltime = walltime_bucket(job.walltime)
        key: tuple[Any, ...] = (per_node_cpus, mem, 0, None, None, walltime)
        if matcher is not None:
            n = matcher.need(job, per_node_cpus, mem)
            key = (n.cpus, n.ram_mb, n.gpus, n.sizes, n.unmatched, walltime if n.unmatched is None else None)
        key += (job.user or None, job.name or None) if by_owner else (None, None)
        counts[key] = counts.get(key, 0) + job.node_count * job.array_tasks
        if job.submit_time:
            groups.setdefault(key, []).append(job.submit_time)
    return tuple(
        Demand(cpus=k[0], ram_mb=k[1], count=counts[k], oldest_submit=min(groups[k]) if groups.get(k) else None,
               gpus=k[2], sizes=k[3], unmatched=k[4], walltime=k[5], user=k[6], name=k[7])
        for k in sorted(counts, key=lambda k: (k[0], k[1], k[2], sorted(k[3] or ()), k[4] or "", k[5] or 0.0,
                                               k[6] or "", k[7] or ""))
    )
