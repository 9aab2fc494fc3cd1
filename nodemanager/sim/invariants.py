"""Safety invariants of the node manager, checked against a simulated world after every cycle.

API note (the fault and crash-restart tests, the soak run and the simulator use this)::

    inv = Invariants(world, settings)               # world: a SimWorld (sim_cloud + pool)
    cloud, sched = inv.audit(cloud), inv.audit_scheduler(sched)   # outermost wrappers
    act = Actuator(cloud, sched, settings, clock=time)            # the controller uses these
    ...
    broken = inv.check(report)     # after every controller cycle: violations, in words
    inv.violations                 # every violation so far; inv.counts: what was checked
    inv.calls, inv.terminated      # successful changing calls; VM id -> termination time

What is checked (the ground truth is the simulated cloud and pool, not the controller's view):

* no job killed outside an explicit escalation: the pool's kill counter only grows after an
  escalation or a quick/fast drain of ours, and never by destroying a VM that runs jobs;
* no VM without a worker (its startd never joined) is left running past ``boot_grace`` plus
  ``slack`` seconds;
* never more live VMs than ``max_nodes``, never a live price above ``max_total_price``;
* no two live VMs share a name (their workers would collide in the scheduler);
* no node destroyed twice (a second destroy call that returned success for the same id);
* no drain or destroy call while the inputs of the cycle were stale (``poll_stale_after``);
* no mass destroy: at most ``down_freeze_count`` VMs whose worker is alive (not drained by us)
  destroyed in one cycle, whatever the scheduler claimed (an outage reports them all down).
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from nodemanager.cloud import CloudDriver
from nodemanager.core import stale_inputs
from nodemanager.cycle.journal import ReservationJournal
from nodemanager.model import CloudNode, CycleReport, Size, Worker
from nodemanager.scheduler import (Confirmation, DrainSchedule, DrainTicket, DrainingStats,
                                   Scheduler, SchedulerPoll)
from nodemanager.configuration.settings import Settings
from nodemanager.sim.faults import Crash

__all__ = ["Invariants", "AuditedCloud", "AuditedScheduler", "Call", "CheckedRun", "VirtualClock"]


@dataclass(frozen=True)
class Call:
    """One successful call that changes something, as the controller made it."""

    what: str          # create | destroy | drain | cancel_drain | escalate
    node: str          # node id (create, destroy), worker name (drain, cancel_drain, escalate)
    at: float
    detail: str = ""
    node_id: str = ""  # the VM's id, when the call names a worker that advertises it


class Invariants:
    """Checks a :class:`~nodemanager.sim.world.SimWorld` against the safety invariants."""

    def __init__(self, world: Any, settings: Settings, *, slack: float = 30.0,
                 keep_calls: bool = True) -> None:
        """``keep_calls`` False forgets audited calls once checked (long runs: flat memory)."""
        self.world = world
        self.settings = settings
        self.slack = slack
        self.keep_calls = keep_calls
        self.violations: list[str] = []
        self.counts: Counter[str] = Counter()
        self.calls: list[Call] = []
        self._checked_calls = 0
        self._killed = 0
        self._escalated: set[str] = set()
        self._destroyed: Counter[str] = Counter()
        self._pending: list[str] = []   # violations found inside a call, reported at the next check
        self._worker_ids: dict[str, str] = {}    # worker name -> VM id, from drains
        self._duplicates: set[tuple[str, ...]] = set()
        self.terminated: dict[str, float] = {}   # VM id -> when the cloud terminated it (truth)
        cloud = world.sim_cloud
        stopped = cloud.on_terminated

        def on_terminated(node_id: str) -> None:
            self.terminated[node_id] = self._now()
            if stopped is not None:
                stopped(node_id)

        cloud.on_terminated = on_terminated

    # -- wrappers -------------------------------------------------------------------------------

    def audit(self, cloud: CloudDriver) -> "AuditedCloud":
        return AuditedCloud(cloud, self)

    def audit_scheduler(self, scheduler: Scheduler) -> "AuditedScheduler":
        return AuditedScheduler(scheduler, self)

    # -- ground truth ---------------------------------------------------------------------------

    def _now(self) -> float:
        return float(self.world.now)

    def live_nodes(self) -> list[CloudNode]:
        """Every VM the simulated cloud has alive (pending or running), whatever any listing says."""
        cloud = self.world.sim_cloud
        with cloud._lock:  # the cloud's own list_nodes would count as an API call and eat faults
            return [r.node for r in cloud._live.values()]

    def _startd(self, node_id: str) -> Any:
        return self.world.pool.startd(node_id)

    def _record_destroy(self, node: CloudNode) -> None:
        """Called just before a destroy call: what the node runs in truth."""
        self.world.advance()
        st = self._startd(node.id)
        if st is not None and st.alive and st.dslots and st.name not in self._escalated:
            self._pending.append(f"destroy of {node.name} ({node.id}) while it ran {len(st.dslots)} "
                                 f"job(s) that no escalation of ours had killed")

    def _alive_worker(self, node_id: str) -> bool:
        st = self._startd(node_id)
        return bool(st is not None and st.alive and not (st.draining and st.drain_complete))

    # -- the check ------------------------------------------------------------------------------

    def check(self, report: CycleReport | None = None) -> list[str]:
        """Check every invariant after one controller cycle; return the new violations."""
        now = self._now()
        core = self.settings.core
        found = list(self._pending)
        self._pending.clear()
        self.counts["checks"] += 1

        stats = self.world.pool.stats
        killed = stats.killed - self._killed
        self._killed = stats.killed
        if killed > 0:
            self.counts["jobs_killed"] += killed
            if not self._escalated:
                found.append(f"{killed} job(s) killed (by drain: {stats.killed_by_drain} in all) "
                             f"with no escalation or quick/fast drain of ours")

        live = self.live_nodes()
        if len(live) > core.max_nodes:
            found.append(f"{len(live)} VMs alive, above max_nodes {core.max_nodes}")
        if core.max_total_price > 0:
            sizes: Mapping[str, Size] = {s.name: s for s in core.sizes}
            price = sum(sizes[n.size].price for n in live if n.size in sizes)
            if price > core.max_total_price + 1e-9:
                found.append(f"VMs alive cost {price:g}/h, above max_total_price {core.max_total_price:g}")
        names: dict[str, list[str]] = {}
        for n in live:
            names.setdefault(n.name, []).append(n.id)
        for name, ids in sorted(names.items()):
            if len(ids) > 1 and tuple(ids) not in self._duplicates:
                self._duplicates.add(tuple(ids))
                found.append(f"{len(ids)} live VMs share the name {name} ({', '.join(ids)}): their "
                             f"workers collide in the scheduler")
        limit = core.boot_grace + self.slack
        for n in live:
            if n.state == "running" and self._startd(n.id) is None and now - n.launched_at > limit:
                found.append(f"{n.name} ({n.id}) has had no worker for {now - n.launched_at:.0f}s, "
                             f"past boot_grace {core.boot_grace:.0f}s + {self.slack:.0f}s, and still runs")

        new_calls = self.calls[self._checked_calls:]
        self._checked_calls = len(self.calls)
        if not self.keep_calls:
            self.calls, self._checked_calls = [], 0
        if report is not None:
            stale = stale_inputs(report.snapshot, core.poll_stale_after, core.clock_tolerance)
            # only this cycle's calls: one made just before a crash was planned on its own (lost) inputs
            acted = [c for c in new_calls if c.what in ("drain", "destroy") and c.at >= report.snapshot.now]
            if stale and acted:
                found.append(f"{len(acted)} drain/destroy call(s) ({', '.join(c.node for c in acted)}) "
                             f"while {stale}")
        live_destroys = [c for c in new_calls if c.what == "destroy" and c.detail == "worker alive"]
        if len(live_destroys) > core.down_freeze_count:
            found.append(f"mass destroy: {len(live_destroys)} VMs with live workers destroyed in one "
                         f"cycle ({', '.join(c.node for c in live_destroys)})")
        for v in found:
            self.violations.append(f"t={now:.0f}: {v}")
        return found


class AuditedCloud:
    """The cloud as the controller calls it, recording successful calls for :class:`Invariants`."""

    def __init__(self, inner: CloudDriver, inv: Invariants) -> None:
        self.inner = inner
        self.inv = inv

    def list_nodes(self) -> list[CloudNode]:
        return self.inner.list_nodes()

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        node = self.inner.create_node(size, name, tags)
        self.inv.calls.append(Call("create", node.id, self.inv._now(), size.name))
        return node

    def destroy_node(self, node: CloudNode) -> None:
        inv = self.inv
        inv._record_destroy(node)
        alive = inv._alive_worker(node.id)
        self.inner.destroy_node(node)
        inv.counts["destroys"] += 1
        inv._destroyed[node.id] += 1
        if inv._destroyed[node.id] > 1:
            inv._pending.append(f"{node.name} ({node.id}) destroyed {inv._destroyed[node.id]} times")
        inv.calls.append(Call("destroy", node.id, inv._now(), "worker alive" if alive else ""))

    def set_tags(self, node: CloudNode, tags: Mapping[str, str]) -> None:
        self.inner.set_tags(node, tags)


class AuditedScheduler:
    """The scheduler as the controller calls it, recording drains and escalations."""

    def __init__(self, inner: Scheduler, inv: Invariants) -> None:
        self.inner = inner
        self.inv = inv
        self.name = getattr(inner, "name", "audited")

    def poll(self) -> SchedulerPoll:
        return self.inner.poll()

    def drain(self, worker: Worker, schedule: DrainSchedule, reason: str) -> DrainTicket:
        ticket = self.inner.drain(worker, schedule, reason)
        if worker.cloud_id:
            self.inv._worker_ids[worker.name] = worker.cloud_id
        if DrainSchedule(schedule) is not DrainSchedule.GRACEFUL:
            self.inv._escalated.add(worker.name)
        self.inv.counts["drains"] += 1
        self.inv.calls.append(Call("drain", worker.name, self.inv._now(), str(schedule), worker.cloud_id or ""))
        return ticket

    def cancel_drain(self, ticket: DrainTicket) -> None:
        try:
            self.inner.cancel_drain(ticket)
        except Crash as crash:
            if str(crash).startswith("crash after"):    # the drain was cancelled, then the process died
                self._cancelled(ticket)
            raise
        self._cancelled(ticket)

    def _cancelled(self, ticket: DrainTicket) -> None:
        self.inv.counts["cancels"] += 1
        worker = self.inv._worker_ids.get(ticket.worker, "")
        self.inv.calls.append(Call("cancel_drain", ticket.worker, self.inv._now(), "", worker))

    def confirm_drained(self, ticket: DrainTicket) -> Confirmation:
        return self.inner.confirm_drained(ticket)

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        self.inner.escalate(ticket, schedule)
        self.inv._escalated.add(ticket.worker)
        self.inv.calls.append(Call("escalate", ticket.worker, self.inv._now(), str(schedule)))

    def node_destroyed(self, worker_name: str) -> None:
        self.inner.node_destroyed(worker_name)

    def draining_stats(self) -> DrainingStats:
        return self.inner.draining_stats()


class VirtualClock:
    """A clock that moves only when told (``clock()`` reads it)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


class CheckedRun:
    """The daemon's cycle over a simulated world with faults, invariants checked after every cycle.

    Wiring, outermost first: audit (:class:`Invariants`) → faults (:class:`FaultyCloud`,
    :class:`FaultyScheduler`) → the world's ports. Pollers behave like the daemon's: a poll that
    raised leaves the previous listing/poll (and its old ``polled_at``) in place. :meth:`restart`
    drops every in-memory object of the controller (controller, actuator, admin state, the
    pollers' memory) and builds fresh ones on the same world, as a process restart would; what
    the daemon keeps on disk, the reservation journal, survives (in a temporary state directory).
    """

    def __init__(self, settings: Settings, *, seed: int = 1, cloud_faults: Any = None,
                 scheduler_faults: Any = None, world: Any = None, clock: VirtualClock | None = None,
                 matrix: Any = None, step: float = 5.0, slack: float | None = None,
                 keep_reports: int | None = None) -> None:
        """``keep_reports``: keep only that many recent reports and forget checked calls (long
        runs); None keeps everything (tests read them)."""
        import random

        import policy_matrix
        from nodemanager.sim.faults import CloudFaults, FaultyCloud, FaultyScheduler, SchedulerFaults
        from nodemanager.sim.world import SimWorld

        self.settings = settings
        self.clock = clock or VirtualClock()
        self.world = world or SimWorld(settings, self.clock)
        self.matrix = matrix or policy_matrix.load_default()
        self.step = step
        self.rng = random.Random(seed)
        self.faulty_cloud = FaultyCloud(self.world.cloud, cloud_faults or CloudFaults(), self.rng,
                                        clock=self.clock)
        self.faulty_scheduler = FaultyScheduler(self.world.scheduler, scheduler_faults or SchedulerFaults(),
                                                self.rng, clock=self.clock)
        self.keep_reports = keep_reports
        self.inv = Invariants(self.world, settings, slack=2 * step + 30.0 if slack is None else slack,
                              keep_calls=keep_reports is None)
        self.cloud = self.inv.audit(self.faulty_cloud)
        self.scheduler = self.inv.audit_scheduler(self.faulty_scheduler)
        self.reports: list[CycleReport] = []
        self.restarts = 0
        self._boot_seq = 0
        # memory-backed when there is one: thousands of fsyncs would slow long runs, not test more
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self._state_dir = tempfile.TemporaryDirectory(prefix="nodemanager-run-", dir=shm)
        self.journal = ReservationJournal(os.path.join(self._state_dir.name, "sim.reservations"))
        self._fresh()

    def _fresh(self) -> None:
        from nodemanager.cycle.actuate import Actuator
        from nodemanager.console.admin import AdminState
        from nodemanager.cycle.controller import Controller

        self.nodes: list[CloudNode] | None = None
        self.cloud_at = 0.0
        self.poll: SchedulerPoll | None = None
        self.latest: dict[str, Worker] = {}
        self.admin = AdminState(clock=self.clock)
        self.actuator = Actuator(self.cloud, self.scheduler, self.settings, clock=self.clock,
                                 latest_worker=self.latest.get, request_ids=self._request_id,
                                 journal=self.journal)
        self.controller = Controller(self.settings, self.matrix, self.actuator, clock=self.clock,
                                     admin=self.admin)

    def _request_id(self) -> str:
        self._boot_seq += 1
        return f"r{self._boot_seq}"

    def restart(self) -> None:
        """Forget everything the controller process held in memory; the world goes on."""
        self.restarts += 1
        self._fresh()

    def poll_inputs(self) -> None:
        """One cloud listing and one scheduler poll; a failure keeps the previous result."""
        from nodemanager.cloud import CloudError
        from nodemanager.scheduler import SchedulerError

        now = self.clock()
        try:
            self.nodes, self.cloud_at = self.cloud.list_nodes(), now
        except CloudError:
            self.inv.counts["cloud_poll_failures"] += 1
        try:
            poll = self.scheduler.poll()
        except SchedulerError:
            self.inv.counts["scheduler_poll_failures"] += 1
        else:
            self.poll = poll
            self.latest.clear()
            self.latest.update((w.name, w) for w in poll.workers)

    def cycle(self) -> CycleReport | None:
        """Poll, plan and act once, then check the invariants. None until both inputs arrived."""
        self.poll_inputs()
        if self.nodes is None or self.poll is None:
            return None
        report = self.controller.cycle(self.nodes, self.cloud_at, self.poll)
        self.reports.append(report)
        if self.keep_reports is not None and len(self.reports) > 2 * self.keep_reports:
            del self.reports[:-self.keep_reports]
        self.inv.check(report)
        return report

    def run(self, seconds: float) -> None:
        """Cycle every ``step`` seconds of virtual time for ``seconds``."""
        end = self.clock() + seconds
        while self.clock() < end:
            self.cycle()
            self.clock.advance(self.step)

    @property
    def injected(self) -> Counter[str]:
        """Every fault injected so far, by name (cloud and scheduler)."""
        return self.faulty_cloud.injected + self.faulty_scheduler.injected
