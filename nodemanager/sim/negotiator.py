"""The simulated pool's job queue and negotiator: idle jobs in queue order matched to startds whose
START accepts them, and the demand the idle jobs make (see :mod:`nodemanager.sim.pool`)."""

from __future__ import annotations

import heapq
import math
from typing import Any

from nodemanager.core.walltime import walltime_bucket
from nodemanager.model import Demand, Size
from nodemanager.sim.end_grouping import END_PLACEMENTS, Runtime, end_distance, node_end
from nodemanager.sim.job import Job
from nodemanager.sim.startd import SimStartd

__all__ = ["Negotiator", "PLACEMENTS", "Shape", "size_attributes"]

# a queue of alike jobs: (cpus, ram, gpus, requirements, and with spot sizes the walltime's bucket,
# owner and command)
Shape = tuple[int, int, int, str | None, float | None, str | None, str | None]


def size_attributes(size: Size) -> dict[str, Any]:
    """The machine attributes a size's startds advertise (``[Size NAME] attributes``), as values."""
    if not size.attributes:
        return {}
    from nodemanager.classad.expressions import parse, plain_value
    return {name: plain_value(parse(expr)) for name, expr in size.attributes}


# breadth: first fit in join order (the default); depth: best fit, the fullest startd that fits;
# steered: the lowest NodeManagerKeepRank that fits (none: 0), as deploy/htcondor/steering.config;
# ends, ends-oracle: the node whose jobs end closest to the job's end (nodemanager.sim.end_grouping)
PLACEMENTS = ("breadth", "depth", "steered", *END_PLACEMENTS)


class Negotiator:
    """The queue and matching side of :class:`~nodemanager.sim.pool.SimPool` (mixed into it)."""

    now: float
    sizes: tuple[Size, ...]
    placement: str
    runtime: Runtime | None     # the end-grouping placements' runtime estimate
    mem_scaling: float
    negotiation_interval: float
    _joined: dict[str, SimStartd]
    _queue: dict[Shape, list[tuple[int, Job]]]
    walltimes: bool
    _demand: tuple[Demand, ...] | None    # demand() until the queue changes
    _eligible: dict[tuple[int, str], frozenset[str]]
    _order: dict[str, int]
    _first_start: dict[str, float]
    _waits: list[float]
    _idle_count: int
    _dirty: bool
    _neg_at: float | None
    _c: dict[str, int]
    _wait_total: float
    _wait_max: float

    def _touch(self, st: SimStartd, freed: bool = False) -> None:
        """A startd changed (the pool's own)."""
        raise NotImplementedError

    def _enqueue(self, job: Job) -> None:
        shape: Shape = (job.cpus, job.ram_mb, job.gpus, job.requirements, None, None, None)
        if self.walltimes:
            shape = (*shape[:4], walltime_bucket(job.walltime), job.owner or "", job.cmd)
        heapq.heappush(self._queue.setdefault(shape, []), (self._order[job.id], job))
        self._demand = None
        self._idle_count += 1
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        self._dirty = True
        if self._neg_at is None and self._idle_count and self.negotiation_interval > 0:
            k = math.floor(self.now / self.negotiation_interval) + 1
            self._neg_at = k * self.negotiation_interval

    # ---------------------------------------------------------------- matching

    def _negotiate(self) -> None:
        self._dirty = False
        if not self._idle_count:
            return
        now = self.now
        nodes = [st for st in self._joined.values() if st.alive and st.free_cpus > 0 and
                 (not st.draining or (st.start_expr or "false").strip().lower() not in ("false", "0"))]
        if not nodes:
            return
        heads = [(q[0][0], shape) for shape, q in self._queue.items() if q]
        heapq.heapify(heads)
        while heads and nodes:
            _, shape = heapq.heappop(heads)
            q = self._queue[shape]
            job = q[0][1]
            target = self._by_end(job, nodes, now) if self.placement in END_PLACEMENTS else None
            for st in nodes if target is None else ():
                if st.free_cpus >= job.cpus and st.free_memory >= job.ram_mb and st.accepts(job, now):
                    if self.placement == "breadth":
                        target = st
                        break
                    if self.placement == "steered":
                        if target is None or st.attrs.get("NodeManagerKeepRank", 0) < target.attrs.get(
                                "NodeManagerKeepRank", 0):
                            target = st
                        continue
                    # depth: the fullest startd that fits (fewest free cores, then least memory)
                    if target is None or (st.free_cpus, st.free_memory) < (target.free_cpus,
                                                                            target.free_memory):
                        target = st
            if target is None:
                continue
            heapq.heappop(q)
            self._demand = None
            self._idle_count -= 1
            target.start_job(job, now)
            self._touch(target)
            self._c["started"] += 1
            if job.id not in self._first_start:
                self._first_start[job.id] = now
                wait = now - job.submit_time
                self._waits.append(wait)
                self._wait_total += wait
                if wait > self._wait_max:
                    self._wait_max = wait
            if target.free_cpus <= 0:
                nodes.remove(target)
            if q:
                heapq.heappush(heads, (q[0][0], shape))
            else:
                del self._queue[shape]
        self._dirty = False

    def _by_end(self, job: Job, nodes: list[SimStartd], now: float) -> SimStartd | None:
        """The node that fits ``job`` whose running jobs end closest to the job's own expected
        end, then the lowest keep rank (:mod:`nodemanager.sim.end_grouping`)."""
        runtime = self.runtime
        if runtime is None:
            raise RuntimeError(f"placement {self.placement}: no runtime estimate set")
        r = runtime(job)
        end = None if r is None else now + r
        best: tuple[float, float] | None = None
        target = None
        for st in nodes:
            if st.free_cpus >= job.cpus and st.free_memory >= job.ram_mb and st.accepts(job, now):
                key = (end_distance(node_end(((s.job, s.start) for s in st.dslots.values()), now, runtime), end),
                       st.attrs.get("NodeManagerKeepRank", 0))
                if best is None or key < best:
                    best, target = key, st
        return target

    def _idle_jobs(self) -> list[tuple[int, Job]]:
        return sorted(item for q in self._queue.values() for item in q)

    def demand(self) -> tuple[Demand, ...]:
        """Idle jobs grouped by (cpus, ram_mb, gpus, requirements, and where a spot size prices
        them the walltime's bucket, owner and command), largest groups first; jobs with
        requirements carry the sizes whose offline machine ad satisfies them (the scheduler side
        decides), GPU jobs their GPU count (the core matches it to sizes' GPUs)."""
        if self._demand is not None:
            return self._demand
        # the heap's head is the earliest queue place, which is the earliest submitted job
        out = [Demand(cpus=c, ram_mb=m, count=len(q), oldest_submit=q[0][1].submit_time, gpus=g,
                      requirements=r, walltime=wt, user=u, name=n, **self._matched(g, r))
               for (c, m, g, r, wt, u, n), q in self._queue.items() if q]
        out.sort(key=lambda d: (-d.count, d.cpus, d.ram_mb))
        self._demand = tuple(out)
        return self._demand

    def _matched(self, gpus: int, requirements: str | None) -> dict[str, Any]:
        """``sizes``/``unmatched`` for jobs with ``requirements`` (nothing for plain jobs)."""
        if not requirements:
            return {}
        eligible = self._eligible.get((gpus, requirements))
        if eligible is None:
            from nodemanager.classad.expressions import evaluate, is_true
            job_ad = {"RequestGPUs": gpus}
            eligible = self._eligible[(gpus, requirements)] = frozenset(
                s.name for s in self.sizes if s.gpus >= gpus and is_true(evaluate(
                    requirements, job_ad, self.now, target={
                        **size_attributes(s), "Cpus": s.cores, "GPUs": s.gpus,
                        "Memory": int(s.ram_mb * self.mem_scaling)})))
        return {"sizes": eligible,
                "unmatched": None if eligible else f"no size's machine ad satisfies {requirements}"}
