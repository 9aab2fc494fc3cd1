"""The embedded default: a simulated cloud, a simulated HTCondor pool and a synthetic job stream.

API note::

    world = SimWorld(settings, clock=time.time)        # options from [Scheduler] type = simulated
    world.cloud        # a CloudDriver (thread-safe; every call first brings the world to clock())
    world.scheduler    # a Scheduler (same)
    world.advance(now) # run the world up to ``now`` in event order (the wrappers do this for you)
    world.sim_cloud, world.pool, world.jobs            # the parts, for tests and reports

The world keeps its own time and moves it event by event (VM running, startd joining, job
arrivals and ends) up to the outer clock, so a cloud boot delay and a startd join delay hold
even when the daemon polls rarely. Jobs arrive in bursts every ``burst_every``: the first of
``burst_size`` jobs, later ones of a quarter to all of ``burst_size`` (plus ``jobs_per_hour``
spread at random), each running about ``job_runtime`` (±50%) on
``job_cpus`` cores; with the shipped config a new user sees nodes boot, run jobs, go idle, drain
and disappear within a few minutes. Deterministic for a given ``seed`` and clock.
"""

from __future__ import annotations

import math
import random
import threading
from typing import Any, Callable, Mapping

from nodemanager.cloud import CloudDriver
from nodemanager.configuration.config import ConfigError, Problem
from nodemanager.sim.pool_kind import KIND as POOL_KIND
from nodemanager.model import CloudNode, Size, Worker
from nodemanager.scheduler import (Confirmation, DrainSchedule, DrainTicket, DrainingStats,
                                   Scheduler, SchedulerPoll)
from nodemanager.configuration.settings import Settings
from nodemanager.sim.cloud import SimCloud
from nodemanager.sim.pool import Job, SimPool

__all__ = ["SimWorld", "JobStream", "WorldOptions", "world_options"]


class WorldOptions:
    """The ``[Scheduler]`` options of ``type = simulated``, typed (defaults = the shipped demo)."""

    def __init__(self, *, boot_delay: float = 20.0, join_delay: float = 5.0, burst_every: float = 180.0,
                 burst_size: int = 12, jobs_per_hour: float = 0.0, job_runtime: float = 90.0,
                 job_cpus: int = 1, seed: int = 1) -> None:
        self.boot_delay = boot_delay
        self.join_delay = join_delay
        self.burst_every = burst_every
        self.burst_size = burst_size
        self.jobs_per_hour = jobs_per_hour
        self.job_runtime = job_runtime
        self.job_cpus = job_cpus
        self.seed = seed


def world_options(settings: Settings) -> WorldOptions:
    """Typed options from ``settings.scheduler.options``; a bad value is a ConfigError naming it."""
    parsers: Mapping[str, Callable[[str], Any]] = POOL_KIND.numbers
    values: dict[str, Any] = {}
    problems = []
    for option, raw in settings.scheduler.options.items():
        parse = parsers.get(option)
        if parse is None:
            problems.append(Problem(settings.source or "config", None, "Scheduler", option,
                                    "not an option of the simulated scheduler"))
            continue
        try:
            value = parse(str(raw))
        except ValueError as exc:
            problems.append(Problem(settings.source or "config", None, "Scheduler", option,
                                    f"{raw!r}: {exc}"))
            continue
        values[option] = value
    if problems:
        raise ConfigError(problems)
    return WorldOptions(**values)


class JobStream:
    """Bursts of jobs every ``burst_every`` seconds (the first, full one at start) plus a Poisson
    trickle."""

    def __init__(self, start: float, opts: WorldOptions) -> None:
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self._seq = 0
        self._next_burst = start if opts.burst_every > 0 and opts.burst_size > 0 else math.inf
        self._next_single = self._gap(start)

    def _gap(self, t: float) -> float:
        rate = self.opts.jobs_per_hour / 3600.0
        return t + self.rng.expovariate(rate) if rate > 0 else math.inf

    def _burst_size(self) -> int:
        """The first burst is full; later ones vary between a quarter and all of ``burst_size``,
        so the pool both grows and shrinks."""
        full = self.opts.burst_size
        if self._seq == 0:
            return full
        return self.rng.randint(max(1, full // 4), full)

    def next_time(self) -> float:
        return min(self._next_burst, self._next_single)

    def _job(self, t: float) -> Job:
        self._seq += 1
        runtime = max(1.0, self.opts.job_runtime * self.rng.uniform(0.5, 1.5))
        return Job(id=str(self._seq), cpus=self.opts.job_cpus, ram_mb=1000 * self.opts.job_cpus,
                   runtime=runtime, submit_time=t, walltime=runtime * 2)

    def due(self, now: float) -> list[Job]:
        """The jobs submitted up to ``now`` that were not handed out yet."""
        jobs: list[Job] = []
        while self.next_time() <= now:
            if self._next_burst <= self._next_single:
                t = self._next_burst
                jobs.extend(self._job(t) for _ in range(self._burst_size()))
                self._next_burst = t + self.opts.burst_every
            else:
                t = self._next_single
                jobs.append(self._job(t))
                self._next_single = self._gap(t)
        return jobs


class SimWorld:
    """Cloud + pool + jobs under one lock, on the world's own event-ordered time."""

    def __init__(self, settings: Settings, clock: Callable[[], float], *,
                 options: WorldOptions | None = None, quotas: Mapping[str, int] | None = None,
                 negotiation_interval: float = 0.0, jobs: bool = True) -> None:
        self.opts = options or world_options(settings)
        self.clock = clock
        self.now = clock()
        self._lock = threading.RLock()
        self.pool = SimPool(lambda: self.now, join_delay=self.opts.join_delay,
                            negotiation_interval=negotiation_interval,
                            mem_scaling=settings.core.node_mem_scaling)
        self.sim_cloud = SimCloud(clock=lambda: self.now, sizes=settings.core.sizes,
                                  cluster=settings.cloud.cluster, boot_delay=self.opts.boot_delay,
                                  quotas=quotas, on_running=self._running, on_terminated=self._terminated)
        self.jobs = JobStream(self.now, self.opts) if jobs else None
        self.cloud: CloudDriver = _LockedCloud(self)
        self.scheduler: Scheduler = _LockedScheduler(self)

    def _running(self, node: CloudNode, size: Size) -> None:
        self.pool.vm_started(node, size)

    def _terminated(self, node_id: str) -> None:
        self.pool.vm_stopped(node_id)

    def advance(self, now: float | None = None) -> None:
        """Run cloud, pool and job arrivals up to ``now`` (default: the outer clock) in time order."""
        now = self.clock() if now is None else now
        with self._lock:
            while True:
                times = [t for t in (self.sim_cloud.next_event_time(), self.pool.next_event_time(),
                                     self.jobs.next_time() if self.jobs else None)
                         if t is not None and t <= now]
                if not times:
                    break
                self.now = max(self.now, min(times))
                self.sim_cloud.advance(self.now)
                if self.jobs is not None:
                    for job in self.jobs.due(self.now):
                        self.pool.submit(job)
                self.pool.advance(self.now)
            self.now = max(self.now, now)
            self.sim_cloud.advance(self.now)
            self.pool.advance(self.now)


class _LockedCloud:
    """The world's cloud as a CloudDriver: each call brings the world to the outer clock first."""

    def __init__(self, world: SimWorld) -> None:
        self._w = world

    def list_nodes(self) -> list[CloudNode]:
        with self._w._lock:
            self._w.advance()
            return self._w.sim_cloud.list_nodes()

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        with self._w._lock:
            self._w.advance()
            return self._w.sim_cloud.create_node(size, name, tags)

    def destroy_node(self, node: CloudNode) -> None:
        with self._w._lock:
            self._w.advance()
            self._w.sim_cloud.destroy_node(node)

    def set_tags(self, node: CloudNode, tags: Mapping[str, str]) -> None:
        with self._w._lock:
            self._w.advance()
            self._w.sim_cloud.set_tags(node, tags)


class _LockedScheduler:
    """The world's pool as a Scheduler: each call brings the world to the outer clock first."""

    name = "simulated"

    def __init__(self, world: SimWorld) -> None:
        self._w = world

    def poll(self) -> SchedulerPoll:
        with self._w._lock:
            self._w.advance()
            return self._w.pool.poll()

    def drain(self, worker: Worker, schedule: DrainSchedule, reason: str) -> DrainTicket:
        with self._w._lock:
            self._w.advance()
            return self._w.pool.drain(worker, schedule, reason)

    def cancel_drain(self, ticket: DrainTicket) -> None:
        with self._w._lock:
            self._w.advance()
            self._w.pool.cancel_drain(ticket)

    def confirm_drained(self, ticket: DrainTicket) -> Confirmation:
        with self._w._lock:
            self._w.advance()
            return self._w.pool.confirm_drained(ticket)

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        with self._w._lock:
            self._w.advance()
            self._w.pool.escalate(ticket, schedule)

    def node_destroyed(self, worker_name: str) -> None:
        with self._w._lock:
            self._w.advance()
            self._w.pool.node_destroyed(worker_name)

    def steer(self, ranks: Any) -> int:
        with self._w._lock:
            self._w.advance()
            return self._w.pool.steer(ranks)

    def draining_stats(self) -> DrainingStats:
        with self._w._lock:
            return self._w.pool.draining_stats()
