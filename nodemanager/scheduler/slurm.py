"""The SLURM adapter: workers and demand from ``sinfo --json`` / ``squeue --json``, drains with
``scontrol``. Written for SLURM 22.05 (openapi v0.0.38 JSON); see ``docs/slurm.md``.

Every query is a *full* query (all nodes, all jobs), filtered here: ``sinfo -n NODE`` can return
stale allocation data in 22.05. Commands run with a timeout and ``SLURM_CONF`` from the options.

The drain transaction (the draining design, "Race Conditions"), as far as SLURM allows — it has no check
expression, so the guard is ours:

1. :meth:`SlurmScheduler.drain` re-reads the node with a full query and refuses
   (:class:`DrainRefused`) if it is already draining, not responding, or busier than in the
   snapshot; then ``scontrol update State=DRAIN Reason="nodemanager: <why> [req=<id>]"``; then
   reads again: the drain must have taken with our reason, and if a job slipped onto the node in
   between, our drain is undone (RESUME) and refused, so the node is kept.
2. :meth:`confirm_drained` says ok only for state ``drain`` (IDLE+DRAIN, never ``drng``), our
   request id in the reason, no job of the node in ``squeue``, no allocated CPUs.
3. :meth:`cancel_drain` resumes the node only if the drain is ours.
4. :meth:`escalate`: quick requeues the node's requeueable jobs (``scontrol requeue``: SLURM sends
   SIGTERM, then SIGKILL after ``KillWait``; the jobs return to the queue and run elsewhere); fast
   does the same and also cancels (``scancel``) the jobs that may not be requeued.
5. :meth:`node_destroyed` marks the node ``DOWN`` (reason ``nodemanager: destroyed``) and clears
   the drain flag, so that a new VM with the same name comes back ``idle`` when its slurmd
   registers (``ReturnToService=2``); or ``FUTURE`` with ``mark_destroyed = future``. It also
   takes the gone VM's ``instance-id=`` out of the node's comment (or extra), and
   :meth:`node_booted` writes the new VM's id there when a VM takes the name: a record left naming
   the previous VM would answer for the new one under another id.

Draining statistics (:meth:`SlurmScheduler.draining_stats`): counts of drains started, refused,
cancelled, completed and escalated; per node and in total, badput (core-seconds of the jobs our
escalations requeued or cancelled) and unclaimed time (cores left unused because of our drain,
integrated over polls from the drain's start until it is cancelled or the node destroyed). SLURM
keeps no such totals itself, so they count from this adapter's start.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from nodemanager.model import FinishedJob, JobOwner, Size, Worker
from nodemanager.configuration.settings import SchedulerSettings
from nodemanager.scheduler.port import (DRAIN_REASON_PREFIX, Confirmation, DrainRefused, DrainSchedule,
                                        DrainTicket, SchedulerError, SchedulerPoll)
from nodemanager.scheduler.finished_window import FinishedWindow
from nodemanager.scheduler.records import ProblemLog
from nodemanager.scheduler.slurm_finished import finished_jobs
from nodemanager.scheduler.slurm_classify import classify_node
from nodemanager.scheduler.slurm_commands import run_command, run_json
from nodemanager.scheduler.slurm_demand import DEMAND_REASONS, demand_from_jobs
from nodemanager.scheduler.slurm_options import OptionError, SlurmOptions
from nodemanager.scheduler.slurm_poll import PollState as _State
from nodemanager.scheduler.slurm_stats import DrainStatistics
from nodemanager.scheduler.slurm_steer import SlurmSteering
from nodemanager.scheduler.slurm_rejected import RejectedNodes
from nodemanager.scheduler.slurm_poll import Track as _Track
from nodemanager.scheduler.slurm_poll import jobs_by_node as _jobs_by_node
from nodemanager.scheduler.slurm_poll import running_jobs
from nodemanager.scheduler.slurm_json import (RecordError, SlurmJob,
                                              SlurmNode, cloud_id_of, drain_reason,
                                              parse_jobs, parse_nodes, request_id_of, with_cloud_id)

__all__ = ["SlurmScheduler", "SlurmOptions", "OptionError", "DESTROYED_REASON", "RESUME_VERIFY"]

log = logging.getLogger(__name__)

DESTROYED_REASON = f"{DRAIN_REASON_PREFIX}: destroyed"
# how long a node we resumed while it answered is not taken for silent when SLURM flags it not
# responding (until its next ping: SlurmdTimeout / 3 apart; SlurmdTimeout is 300 s by default)
RESUME_VERIFY = 300.0


class SlurmScheduler(DrainStatistics):
    """:class:`nodemanager.scheduler.port.Scheduler` for SLURM (see the module doc)."""

    name = "slurm"

    def __init__(self, options: SlurmOptions | None = None, *, clock: Callable[[], float] = time.time,
                 demand_reasons: frozenset[str] = DEMAND_REASONS, sizes: Sequence[Size] = (),
                 finished_limit: int = 0) -> None:
        self.options = options or SlurmOptions()
        # runtime prediction: jobs completed since the last poll, from squeue's completed records (0: none)
        self.finished_limit = finished_limit
        self._finished_window: FinishedWindow | None = None
        self.sizes = tuple(sizes)  # with sizes, pending jobs are matched to those that can run them
        self._clock = clock
        self._demand_reasons = demand_reasons
        self._lock = threading.Lock()
        self._heard: dict[str, float] = {}
        self._counts = {"started": 0, "refused": 0, "cancelled": 0, "completed": 0, "escalated": 0}
        self._badput: dict[str, float] = {}
        self._unclaimed: dict[str, float] = {}
        self._seen: dict[str, tuple[bool, str | None]] = {}
        self._tracks: dict[str, _Track] = {}
        self._resumed: dict[str, float] = {}  # node -> when we resumed it while it answered
        self.problem_log = ProblemLog(log, "slurm poll", clock)
        self._rejected = RejectedNodes(self.options, clock)
        # [HA]: raises (naming the node) to stop a command that changes the pool right before it runs
        self.send_gate: Callable[[str], None] | None = None
        self._steering = SlurmSteering(lambda: self._json(["sinfo", "--json"]),
                                       lambda nodes, w: self._scontrol_update(nodes, f"Weight={w}"))

    @classmethod
    def from_settings(cls, settings: SchedulerSettings, *, clock: Callable[[], float] = time.time,
                      source: str = "config", sizes: Sequence[Size] = (),
                      finished_limit: int = 0) -> "SlurmScheduler":
        """Build from ``[Scheduler]`` options; a bad value raises ConfigError naming ``source``,
        section and option. ``finished_limit``: completed jobs a poll reports at most (0: none)."""
        from nodemanager.configuration.config import ConfigError, Problem

        try:
            options = SlurmOptions.from_mapping(settings.options)
        except OptionError as exc:
            raise ConfigError([Problem(source, None, "Scheduler", exc.option, exc.message)]) from None
        return cls(options, clock=clock, sizes=sizes, finished_limit=finished_limit)

    # ------------------------------------------------------------------ commands
    def _run(self, args: Sequence[str], *, node: str | None = None) -> str:
        return run_command(self.options, args, node=node, gate=self.send_gate)

    def _json(self, args: Sequence[str]) -> Any:
        return run_json(self.options, args, self.send_gate)

    def _query(self) -> _State:
        """One full ``sinfo --json`` and one full ``squeue --json``, parsed."""
        node_doc = self._json(["sinfo", "--json"])
        job_doc = self._json(["squeue", "--json"])
        at = self._clock()
        try:
            nodes, node_errors = parse_nodes(node_doc)
            jobs, job_errors = parse_jobs(job_doc)
        except RecordError as exc:
            raise SchedulerError(str(exc), node=exc.name if exc.kind == "node" else None) from None
        except ValueError as exc:
            raise SchedulerError(str(exc)) from None
        parts = self.options.partitions
        if parts:
            nodes = [n for n in nodes if set(n.partitions) & parts]
        # running jobs are named, and finished ones read, only for runtime prediction
        named, name_errors = running_jobs(jobs) if self.finished_limit > 0 else ({}, [])
        return _State(nodes={n.name: n for n in nodes}, jobs=tuple(jobs),
                      errors=tuple(node_errors + job_errors + name_errors), at=at, by_node=_jobs_by_node(jobs),
                      finished=self._finished(job_doc, at) if self.finished_limit > 0 else (), named=named)

    def _finished(self, job_doc: Any, at: float) -> tuple[FinishedJob, ...]:
        if self._finished_window is None:
            self._finished_window = FinishedWindow(at)
        return self._finished_window.new(finished_jobs(job_doc), self.finished_limit)

    def _scontrol_update(self, name: str, *settings: str) -> None:
        self._run(["scontrol", "update", f"NodeName={name}", *settings], node=name)

    # ------------------------------------------------------------------ poll
    def poll(self) -> SchedulerPoll:
        """All workers (nodes) and the demand (pending jobs) from one query of each."""
        state = self._query()
        self.problem_log.report(state.errors)
        workers = tuple(self._worker(n, state) for n in state.nodes.values())
        workers += self._rejected.workers(state.nodes)  # refused nodes sinfo hides, with SLURM's reason
        self._sample(state)
        demand = demand_from_jobs(state.jobs, self.options.partitions, self._demand_reasons, self.sizes,
                                  by_owner=self.finished_limit > 0)
        return SchedulerPoll(workers=workers, demand=demand, polled_at=state.at, problems=state.errors,
                             finished=state.finished)

    def _worker(self, node: SlurmNode, state: _State) -> Worker:
        jobs = state.jobs_on(node.name)
        if self._resumed:
            node = self._answered(node, state.at)
        if node.responding:
            heard = state.at
            with self._lock:
                self._heard[node.name] = heard
        else:
            # Not responding: when we last saw it answer, else when SLURM noted it, else unknown (0).
            with self._lock:
                heard = self._heard.get(node.name, 0.0)
            if not heard and node.reason and node.reason_changed_at:
                heard = node.reason_changed_at
        since = node.last_busy or node.slurmd_start_time or state.at
        return Worker(
            name=node.name,
            scheduler=self.name,
            state=node.state,
            classified=classify_node(node, running_jobs=len(jobs), state_since=since),
            cloud_id=cloud_id_of(*(getattr(node, f) for f in self.options.cloud_id_fields)),
            address=node.address or node.hostname,
            last_heard=heard,
            state_since=since,
            # 0: no slurmd ever registered this name, so it pairs with no VM yet (not "unknown")
            registered_at=node.slurmd_start_time or node.boot_time or 0.0,
            cpus=node.cpus,
            cpus_busy=node.alloc_cpus,
            ram_mb=node.real_memory,
            running_jobs=len(jobs),
            job_end_times=tuple(sorted(j.end_time for j in jobs if j.end_time)),
            jobs_by=tuple(JobOwner(j.user, j.account, max(j.cpus // max(len(j.nodes), 1), 1)) for j in jobs),
            jobs=state.named_on(node.name),
            retirement_end=float("inf"),  # a SLURM drain never evicts: jobs run to their time limits
            draining=node.draining,
            drain_reason=node.reason or None,
            drain_request_id=request_id_of(node.reason) if node.draining else None,
            drain_since=node.reason_changed_at if node.draining else 0.0,
        )

    def _answered(self, node: SlurmNode, at: float) -> SlurmNode:
        """``node`` as it is: SLURM flags a node it resumes ``NOT_RESPONDING`` until its next ping
        answers, which is no silence when it answered just before our resume."""
        with self._lock:
            resumed = self._resumed.get(node.name)
            if resumed is not None and (node.responding or at - resumed >= RESUME_VERIFY):
                del self._resumed[node.name]
                return node
        if resumed is None or node.responding:
            return node
        return replace(node, flags=tuple(f for f in node.flags if f != "NOT_RESPONDING"),
                       state=node.state.rstrip("*"))

    # ------------------------------------------------------------------ drain transaction
    def drain(self, worker: Worker, schedule: DrainSchedule, reason: str) -> DrainTicket:
        """Drain ``worker`` if it is not busier than in the snapshot ``worker`` (else DrainRefused)."""
        schedule = DrainSchedule(schedule)
        name = worker.name
        before = self._query()
        node = before.nodes.get(name)
        problem = self._drain_problem(worker, node, before)
        if problem:
            self._count(name, "refused")
            log.info("slurm drain %s: refused: %s", name, problem)
            raise DrainRefused(f"{name}: {problem}", node=name)
        request_id = secrets.token_hex(4)
        text = drain_reason(reason, request_id)
        self._scontrol_update(name, "State=DRAIN", f"Reason={text}")
        after = self._query()
        node = after.nodes.get(name)
        if node is None or not node.draining or node.reason != text:
            got = "gone" if node is None else f"state {node.state!r}, reason {node.reason!r}"
            raise SchedulerError(f"{name}: drain did not take ({got})", node=name)
        busier = self._busier(worker, self._worker(node, after), after.jobs_on(name))
        if busier:
            # A job started between our check and the update: undo our drain, keep the node.
            self._scontrol_update(name, "State=RESUME")
            self._count(name, "refused")
            log.info("slurm drain %s: refused and undone: %s", name, busier)
            raise DrainRefused(f"{name}: {busier} while the drain was set; drain undone", node=name)
        now = self._clock()
        ticket = DrainTicket(worker=name, request_id=request_id, reason=text, started_at=now,
                             daemon_start=node.slurmd_start_time or None, schedule=schedule)
        with self._lock:
            self._tracks[name] = _Track(request_id, now)
        self._count(name, "started")
        log.info("slurm drain %s: started %s drain, request %s (reason %r)", name, schedule, request_id, text)
        if schedule is not DrainSchedule.GRACEFUL:
            self.escalate(ticket, schedule)
        return ticket

    def _drain_problem(self, snap: Worker, node: SlurmNode | None, state: _State) -> str | None:
        if node is None:
            return "not in sinfo (unknown node or outside the managed partitions)"
        if node.draining:
            return f"already draining (state {node.state!r}, reason {node.reason!r})"
        if not node.responding:
            return f"not responding (state {node.state!r})"
        return self._busier(snap, self._worker(node, state), state.jobs_on(node.name))

    @staticmethod
    def _busier(snap: Worker, fresh: Worker, jobs: Sequence[SlurmJob]) -> str | None:
        if fresh.cpus_busy > snap.cpus_busy or fresh.running_jobs > snap.running_jobs:
            ids = ",".join(str(j.job_id) for j in jobs) or "-"
            return (f"became busy since the snapshot (state {snap.state!r} -> {fresh.state!r}, "
                    f"{snap.cpus_busy} -> {fresh.cpus_busy} CPUs, jobs {ids})")
        return None

    def cancel_drain(self, ticket: DrainTicket) -> None:
        """Resume the node if its drain is still ours; a node not draining is left as it is."""
        name = ticket.worker
        node = self._query().nodes.get(name)
        if node is None:
            raise SchedulerError(f"{name}: not in sinfo; cannot cancel drain {ticket.request_id}",
                                 node=name, transient=False)
        if not node.draining:
            log.info("slurm cancel_drain %s: not draining any more (state %r); nothing to do", name, node.state)
            self._untrack(name)
            return
        if request_id_of(node.reason) != ticket.request_id:
            raise SchedulerError(f"{name}: drain is not ours (reason {node.reason!r}, we hold request "
                                 f"{ticket.request_id}); not resumed", node=name, transient=False)
        answered = node.responding
        self._scontrol_update(name, "State=RESUME")
        node = self._query().nodes.get(name)
        if node is not None and node.draining:
            raise SchedulerError(f"{name}: resume did not take (state {node.state!r})", node=name)
        if answered:
            with self._lock:
                self._resumed[name] = self._clock()
        self._untrack(name)
        self._count(name, "cancelled")
        log.info("slurm cancel_drain %s: resumed, request %s cancelled", name, ticket.request_id)

    def confirm_drained(self, ticket: DrainTicket) -> Confirmation:
        """Fresh state: ok only if ``drain`` (not ``drng``), our request id, and nothing runs."""
        name = ticket.worker
        state = self._query()
        node = state.nodes.get(name)
        if node is None:
            return Confirmation(False, f"{name}: not in sinfo")
        if request_id_of(node.reason) != ticket.request_id or not node.draining:
            return Confirmation(False, f"{name}: drain is not ours (state {node.state!r}, reason "
                                       f"{node.reason!r}, our request {ticket.request_id})")
        jobs = state.jobs_on(name)
        if node.state != "drain":
            return Confirmation(False, f"{name}: state {node.state!r}, not 'drain' yet")
        if jobs or node.alloc_cpus:
            ids = ",".join(str(j.job_id) for j in jobs) or "-"
            return Confirmation(False, f"{name}: still running jobs {ids} ({node.alloc_cpus} CPUs allocated)")
        with self._lock:
            track = self._tracks.get(name)
            first = track is None or not track.completed
            if track is not None:
                track.completed = True
        if first:
            self._count(name, "completed")
        return Confirmation(True, f"{name}: drained by us (request {ticket.request_id}), nothing running")

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        """Quick: requeue the node's requeueable jobs. Fast: that, and cancel the others."""
        schedule = DrainSchedule(schedule)
        if schedule is DrainSchedule.GRACEFUL:
            return
        name = ticket.worker
        state = self._query()
        node = state.nodes.get(name)
        if node is None or not node.draining or request_id_of(node.reason) != ticket.request_id:
            got = "gone" if node is None else f"state {node.state!r}, reason {node.reason!r}"
            raise DrainRefused(f"{name}: not escalating a drain that is not ours ({got})", node=name)
        jobs = [j for j in state.jobs_on(name) if j.state in ("RUNNING", "SUSPENDED")]
        requeue = [j for j in jobs if j.requeue]
        cancel = [j for j in jobs if not j.requeue] if schedule is DrainSchedule.FAST else []
        if requeue:
            self._run(["scontrol", "requeue", ",".join(str(j.job_id) for j in requeue)], node=name)
        if cancel:
            self._run(["scancel", *(str(j.job_id) for j in cancel)], node=name)
        now = self._clock()
        badput = sum((j.cpus / j.node_count) * max(now - j.start_time, 0.0)
                     for j in requeue + cancel if j.start_time)
        self._count(name, "escalated", badput=badput)
        kept = [j for j in jobs if j not in requeue and j not in cancel]
        log.info("slurm escalate %s: %s drain, request %s: requeued %s, cancelled %s, left running %s",
                 name, schedule, ticket.request_id, _ids(requeue), _ids(cancel), _ids(kept))

    def steer(self, ranks: Sequence[tuple[Worker, int | None]]) -> int:
        """Placement steering: node weights (:mod:`nodemanager.scheduler.slurm_steer`)."""
        return self._steering.steer(ranks)

    def node_destroyed(self, worker_name: str) -> None:
        """Mark the node DOWN (drain flag cleared) or FUTURE, as ``mark_destroyed`` says."""
        name = worker_name
        if self.options.mark_destroyed == "future":
            self._scontrol_update(name, "State=FUTURE")
        else:
            self._scontrol_update(name, "State=DOWN", f"Reason={DESTROYED_REASON}")
            # DOWN keeps the DRAIN flag; clear it so a new VM with this name is not born drained.
            self._scontrol_update(name, "State=UNDRAIN")
        self._untrack(name)
        log.info("slurm node_destroyed %s: marked %s", name, self.options.mark_destroyed)
        try:
            self._set_cloud_id(name, None)
        except SchedulerError as exc:  # the node is marked: the next VM's boot writes its own id
            log.warning("slurm node_destroyed %s: the gone VM's instance-id left in its record: %s", name, exc)

    def node_booted(self, worker_name: str, cloud_id: str) -> None:
        """A new VM took the name: the node's ``instance-id=`` (if its record carries one) names it."""
        self._set_cloud_id(worker_name, cloud_id)

    def _set_cloud_id(self, name: str, cloud_id: str | None) -> None:
        """Rewrite (None: take out) the ``instance-id=`` token of the node's comment or extra."""
        try:
            nodes, _ = parse_nodes(self._json(["sinfo", "--json"]))  # the node's record alone: no jobs
        except (RecordError, ValueError) as exc:
            raise SchedulerError(f"{name}: reading its record to set its instance id: {exc}", node=name) from None
        node = next((n for n in nodes if n.name == name), None)
        if node is None:
            return
        for field, option in (("comment", "Comment"), ("extra", "Extra")):
            text = getattr(node, field)
            if field not in self.options.cloud_id_fields or cloud_id_of(text) in (None, cloud_id):
                continue
            self._scontrol_update(name, f"{option}={with_cloud_id(text, cloud_id)}")
            log.info("slurm %s: %s instance-id %s -> %s", name, field, cloud_id_of(text), cloud_id or "(none)")


def _ids(jobs: Sequence[SlurmJob]) -> str:
    return ",".join(str(j.job_id) for j in jobs) or "none"
