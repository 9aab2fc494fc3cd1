"""The simulated HTCondor pool: partitionable-slot startds on simulated VMs, a job queue, a negotiator.

API (used by the embedded default world, the simulator and the tests)::

    pool = SimPool(clock, join_delay=60.0, negotiation_interval=60.0, max_retirement=0.0,
                   vacate_time=600.0, kill_time=0.0, mem_scaling=0.95, requeue_killed=True,
                   update_interval=300.0)
    pool.submit(Job(id="1", cpus=1, ram_mb=2000, runtime=3600.0, submit_time=t, walltime=7200.0))
                                     # (advances to clock() first; the job queues at clock())
    pool.vm_started(node, size)      # a CloudNode of a Size booted now: its startd joins after join_delay
    pool.vm_stopped(node.id)         # the VM is gone: its running jobs are killed (and requeued)
    pool.restart_startd(node.id)     # fault: the startd restarts (jobs killed, drain gone, ids reset)
    pool.advance(now)                # run everything due up to now (jobs end, drains progress, matching)
    pool.next_event_time()           # -> float | None: when something next happens by itself
    pool.stats                       # -> PoolStats (frozen): jobs, waits, badput, drain counts
    pool.job_waits()                 # -> list[float]: submit-to-first-start wait of every started job
    pool.draining_stats()            # -> DrainingStats (per node and total, for the metrics)
    pool.demand()                    # -> idle jobs grouped by (cpus, ram_mb), as poll() reports them
    pool.startd(node_id)             # -> SimStartd | None: alive, dslots, cpus, free_cpus, draining...
    pool.touched                     # set of node ids whose startd changed (its reader clears it)

    # the Scheduler port (name "simulated"); every call first advances to clock()
    pool.poll() -> SchedulerPoll     # workers (scheduler="htcondor", ad = the p-slot ad), demand
    pool.drain(worker, schedule, reason) -> DrainTicket   (DrainRefused if busy since the snapshot)
    pool.cancel_drain(ticket); pool.confirm_drained(ticket) -> Confirmation
    pool.escalate(ticket, schedule); pool.node_destroyed(name)

The port methods are the HTCondor adapter's own code (:class:`HTCondorScheduler`) running over
in-process bindings to the simulated startds (:mod:`nodemanager.sim.startd`), so drains here have
exactly the adapter's semantics: check expression, our reason, request id + DaemonStartTime.
As in HTCondor, a startd's ad reaches the collector when its state changes and every
``update_interval`` seconds (UPDATE_INTERVAL): state is current, ``LastHeardFrom`` and the
time-dependent estimates may be up to ``update_interval`` old (and unchanged ads are reused, which
keeps long replays fast: a poll looks only at the startds that changed or whose ad is due again,
and an ad due again with no change is not parsed again). Confirmations query the startds
directly (live).

Matching: every ``negotiation_interval`` seconds (0: at once), idle jobs in queue order (submit
order; a killed job keeps its place) go to a startd whose START accepts them (START is false while
draining). ``placement="breadth"`` (the default) takes the first that fits in join order;
``placement="depth"`` the fullest that fits (fewest free cores, then least free memory, then join
order), as HTCondor's default ``NEGOTIATOR_PRE_JOB_RANK`` or ``NEGOTIATOR_DEPTH_FIRST`` pack
partitionable slots. Jobs bigger than any node stay idle and show up as demand.

The parts: the queue and matching in :mod:`nodemanager.sim.negotiator`, the collector's copy of the
ads in :mod:`nodemanager.sim.collector_copy`, the in-process bindings in
:mod:`nodemanager.sim.pool_bindings`; this module holds the VMs, the startds and time.
"""

from __future__ import annotations

import heapq
from typing import Callable, Mapping, Sequence

from nodemanager.model import CloudNode, Demand, FinishedJob, Size, Worker
from nodemanager.scheduler import Confirmation, DrainSchedule, DrainTicket, DrainingStats, HTCondorScheduler
from nodemanager.sim.collector_copy import CollectorCopy
from nodemanager.sim.end_grouping import Runtime, oracle_runtime
from nodemanager.sim.negotiator import PLACEMENTS, Negotiator, Shape, size_attributes
from nodemanager.sim.pool_bindings import PoolBindings
from nodemanager.sim.pool_stats import PoolStats
from nodemanager.sim.job import running_job
from nodemanager.sim.startd import Job, JobEnd, SimStartd

__all__ = ["SimPool", "PoolStats", "Job", "JobEnd", "size_attributes", "PLACEMENTS"]

_INF = float("inf")


class SimPool(Negotiator, CollectorCopy):
    """A simulated HTCondor pool (see the module doc for the API)."""

    def __init__(self, clock: Callable[[], float], *, join_delay: float = 60.0,
                 negotiation_interval: float = 60.0, max_retirement: float = 0.0,
                 vacate_time: float = 600.0, kill_time: float = 0.0, mem_scaling: float = 0.95,
                 requeue_killed: bool = True, update_interval: float = 300.0,
                 id_attribute: str = "CloudInstanceID",
                 domain: str = "sim.internal", name: str = "simulated",
                 sizes: Sequence[Size] = (), placement: str = "breadth") -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement {placement!r}: one of {', '.join(PLACEMENTS)}")
        self.name = name
        self.sizes = tuple(sizes)   # the offline machine ads jobs with requirements are matched to
        # with spot sizes, demand carries the jobs' walltimes and owners (the core prices reclaims
        # with their predicted runtimes)
        self.walltimes = any(s.market == "spot" for s in sizes)
        self._eligible: dict[tuple[int, str], frozenset[str]] = {}
        self.placement = placement
        # ends: set to the controller's predictions by the replay (nodemanager.sim.end_grouping)
        self.runtime: Runtime | None = oracle_runtime if placement == "ends-oracle" else None
        self._clock = clock
        self.now = clock()
        self.join_delay = join_delay
        self.negotiation_interval = negotiation_interval
        self.max_retirement = max_retirement
        self.vacate_time = vacate_time
        self.kill_time = kill_time
        self.mem_scaling = mem_scaling
        self.requeue_killed = requeue_killed
        self.update_interval = update_interval
        self._version: dict[str, int] = {}                         # node id -> change counter
        self._rendered: dict[str, tuple[int, float, Worker]] = {}   # node id -> (version, at, worker)
        # what poll() reports, kept between polls: only changed or update_interval-old ads are redone
        self._workers: dict[str, Worker | None] = {}     # node id -> its worker, in join order
        self._unrendered: set[str] = set()              # node ids changed since the last poll
        self._resend: list[tuple[float, str, float]] = []   # (when its ad is sent again, node id,
        #                                                    when it was rendered), a hair early
        self.touched: set[str] = set()     # node ids whose startd changed since its reader cleared it
        self.id_attribute = id_attribute
        self.domain = domain
        self._pending: list[tuple[float, int, str]] = []          # (join time, seq, node id)
        self._pending_nodes: dict[str, tuple[CloudNode, Size]] = {}
        self._joined: dict[str, SimStartd] = {}                     # node id -> startd, join order
        self._by_address: dict[str, SimStartd] = {}
        self._node_of: dict[str, str] = {}                          # machine name -> node id
        self._events: list[tuple[float, int, str]] = []             # (startd next event, seq, node id)
        self._seq = 0
        # shape (cpus, ram, gpus, requirements) -> heap of (order, job)
        self._queue: dict[Shape, list[tuple[int, Job]]] = {}
        self._demand: tuple[Demand, ...] | None = None   # demand() until the queue changes
        self._order: dict[str, int] = {}
        self._first_start: dict[str, float] = {}
        self._done_at: dict[str, float] = {}     # job id -> when it completed (re-runs included)
        self.ended_log: list[JobEnd] | None = None  # every job end, when a replay asks (who spent what)
        self._waits: list[float] = []
        self._idle_count = 0
        self._dirty = False
        self._neg_at: float | None = None
        self._c = dict(submitted=0, started=0, completed=0, killed=0, killed_by_drain=0, evicted=0)
        self._badput = 0.0
        self._drain_badput = 0.0
        self._used = 0.0
        self._finished: list[FinishedJob] = []   # completed since the last poll, for runtime prediction
        self._wait_total = 0.0
        self._wait_max = 0.0
        self.adapter = HTCondorScheduler(PoolBindings(self), clock=lambda: self.now, name=name,
                                         id_attribute=id_attribute)

    # ---------------------------------------------------------------- inputs

    def submit(self, job: Job) -> None:
        """Queue ``job`` now (idle until matched). Its queue place is its submit order."""
        self.advance(self._clock())            # what was due before it arrived happens first
        self._c["submitted"] += 1
        self._seq += 1
        self._order[job.id] = self._seq
        self._enqueue(job)


    def vm_started(self, node: CloudNode, size: Size) -> None:
        """``node`` (of ``size``) booted now; its startd joins the pool ``join_delay`` seconds later."""
        self._seq += 1
        heapq.heappush(self._pending, (self._clock() + self.join_delay, self._seq, node.id))
        self._pending_nodes[node.id] = (node, size)

    def restart_startd(self, node_id: str) -> None:
        """The node's startd restarts now (fault injection): its jobs are killed (and requeued), its
        drain is gone, request ids start again at 1 and ``DaemonStartTime`` is new."""
        self.advance(self._clock())
        st = self._joined.get(node_id)
        if st is None or not st.alive:
            return
        st.restart(self.now)
        self._touch(st, freed=True)

    def reclaim_notice(self, node_id: str, deadline: float) -> None:
        """The cloud's spot reclaim notice reached the VM: its relay publishes
        ``ReclaimNoticeDeadline`` and START turns false (deploy/htcondor, section 5)."""
        self.advance(self._clock())
        st = self._joined.get(node_id)
        if st is None or not st.alive:
            return
        st.reclaim_deadline = deadline
        self._touch(st)

    def vm_stopped(self, node_id: str) -> None:
        """The VM is gone: its startd leaves at once and its running jobs are killed."""
        self.advance(self._clock())
        self._pending_nodes.pop(node_id, None)
        st = self._joined.pop(node_id, None)
        if st is None:
            return
        self._by_address.pop(st.address, None)
        self._node_of.pop(st.name, None)
        self._version.pop(node_id, None)
        self._rendered.pop(node_id, None)
        self._unrendered.add(node_id)
        self.touched.add(node_id)
        st.stop(self.now)
        self._collect(st)

    # ---------------------------------------------------------------- time

    def next_event_time(self) -> float | None:
        """When the pool next changes by itself (a join, a job end, a drain step, a negotiation)."""
        t = self._next_due()
        return None if t == _INF else max(t, self.now)

    def _next_due(self) -> float:
        t = _INF
        if self._pending:
            t = self._pending[0][0]
        e = self._next_startd_event()
        if e < t:
            t = e
        if self._neg_at is not None and self._neg_at < t:
            t = self._neg_at
        return t

    def _next_startd_event(self) -> float:
        ev = self._events
        while ev:
            t, _, nid = ev[0]
            st = self._joined.get(nid)
            if st is not None and st.alive and st.next_event == t:
                return t
            heapq.heappop(ev)
        return _INF

    def advance(self, now: float | None = None) -> None:
        """Run everything due up to ``now`` (default ``clock()``) in time order."""
        now = self._clock() if now is None else now
        if now < self.now:
            return
        while True:
            t = self._next_due()
            if t > now:
                break
            self.now = max(self.now, t)
            while self._pending and self._pending[0][0] <= t:
                _, _, nid = heapq.heappop(self._pending)
                self._join(nid)
            while True:
                e = self._next_startd_event()
                if e > t:
                    break
                _, _, nid = heapq.heappop(self._events)
                st = self._joined[nid]
                st.advance(t)
                self._touch(st)
            if self._neg_at is not None and self._neg_at <= t:
                self._neg_at = None
                self._negotiate()
            elif self.negotiation_interval <= 0 and self._dirty:
                self._negotiate()
        self.now = now
        if self.negotiation_interval <= 0 and self._dirty:
            self._negotiate()

    def _join(self, node_id: str) -> None:
        entry = self._pending_nodes.pop(node_id, None)
        if entry is None:
            return
        node, size = entry
        machine = node.hostname or f"{node.name}.{self.domain}"
        ip = node.private_ip or "127.0.0.1"
        address = f"<{ip}:9618?addrs={ip}-9618&alias={machine}>"
        st = SimStartd(machine, size.cores, int(size.ram_mb * self.mem_scaling), self.now, address=address,
                       max_retirement=self.max_retirement, vacate_time=self.vacate_time,
                       kill_time=self.kill_time, attrs={**size_attributes(size), self.id_attribute: node.id},
                       gpus=size.gpus)
        self._joined[node_id] = st
        self._version[node_id] = 0
        self._workers[node_id] = None          # its place in join order, rendered at the next poll
        self._unrendered.add(node_id)
        self._by_address[address] = st
        self._node_of[machine] = node_id
        self.touched.add(node_id)
        self._mark_dirty()

    def _touch(self, st: SimStartd, freed: bool = False) -> None:
        """A startd changed: collect its finished jobs and schedule its next event."""
        nid = self._node_of.get(st.name)
        if nid is not None:
            self._version[nid] += 1
            self._unrendered.add(nid)
            self.touched.add(nid)
        if st.ended:
            freed = True
            self._collect(st)
        if st.alive and st.next_event < _INF:
            self._seq += 1
            if nid is not None:
                heapq.heappush(self._events, (st.next_event, self._seq, nid))
        if freed:
            self._mark_dirty()

    def _collect(self, st: SimStartd) -> None:
        ended, st.ended = st.ended, []
        if self.ended_log is not None:
            self.ended_log.extend(ended)
        for e in ended:
            if e.killed:
                self._c["killed"] += 1
                lost = e.job.cpus * (e.end - e.start)
                self._badput += lost
                if e.by_drain:
                    self._c["killed_by_drain"] += 1
                    self._drain_badput += lost
                if e.evicted:
                    self._c["evicted"] += 1
                if self.requeue_killed:
                    self._enqueue(e.job)
            else:
                self._c["completed"] += 1
                self._used += e.job.cpus * (e.end - e.start)
                if e.job.owner is not None:
                    self._finished.append(FinishedJob(job=running_job(e.job, e.start), end=e.end))
                self._done_at[e.job.id] = e.end
        if ended:
            self._mark_dirty()

    # ---------------------------------------------------------------- reporting

    @property
    def stats(self) -> PoolStats:
        d = self.adapter.draining_stats()
        return PoolStats(
            submitted=self._c["submitted"], started=self._c["started"], completed=self._c["completed"],
            killed=self._c["killed"], killed_by_drain=self._c["killed_by_drain"],
            evicted=self._c["evicted"], idle=self._idle_count,
            running=sum(len(st.dslots) for st in self._joined.values()),
            wait_total=self._wait_total, wait_max=self._wait_max, badput=self._badput,
            drain_badput=self._drain_badput, used=self._used, drains_started=d.started,
            drains_refused=d.refused, drains_cancelled=d.cancelled, drains_completed=d.completed,
            drains_escalated=d.escalated)

    def first_starts(self) -> Mapping[str, float]:
        """Job id -> the time the job first started (a requeued job keeps its first start)."""
        return self._first_start

    def completions(self) -> Mapping[str, float]:
        """Job id -> the time the job completed (after any re-run)."""
        return self._done_at

    def job_waits(self) -> list[float]:
        """Submit-to-first-start wait of every job started so far, in start order."""
        return list(self._waits)

    def draining_stats(self) -> DrainingStats:
        """Draining badput and unclaimed time per node and in total, and our drain counts."""
        return self.adapter.draining_stats()

    def startd(self, node_id: str) -> SimStartd | None:
        """The startd of a cloud node, once it joined (for tests and the demo)."""
        return self._joined.get(node_id)

    # ---------------------------------------------------------------- the Scheduler port
    # poll() is the collector's copy (CollectorCopy); the drain calls are the adapter's own

    def drain(self, worker: Worker, schedule: DrainSchedule, reason: str) -> DrainTicket:
        self.advance(self._clock())
        return self.adapter.drain(worker, schedule, reason)

    def cancel_drain(self, ticket: DrainTicket) -> None:
        self.advance(self._clock())
        self.adapter.cancel_drain(ticket)
        if self.negotiation_interval <= 0:
            self.advance(self.now)

    def confirm_drained(self, ticket: DrainTicket) -> Confirmation:
        self.advance(self._clock())
        return self.adapter.confirm_drained(ticket)

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        self.advance(self._clock())
        self.adapter.escalate(ticket, schedule)

    def node_destroyed(self, worker_name: str) -> None:
        self.adapter.node_destroyed(worker_name)

    def steer(self, ranks: Sequence[tuple[Worker, int | None]]) -> int:
        return self.adapter.steer(ranks)
