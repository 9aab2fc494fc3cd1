"""A trace's jobs as pool jobs: jobs wider than one node are split into node-sized pieces the pool
schedules independently (no co-scheduling); memory requests are rounded up to
:data:`MEMORY_QUANTUM` and capped at the node's usable memory (both counted)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from nodemanager.sim.pool import Job
from nodemanager.sim.swf import SwfJob

__all__ = ["MEMORY_QUANTUM", "Piece", "JobSplit", "split_jobs"]

MEMORY_QUANTUM = 256          # MB: job memory requests are rounded up to this


@dataclass(frozen=True, slots=True)
class Piece:
    """One pool job: a whole trace job, or one node-sized piece of a wider one."""

    index: int          # position of the trace job in the replayed list
    job: Job


@dataclass
class JobSplit:
    pieces: list[Piece]
    wide_jobs: int = 0
    memory_capped: int = 0


def split_jobs(jobs: Sequence[SwfJob], cores_per_node: int, usable_ram_mb: int) -> JobSplit:
    """Pool jobs for ``jobs``: one per job, or ceil(cores / cores_per_node) pieces for wider ones,
    each asking for its share of the memory (rounded up to :data:`MEMORY_QUANTUM`, at most
    ``usable_ram_mb``)."""
    out: list[Piece] = []
    wide = capped = 0
    cap = max(MEMORY_QUANTUM, usable_ram_mb // MEMORY_QUANTUM * MEMORY_QUANTUM)
    for i, j in enumerate(jobs):
        n = -(-j.cores // cores_per_node)
        if n > 1:
            wide += 1
        left = j.cores
        for k in range(n):
            cores = min(cores_per_node, left)
            left -= cores
            mem = 0
            if j.mem_mb > 0:
                mem = -(-int(math.ceil(j.mem_mb * cores / j.cores)) // MEMORY_QUANTUM) * MEMORY_QUANTUM
                if mem > cap:
                    mem = cap
                    capped += 1
            jid = f"{j.id}" if n == 1 else f"{j.id}.{k}"
            out.append(Piece(i, Job(id=jid, cpus=cores, ram_mb=mem, runtime=j.runtime,
                                    submit_time=j.submit, gpus=-(-j.gpus * cores // j.cores),
                                    walltime=j.requested_time if j.requested_time > 0 else None,
                                    owner=f"u{j.user}" if j.user >= 0 else None,
                                    cmd=f"x{j.executable}" if j.executable >= 0 else None)))
    return JobSplit(out, wide, capped)
