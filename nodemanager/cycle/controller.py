"""The controller cycle, synchronous and thread-free: inputs → Snapshot → core plan → actuator.

API note (the daemon's controller actor and the simulator both drive this)::

    ctl = Controller(settings, matrix, actuator, clock=lambda: now, dry_run=False,
                     admin=None, escalation=None,     # actuator None: dry-run only
                     clock_skew=None)                 # () -> the cloud's clock minus ours, or None
    report = ctl.cycle(cloud_nodes, cloud_polled_at, scheduler_poll)   # plan + act inline
    # or, when tasks run elsewhere (the daemon's actuator pool):
    report, tasks = ctl.prepare(cloud_nodes, cloud_polled_at, scheduler_poll)
    ...; ctl.record(outcomes)              # log them; they go into the next report
    ctl.set_matrix(matrix); ctl.update_settings(settings)   # after a reload

``admin`` is a :class:`nodemanager.console.admin.AdminState` (or anything with ``held``, ``forced_drains``
and ``paused``): read once per cycle; its pending cancels become CANCEL_DRAIN items for nodes
that have a drain of ours (a cancel is forgotten once no drain of ours is left on its node, so a
cancel the next leader reads is still carried out), and nodes that left the listing are forgotten.

What survives a restart is read back on every cycle, not remembered: drains we started come from
the nodes' ``TAG_DRAIN`` tags (or, when the tag could not be written, from the scheduler's drain
reason prefix), destroys in progress from ``TAG_DESTROY`` (such a node is destroyed again until
it is gone: a destroy is never left half-done), boots from the listing's ``TAG_REQUEST`` (a listed
node, pending or running, counts as supply; the actuator adds boots it requested that are not
listed yet). One bad listing or poll is not believed (see :class:`InputMemory`). What the cycle
learns (runtimes, reclaim rates, idle timing...) is :attr:`Controller.memories`'s (the daemon's are
kept in its state dir: :mod:`nodemanager.cycle.memories`).

Logging (logger ``nodemanager.decisions``): see :mod:`nodemanager.console.decision_log`.
"""

from __future__ import annotations

import gc
import logging
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from nodemanager.cycle.actuate import Actuator, Task
from nodemanager.cycle.actuator_memory import ActuatorState
from nodemanager.cycle.controller_inputs import InputMemory, build_in_flight
from nodemanager.core.identity import (Identity, Ownership, Term, another_controller, joined_our_pool,
                                       sort_by_owner)
from nodemanager.core.protected import BootRecord, observe_boots, protected_sizes
from nodemanager.core.rate_history import listed_boots, listed_destroys, merge
from nodemanager.console.decision_log import DecisionLog, cancelling, log_ignored_cancels
from nodemanager.cycle.memories import Memories
from nodemanager.cycle.suspect_memory import SuspectMemory
from nodemanager.model import EMPTY_MAP, CloudNode, CycleReport, Outcome, Plan, Snapshot, frozen_map
from nodemanager.scheduler import SchedulerPoll
from nodemanager.configuration.settings import Settings
from nodemanager.tags import TAG_DEPLOYMENT
from nodemanager.text import request_words

__all__ = ["Controller"]

log = logging.getLogger("nodemanager.decisions")


def _admin_view(admin: Any) -> tuple[frozenset[str], frozenset[str], str | None]:
    if admin is None:
        return frozenset(), frozenset(), None
    view = admin() if callable(admin) else admin
    return (frozenset(getattr(view, "held", ()) or ()), frozenset(getattr(view, "forced_drains", ()) or ()),
            getattr(view, "paused", None))


def _default_planner() -> Callable[..., Plan]:
    from nodemanager.cycle.plan_reuse import reusing
    return reusing()  # the core's plan, last cycle's work reused for unchanged records


def _default_escalation(settings: Settings) -> Any:
    try:
        from nodemanager.core import make_escalation
    except ImportError:
        return None
    return make_escalation(settings.drain)


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """No cyclic garbage collection inside: a cycle builds a few acyclic records per node, freed by
    reference counting, so young collections during it find nothing (~30 a cycle at 50,000 nodes);
    the collector resumes after it, as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Controller:
    """One controller: builds snapshots, runs the core, logs decisions, hands out tasks.

    ``actuator`` may be None in dry-run. ``planner`` defaults to :func:`nodemanager.core.plan`
    through :func:`nodemanager.cycle.plan_reuse.reusing`;
    ``escalation`` to ``make_escalation(settings.drain)`` when that module exists.
    """

    def __init__(self, settings: Settings, matrix: Any, actuator: Actuator | None, *,
                 clock: Callable[[], float], dry_run: bool = False, admin: Any = None,
                 escalation: Any = None, planner: Callable[..., Plan] | None = None,
                 estimator: Any = None, clock_skew: Callable[[], float | None] | None = None) -> None:
        self.settings = settings
        self.matrix = matrix
        self.actuator = actuator
        self.clock = clock
        self.dry_run = dry_run or settings.dry_run
        self.admin = admin
        self._escalation_given = escalation
        self.escalation = escalation if escalation is not None else _default_escalation(settings)
        self.planner = planner or _default_planner()
        self.estimator = estimator
        self.clock_skew = clock_skew
        self.matrix_error: str | None = None
        self.last_report: CycleReport | None = None
        self._decisions = DecisionLog()
        # nodemanager.console.history.NodeHistory: each node's events, added where a decision changes
        self.history: Any = None
        self._pending_outcomes: list[Outcome] = []
        self._suspects = SuspectMemory()   # nodes fresh polls showed unpaired or down, for how long
        self.inputs = InputMemory()
        # [HA]: given the oldest input's poll time, why this process must not act now (None: act)
        self.hold_back: Callable[[float], str | None] | None = None
        self.term: Callable[[], Term | None] | None = None   # [HA]: this leader's term while it acts
        self._held_back_logged: str | None = None
        self._cancelling: frozenset[str] = frozenset()   # nodes whose drain the last cycle cancelled for an operator
        self._boot_records: dict[str, BootRecord] = {}  # size -> failed joins in a row (protected mode)
        self.memories = Memories()  # what is learned cycle to cycle (the daemon's are kept in its state dir)
        self._prices = {sz.name: sz.price for sz in settings.core.sizes}  # every size's last configured price
        # whose VMs are ours (None: every VM of the cluster name, as in a replay or `plan`)
        self.identity: Identity | None = None
        self._owned: tuple[Sequence[CloudNode], Ownership] | None = None
        self.other_controller: str | None = None   # once set, this process acts no more
        if actuator is None and not self.dry_run:
            raise ValueError("a controller that acts needs an actuator")

    # -- reloads --------------------------------------------------------------------------------

    def set_matrix(self, matrix: Any, error: str | None = None) -> None:
        """Use ``matrix`` from the next cycle on; ``error`` is a rejected reload's message."""
        self.matrix = matrix
        self.matrix_error = error

    def update_settings(self, settings: Settings) -> None:
        self.settings = settings
        self._prices.update((sz.name, sz.price) for sz in settings.core.sizes)
        if self._escalation_given is None:
            self.escalation = _default_escalation(settings)
        if self.actuator is not None:
            self.actuator.update_settings(settings)

    def forget_inputs(self) -> None:
        """Start the input memory afresh from the next cycle, as a restart does (a new HA leader)."""
        self.inputs = InputMemory()
        self.memories.forget()

    # -- the cycle ------------------------------------------------------------------------------

    def snapshot(self, nodes: Sequence[CloudNode], cloud_polled_at: float, poll: SchedulerPoll,
                 now: float | None = None, skew: float | None = None,
                 cancels: frozenset[str] = frozenset(), listed: Sequence[CloudNode] = (),
                 cloud_polled: Mapping[str, float] | None = None) -> Snapshot:
        """The snapshot for these inputs, with admin state and what the actuator learned;
        ``cancels`` are the node ids whose drain of ours an operator cancels now; ``listed`` the
        listing of our nodes as given (terminated ones too), whose tags count the hour's boots and
        destroys with the actuator's own."""
        now = self.clock() if now is None else now
        state = self.actuator.state(now) if self.actuator is not None else ActuatorState()
        core = self.settings.core
        destroys = (merge(listed_destroys(listed, now), state.destroys_by_node, now)
                    if core.max_destroys_per_hour > 0 or core.rebuy_hold > 0 else state.recent_destroys)
        boots = merge(listed_boots(listed, now), state.boots_by_request, now) if core.max_boots_per_hour > 0 else ()
        configured = {sz.name for sz in core.sizes}
        held, forced, paused = _admin_view(self.admin)
        # a missing or silent worker is believed only once fresh polls of this process showed it so
        # for node_stale_after (after a restart or an outage, ads may just be late or old); never
        # longer than boot_grace, so a VM watched since its launch goes when boot grace ends
        confirm = min(self.settings.core.node_stale_after, self.settings.core.boot_grace)
        confirmed = self._suspects.confirmed(confirm)
        ids = self.inputs.ids(nodes)
        unconfirmed = frozenset() if confirm <= 0.0 else ids - confirmed if confirmed else ids
        return Snapshot(
            now=now,
            polled_at={"cloud": cloud_polled_at, "scheduler": poll.polled_at},
            cloud_nodes=tuple(nodes),
            in_flight=build_in_flight(self.inputs.action_tagged(nodes), poll, state.in_flight,
                                      tag_grace=max(2 * self.settings.poll.scheduler_interval, 120.0),
                                      listed=nodes),
            held=held, forced_drains=forced, paused=paused,
            quota=state.quota, blocked_sizes=state.blocked_sizes,
            open_breakers=frozen_map(state.open_breakers), probe_sizes=state.probe_sizes,
            recent_destroys=destroys, recent_boots=boots,
            known_prices=frozen_map({k: p for k, p in self._prices.items() if k not in configured}),
            unconfirmed=unconfirmed,
            cloud_clock_skew=skew,
            # a named cloud that never answered since the start: as old as can be
            cloud_polled=frozen_map({c.name: (cloud_polled or {}).get(c.name, 0.0) for c in self.settings.clouds}),
            protected_sizes=frozen_map(protected_sizes(self._boot_records, now)),
            cancel_drains=cancels,
            destroyed=frozenset(f.node for f in state.in_flight if f.action == "destroy"),
            **self.memories.recall(poll, self.settings.core, now),
        )

    def prepare(self, nodes: Sequence[CloudNode], cloud_polled_at: float,
                poll: SchedulerPoll) -> tuple[CycleReport, list[Task]]:
        """Plan one cycle and log its decisions; return the report and the tasks to carry out
        (none in dry-run). Outcomes recorded since the last report are included in this one."""
        with _no_cyclic_gc():
            return self._prepare(nodes, cloud_polled_at, poll)

    def _prepare(self, nodes: Sequence[CloudNode], cloud_polled_at: float,
                 poll: SchedulerPoll) -> tuple[CycleReport, list[Task]]:
        cpu0 = time.thread_time()  # this thread only: pollers and actuators run beside it
        now = self.clock()
        # before the snapshot: a new HA leader reads the admin state (pause, holds) it then plans with
        held_back = self.hold_back(min(cloud_polled_at, poll.polled_at)) if self.hold_back else None
        cloud_polled = getattr(nodes, "polled", None)  # several clouds: each one's listing time
        owned = self._ownership(nodes)
        nodes = owned.ours if self.identity is not None else nodes
        listed = nodes
        settled = self.actuator.observe_listing(nodes, cloud_polled_at) if self.actuator is not None else []
        self.record(settled)
        skew = self.clock_skew() if self.clock_skew is not None else None
        nodes = self.inputs.nodes(nodes, cloud_polled_at, poll, skew, self.settings.core.clock_tolerance)
        poll = self.inputs.poll(poll, nodes, self.settings.core.node_stale_after)
        if owned.foreign and self.identity is not None and self.other_controller is None:
            self._watch_pool(owned, poll)
        if self.actuator is not None:
            self.actuator.observe_poll(poll)
        cancels = frozenset(self.admin.pending_cancels() or ()) if hasattr(self.admin, "pending_cancels") else frozenset()
        snap = self.snapshot(nodes, cloud_polled_at, poll, now, skew, cancels, listed, cloud_polled)
        plan = self.planner(snap, self.settings.core, self.matrix, estimator=self.estimator,
                            escalation=self.escalation or None)
        protect = self._watch_boots(plan, now)  # a size just entered protected mode: not booted now
        graces = self.memories.observe(snap, plan, now, self.matrix, self.settings.core)  # changed: used now
        if protect or graces is not None:
            snap = replace(snap, protected_sizes=frozen_map(protected_sizes(self._boot_records, now)),
                           idle_graces=snap.idle_graces if graces is None else graces)
            plan = self.planner(snap, self.settings.core, self.matrix, estimator=self.estimator,
                                escalation=self.escalation or None)
        self._suspects.observe(plan, poll.polled_at, now, self.settings.core.poll_stale_after,
                               getattr(self.matrix, "vocabulary", None))
        gone = self._decisions.decisions(plan, self.dry_run, self.history, self.last_report)
        if gone and hasattr(self.admin, "forget"):
            self.admin.forget(gone)
        held_back = held_back or self.other_controller
        if cancels and (self.dry_run or not held_back):
            now_cancelling = cancelling(plan)
            log_ignored_cancels(cancels - self._cancelling, plan)   # not those carried out before
            self.admin.cancels_done(cancels if self.dry_run else cancels - now_cancelling)
            self._cancelling = now_cancelling
        tasks = [] if self.dry_run or held_back else self._tasks(snap, plan)
        outcomes, self._pending_outcomes = tuple(self._pending_outcomes), []
        cpu = time.thread_time() - cpu0
        self._decisions.summary(snap, plan, cpu, self.dry_run)
        if held_back and (plan.items or plan.boots):
            # a standby plans every cycle: say so at INFO when the reason changes only
            level = logging.DEBUG if held_back == self._held_back_logged else logging.INFO
            log.log(level, "cycle: %d action(s) and %d boot(s) not carried out: %s", len(plan.items),
                    sum(b.count for b in plan.boots), held_back)
        self._held_back_logged = held_back
        report = CycleReport(snapshot=snap, plan=plan, outcomes=outcomes,
                             matrix_hash=getattr(self.matrix, "sha256", ""),
                             matrix_error=self.matrix_error, cpu_seconds=cpu,
                             foreign_nodes=owned.foreign, other_controller=self.other_controller,
                             vocabulary=getattr(self.matrix, "vocabulary", None),
                             denied=frozen_map(self.actuator.denials()) if self.actuator is not None else EMPTY_MAP)
        self.last_report = report
        self.memories.save(now)
        return report, tasks

    def _ownership(self, nodes: Sequence[CloudNode]) -> Ownership:
        """The listing sorted by owner (worked out once per listing), with one log line each time
        what is not plainly ours changes; sets :attr:`other_controller` the first time another
        controller of this deployment is seen acting (this process then acts no more)."""
        if self.identity is None:
            return Ownership()
        if self._owned is not None and self._owned[0] is nodes:
            return self._owned[1]
        before = self._owned[1] if self._owned is not None else Ownership()
        owned = sort_by_owner(nodes, self.identity, self.term() if self.term is not None else None)
        self._owned = (nodes, owned)
        cluster = self.settings.cloud.cluster
        if {n.id for n in owned.foreign} != {n.id for n in before.foreign} and owned.foreign:
            shown = ", ".join(f"{n.name} ({n.id}, deployment {n.tags.get(TAG_DEPLOYMENT) or 'none'})"
                              for n in owned.foreign[:10])
            log.warning("cluster %s: %d VM(s) with this cluster name belong to another deployment "
                        "(not %s): %s; never touched nor counted", cluster, len(owned.foreign),
                        self.identity.deployment, shown)
        adopted = {n.id for n in owned.adopted} - {n.id for n in before.adopted}
        if adopted:
            log.info("cluster %s: %d VM(s) without a deployment tag, launched before this deployment's "
                     "id %s was made, managed as ours: %s", cluster, len(adopted), self.identity.deployment,
                     ", ".join(n.name for n in owned.adopted if n.id in adopted))
        if owned.others and self.other_controller is None:
            self.other_controller = another_controller(cluster, owned.others)
            fix = ("a second [HA] leader of this deployment: give every head the same etcd "
                   "endpoints and election_key (or leave it empty)" if self.term is not None
                   else "stop the other one (or run both under [HA])")
            log.error("%s: this controller (%s) stops every boot, drain and destroy; %s, then "
                      "restart this one", self.other_controller, self.identity.controller, fix)
        return owned

    def _watch_pool(self, owned: Ownership, poll: SchedulerPoll) -> None:
        """Stop acting when VMs of another deployment joined our scheduler: a second controller
        boots for this pool under another deployment id."""
        assert self.identity is not None
        joined = joined_our_pool(owned.foreign, (w.cloud_id for w in poll.workers if w.cloud_id),
                                 self.identity)
        if joined:
            self.other_controller = another_controller(self.settings.cloud.cluster, joined)
            log.error("%s, under deployment id %s, and their workers join this pool: this controller "
                      "(%s) stops every boot, drain and destroy; give both head nodes one "
                      "[Cloud] deployment_id and keep one of them (or run both under [HA]), then "
                      "restart this one", self.other_controller,
                      ", ".join(sorted({n.tags.get(TAG_DEPLOYMENT) or "none" for n, _, _ in joined})),
                      self.identity.controller)

    def _watch_boots(self, plan: Plan, now: float) -> bool:
        """Count failed joins per size (protected mode); one log line when a size enters it.
        True when one did."""
        core = self.settings.core
        before = protected_sizes(self._boot_records, now)
        self._boot_records = observe_boots(self._boot_records, plan.nodes, now,
                                           core.protect_after_failed_boots, core.protect_backoff,
                                           core.protect_max_backoff)
        entered = False
        for size, why in protected_sizes(self._boot_records, now).items():
            if size not in before:
                log.warning("size %s %s", size, why)
                entered = True
        return entered

    def cycle(self, nodes: Sequence[CloudNode], cloud_polled_at: float, poll: SchedulerPoll) -> CycleReport:
        """Plan and carry out one cycle inline; the report holds this cycle's outcomes."""
        report, tasks = self.prepare(nodes, cloud_polled_at, poll)
        outcomes: list[Outcome] = []
        for task in tasks:
            assert self.actuator is not None  # prepare() hands out tasks only to an actuator
            outcomes.extend(self.actuator.run(task))
        self.record(outcomes)
        self._pending_outcomes = []
        report = replace(report, outcomes=report.outcomes + tuple(outcomes),
                         denied=frozen_map(self.actuator.denials()) if self.actuator is not None else EMPTY_MAP)
        self.last_report = report
        return report

    def record(self, outcomes: Iterable[Outcome]) -> None:
        """Log actuator outcomes (one line each) and keep them for the next report."""
        for o in outcomes:
            self._pending_outcomes.append(o)
            self.memories.steering.observe(o)
            if o.kind == "destroy" and o.result == "ok":
                self.inputs.destroyed[o.node] = o.at
            if self.history is not None and o.node in self._decisions.seen:
                self.history.add(o.node, o.at, "outcome", f"{o.kind} {o.result}: {o.detail}")
            size = f", {o.size}" if o.size else ""
            level = {"ok": logging.INFO, "skipped": logging.DEBUG}.get(o.result, logging.WARNING)
            log.log(level, "outcome %s %s%s: %s: %s", o.kind, request_words(o.node), size, o.result, o.detail,
                    extra={"node": request_words(o.node), "action": o.kind, "result": o.result,
                           "reason": o.detail, "request_id": o.request})

    # -- helpers --------------------------------------------------------------------------------

    def _tasks(self, snap: Snapshot, plan: Plan) -> list[Task]:
        steer = self.memories.steering.request(plan, snap, self.settings.core, self.estimator)
        tasks = [Task(b) for b in plan.boots] + ([Task(steer)] if steer is not None else [])
        if not plan.items:
            return tasks
        nodes = {n.id: n for n in snap.cloud_nodes}
        workers = {w.name: w for w in snap.workers}
        return [Task(item, nodes.get(item.node_id), workers.get(item.worker) if item.worker else None)
                for item in plan.items] + tasks
