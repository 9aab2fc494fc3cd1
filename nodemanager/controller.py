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

``admin`` is a :class:`nodemanager.admin.AdminState` (or anything with ``held``, ``forced_drains``
and ``paused``): read once per cycle; its pending cancels become CANCEL_DRAIN items for nodes
that have a drain of ours, and nodes that left the listing are forgotten.

What survives a restart is read back on every cycle, not remembered: drains we started come from
the nodes' ``TAG_DRAIN`` tags (or, when the tag could not be written, from the scheduler's drain
reason prefix), destroys in progress from ``TAG_DESTROY`` (such a node is destroyed again until
it is gone: a destroy is never left half-done), boots from the listing's ``TAG_REQUEST`` (a listed
node, pending or running, counts as supply; the actuator adds boots it requested that are not
listed yet). One bad listing or poll is not believed (see :class:`InputMemory`).

Logging (logger ``nodemanager.decisions``), designed so 10,000 nodes do not flood the log: one
line per node *decision change* — node, tuple, matched rule ``file:line``, matrix action, the
planned action and what blocked it — at INFO when a node is first seen, when its worker state
changes (unpaired → busy → idle → down: a few lines per node lifetime) and when the matrix action,
the planned action or what blocks it changes; a change of window, grace or rule that leaves the
decision as it was (a billing window opening with nothing to do) is logged at DEBUG; every planned action is logged at INFO (``dry-run: would ...`` in dry-run);
one summary line per cycle (node counts per worker state, workers, queued jobs, actions, boots,
freeze reason, CPU time) at INFO when it differs from the previous cycle's, else at DEBUG; one
line per actuator outcome (``ok`` at INFO, ``refused``/``failed`` at WARNING, backoff skips at
DEBUG). A quiet pool logs nothing at INFO. Line format::

    node NAME (ID, SIZE) (idle, open, boot exceeded, idle exceeded) rule default.matrix:24 \
START_DRAIN -> drain [blocked by budget: ...]
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Callable, Iterable, Sequence

from nodemanager.actuate import Actuator, Task
from nodemanager.actuator_memory import ActuatorState
from nodemanager.cloud import TAG_DESTROY, TAG_DRAIN, TAG_REQUEST, is_gone
from nodemanager.core import launch_time
from nodemanager.drain_tickets import is_our_drain, parse_drain_tag
from nodemanager.model import (CloudNode, CycleReport, InFlight, ItemKind, NodeExplanation,
                               Outcome, Plan, PlanItem, Snapshot, Worker)
from nodemanager.scheduler import SchedulerPoll
from nodemanager.settings import Settings
from nodemanager.text import duration, short_rule
from policy_matrix.vocabulary import DOWN, UNPAIRED

__all__ = ["Controller", "InputMemory", "build_in_flight", "decision_line", "requested_at",
           "MISSING_LISTINGS"]

log = logging.getLogger("nodemanager.decisions")


def _short(name: str | None) -> str | None:
    return name.split(".", 1)[0] if name else None


def build_in_flight(nodes: Iterable[CloudNode], poll: SchedulerPoll | None,
                    boots: Iterable[InFlight] = (), tag_grace: float = 120.0) -> tuple[InFlight, ...]:
    """In-flight actions as the cloud tags and the scheduler record them (plus unlisted boots).

    A ``TAG_DRAIN`` is believed unless a poll taken more than ``tag_grace`` seconds after the drain
    began shows the node's worker not draining by us (the drain ended outside the daemon, or a
    crash came between cancelling it and clearing the tag): such a tag is ignored, so the node is
    judged afresh. A drain of ours whose tag could not be written comes from the scheduler."""
    workers = poll.workers if poll is not None else ()
    by_id: dict[str, Worker] | None = None
    by_name: dict[str, Worker] | None = None
    out: list[InFlight] = []
    tagged: set[str] = set()
    for n in nodes:
        if is_gone(n):
            continue
        drain = n.tags.get(TAG_DRAIN)
        parsed = parse_drain_tag(drain) if drain else None
        if parsed is not None:
            if by_id is None:  # indexed only when some node carries a drain tag
                by_id = {w.cloud_id: w for w in workers if w.cloud_id}
            w = by_id.get(n.id)
            if w is None:
                if by_name is None:
                    by_name = {}
                    for x in workers:
                        by_name.setdefault(x.name, x)
                        by_name.setdefault(_short(x.name) or x.name, x)
                w = by_name.get(n.hostname or "") or by_name.get(n.name) or \
                    by_name.get(_short(n.hostname or n.name) or "")
            if w is not None and not is_our_drain(w) and poll is not None and poll.polled_at - parsed[0] > tag_grace:
                log.debug("node %s: drain tag %s outlived the drain (worker %s not draining by us); ignored",
                          n.id, drain, w.name)
            else:
                out.append(InFlight(node=n.id, action="drain", since=parsed[0], size=n.size,
                                    request_id=parsed[1]))
                tagged.add(n.id)
        destroy = n.tags.get(TAG_DESTROY)
        if destroy:
            try:
                since = float(destroy)
            except ValueError:
                since = n.launched_at
            out.append(InFlight(node=n.id, action="destroy", since=since, size=n.size))
    for w in workers:
        # a drain of ours whose tag could not be written: the scheduler remembers it
        if w.cloud_id and w.cloud_id not in tagged and is_our_drain(w):
            out.append(InFlight(node=w.cloud_id, action="drain", since=w.state_since,
                                request_id=w.drain_request_id))
    out.extend(boots)
    return tuple(out)


LINE_WIDTH = 120  # a routine decision line at INFO; the whole explanation follows at DEBUG


def decision_line(e: NodeExplanation, dry_run: bool = False) -> str:
    """The operator's one line for a node decision: node, tuple, matched rule, matrix action ->
    planned action and the reason; a routine line (no action, nothing blocked) keeps as much of
    the reason as fits in :data:`LINE_WIDTH` characters, an action or a block keeps all of it."""
    action = e.action.value if e.action is not None else "none"
    if dry_run and e.action is not None:
        action = f"dry-run: would {action}"
    line = f"node {e.name} {e.tuple} {short_rule(e.rule)} {e.matrix_action} -> {action}"
    why = f"blocked by {e.blocked_by}: {e.reason}" if e.blocked_by else e.reason
    if why:
        room = LINE_WIDTH - len(line) - 2
        routine = e.action is None and not e.blocked_by
        line += ": " + (why if len(why) <= room or not routine else why[:max(0, room - 1)] + "…")
    return line


def decision_details(e: NodeExplanation) -> str:
    """Everything about a decision that the short line leaves out (logged at DEBUG)."""
    return (f"node {e.name} ({e.node_id}, {e.size}) worker {e.worker or '-'} state "
            f"{e.raw_state or '-'} rule {e.rule}: {e.matrix_action} -> "
            f"{e.action.value if e.action else 'none'}; blocked by {e.blocked_by or '-'}; {e.reason}")


def _note_change(history: Any, e: NodeExplanation, old: tuple[Any, ...] | None, now: float,
                 dry_run: bool) -> None:
    """Add a history event when the node is new, its worker state or its decision changed."""
    if old is not None and old[3].worker_state != e.tuple.worker_state:
        history.add(e.node_id, now, "state", f"{old[3].worker_state} -> {e.tuple.worker_state}"
                    + (f" (scheduler: {e.raw_state})" if e.raw_state else ""))
    if old is None or (old[0], old[1], old[2]) != (e.matrix_action, e.action, e.blocked_by):
        history.add(e.node_id, now, "decision", _Decision(e, dry_run))


class _Decision:
    """A decision event's text, made from the explanation only when someone reads it."""

    __slots__ = ("e", "dry_run")

    def __init__(self, e: NodeExplanation, dry_run: bool) -> None:
        self.e, self.dry_run = e, dry_run

    def __str__(self) -> str:
        return decision_line(self.e, self.dry_run)[len(self.e.name) + 6:]


MISSING_LISTINGS = 3   # a listed node absent from this many listings in a row...
MISSING_SECONDS = 120.0  # ...and for this long is believed gone (until then it counts for the caps)


def _decided(tag: str, now: float) -> str:
    """When an earlier process decided a destroy, from its ``TAG_DESTROY`` value (an epoch)."""
    try:
        return f"decided {duration(now - float(tag))} ago" if 0 < float(tag) <= now else "decided earlier"
    except ValueError:
        return "decided earlier"


def requested_at(request_id: str | None) -> float | None:
    """The epoch a boot was requested, from a ``TAG_REQUEST`` value ``<id>.<epoch>`` (else None)."""
    if not request_id:
        return None
    _, dot, tail = request_id.rpartition(".")
    return float(tail) if dot and tail.isdigit() else None


class InputMemory:
    """Smooths over one bad poll without believing it (every rule keeps a node *alive*, never acts):

    - terminated and terminating VMs (the libcloud adapter lists them with their state) are left
      out: they are neither capacity nor something to act on (the actuator still sees them, to
      settle destroys);
    - a node absent from a listing (a failed page, eventual consistency) is kept, as the previous
      listing showed it, for :data:`MISSING_LISTINGS` listings and :data:`MISSING_SECONDS`
      (so it still counts for ``max_nodes`` and ``max_total_price``), and for as long as the scheduler
      still reports a worker on it; never when it is gone, marked ``TAG_DESTROY`` or we destroyed it;
    - a worker absent from a poll (a lost ad, a flapping node, a blank poll) is kept, as last seen,
      while its node is listed and for at most ``node_stale_after`` seconds since we last saw it,
      so the core judges it by its last-heard time (down after ``node_stale_after``), not as a VM
      that never joined;
    - a node's ``launched_at`` is put on our clock (:func:`nodemanager.core.clocks.launch_time`):
      shifted by the cloud's measured clock skew, raised to the time we requested its boot (carried
      in the request tag), so a cloud clock running behind never makes a new VM look
      boot-exceeded, and a launch time still in the future is not believed, so one running ahead
      never extends boot grace nor shifts the billing window.
    """

    def __init__(self) -> None:
        self._listing_at: float | None = None
        self._nodes: dict[str, CloudNode] = {}
        self._missing: dict[str, tuple[int, float]] = {}   # node id -> (listings missed, since)
        self._merged: list[CloudNode] = []
        self._workers: dict[str, tuple[Worker, float]] = {}
        self.destroyed: dict[str, float] = {}

    def nodes(self, listing: Sequence[CloudNode], polled_at: float, poll: SchedulerPoll,
              skew: float | None = None, tolerance: float = 30.0) -> list[CloudNode]:
        if polled_at == self._listing_at:
            return self._merged
        self._listing_at = polled_at
        self.destroyed = {k: t for k, t in self.destroyed.items() if polled_at - t < 3600.0}
        listing = [n for n in listing if not is_gone(n)]   # terminated VMs: neither supply nor work
        current = {n.id: n for n in listing}
        on_workers: set[str] | None = None
        kept: list[CloudNode] = []
        missing: dict[str, tuple[int, float]] = {}
        for node_id, node in self._nodes.items():
            if node_id in current or node_id in self.destroyed or is_gone(node) or node.tags.get(TAG_DESTROY):
                continue
            if on_workers is None:
                on_workers = {w.cloud_id for w in poll.workers if w.cloud_id}
            count, since = self._missing.get(node_id, (0, polled_at))
            count += 1
            if count < MISSING_LISTINGS or polled_at - since < MISSING_SECONDS or node_id in on_workers:
                kept.append(node)
                missing[node_id] = (count, since)
        if kept:
            log.info("cloud listing lacks %d node(s) seen before (%s%s); kept as they were",
                     len(kept), ", ".join(n.id for n in kept[:5]), "..." if len(kept) > 5 else "")
        self._missing = missing
        merged = [self._launch_time(n, skew, polled_at, tolerance) for n in listing] + kept
        self._nodes = {n.id: n for n in merged}
        self._merged = merged
        return merged

    def _launch_time(self, node: CloudNode, skew: float | None, listed_at: float,
                     tolerance: float) -> CloudNode:
        asked = requested_at(node.tags.get(TAG_REQUEST)) if node.tags else None
        before = self._nodes.get(node.id)
        t = launch_time(node.launched_at, asked, skew, listed_at, tolerance,
                        before.launched_at if before is not None else None)
        return node if t == node.launched_at else replace(node, launched_at=t)

    def poll(self, poll: SchedulerPoll, nodes: Sequence[CloudNode], stale_after: float) -> SchedulerPoll:
        now = poll.polled_at
        present = {w.name for w in poll.workers}
        listed = {n.id for n in nodes}
        carried = [w for name, (w, seen) in self._workers.items()
                   if name not in present and w.cloud_id in listed and now - seen <= stale_after]
        self._workers = {name: self._workers[name] for name in (w.name for w in carried)}
        self._workers.update((w.name, (w, now)) for w in poll.workers)
        if not carried:
            return poll
        log.info("scheduler poll lacks %d worker(s) seen before (%s%s); kept as last seen",
                 len(carried), ", ".join(w.name for w in carried[:5]), "..." if len(carried) > 5 else "")
        return SchedulerPoll(workers=poll.workers + tuple(carried), demand=poll.demand, polled_at=poll.polled_at)


def _admin_view(admin: Any) -> tuple[frozenset[str], frozenset[str], str | None]:
    if admin is None:
        return frozenset(), frozenset(), None
    view = admin() if callable(admin) else admin
    return (frozenset(getattr(view, "held", ()) or ()), frozenset(getattr(view, "forced_drains", ()) or ()),
            getattr(view, "paused", None))


def _default_planner() -> Callable[..., Plan]:
    from nodemanager.core import plan
    return plan


def _default_escalation(settings: Settings) -> Any:
    try:
        from nodemanager.core import make_escalation
    except ImportError:
        return None
    return make_escalation(settings.drain)


class Controller:
    """One controller: builds snapshots, runs the core, logs decisions, hands out tasks.

    ``actuator`` may be None in dry-run. ``planner`` defaults to :func:`nodemanager.core.plan`;
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
        self._seen: dict[str, tuple[Any, ...]] = {}
        # nodemanager.history.NodeHistory: each node's events, added where a decision changes
        self.history: Any = None
        self._pending_outcomes: list[Outcome] = []
        self._last_summary: tuple[Any, ...] | None = None
        self._just_destroyed: set[str] = set()
        # node id -> seconds of fresh scheduler polls in a row that showed it unpaired or down
        self._suspect_for: dict[str, float] = {}
        self._suspect_poll: float | None = None       # polled_at of the last poll counted
        self.inputs = InputMemory()
        # [HA]: given the oldest input's poll time, why this process must not act now (None: act)
        self.hold_back: Callable[[float], str | None] | None = None
        self._held_back_logged: str | None = None
        if actuator is None and not self.dry_run:
            raise ValueError("a controller that acts needs an actuator")

    # -- reloads --------------------------------------------------------------------------------

    def set_matrix(self, matrix: Any, error: str | None = None) -> None:
        """Use ``matrix`` from the next cycle on; ``error`` is a rejected reload's message."""
        self.matrix = matrix
        self.matrix_error = error

    def update_settings(self, settings: Settings) -> None:
        self.settings = settings
        if self._escalation_given is None:
            self.escalation = _default_escalation(settings)
        if self.actuator is not None:
            self.actuator.update_settings(settings)

    def forget_inputs(self) -> None:
        """Start the input memory afresh from the next cycle, as a restart does (a new HA leader)."""
        self.inputs = InputMemory()

    # -- the cycle ------------------------------------------------------------------------------

    def snapshot(self, nodes: Sequence[CloudNode], cloud_polled_at: float, poll: SchedulerPoll,
                 now: float | None = None, skew: float | None = None) -> Snapshot:
        """The snapshot for these inputs, with admin state and what the actuator learned."""
        now = self.clock() if now is None else now
        state = self.actuator.state(now) if self.actuator is not None else ActuatorState()
        self._just_destroyed = {f.node for f in state.in_flight if f.action == "destroy"}
        held, forced, paused = _admin_view(self.admin)
        # a missing or silent worker is believed only once fresh polls of this process showed it so
        # for node_stale_after (after a restart or an outage, ads may just be late or old); never
        # longer than boot_grace, so a VM watched since its launch goes when boot grace ends
        confirm = min(self.settings.core.node_stale_after, self.settings.core.boot_grace)
        seen = self._suspect_for
        unconfirmed = frozenset(n.id for n in nodes if seen.get(n.id, 0.0) < confirm)
        return Snapshot(
            now=now,
            polled_at={"cloud": cloud_polled_at, "scheduler": poll.polled_at},
            cloud_nodes=tuple(nodes),
            workers=poll.workers,
            demand=poll.demand,
            in_flight=build_in_flight(nodes, poll, state.in_flight,
                                      tag_grace=max(2 * self.settings.poll.scheduler_interval, 120.0)),
            held=held, forced_drains=forced, paused=paused,
            quota=state.quota, blocked_sizes=state.blocked_sizes,
            recent_destroys=state.recent_destroys,
            unconfirmed=unconfirmed,
            cloud_clock_skew=skew,
        )

    def prepare(self, nodes: Sequence[CloudNode], cloud_polled_at: float,
                poll: SchedulerPoll) -> tuple[CycleReport, list[Task]]:
        """Plan one cycle and log its decisions; return the report and the tasks to carry out
        (none in dry-run). Outcomes recorded since the last report are included in this one."""
        cpu0 = time.thread_time()  # this thread only: pollers and actuators run beside it
        now = self.clock()
        settled = self.actuator.observe_listing(nodes, cloud_polled_at) if self.actuator is not None else []
        if settled:
            self.record(settled)
        skew = self.clock_skew() if self.clock_skew is not None else None
        nodes = self.inputs.nodes(nodes, cloud_polled_at, poll, skew, self.settings.core.clock_tolerance)
        poll = self.inputs.poll(poll, nodes, self.settings.core.node_stale_after)
        if self.actuator is not None:
            self.actuator.observe_poll(poll)
        snap = self.snapshot(nodes, cloud_polled_at, poll, now, skew)
        plan = self.planner(snap, self.settings.core, self.matrix, estimator=self.estimator,
                            escalation=self.escalation or None)
        plan = self._resume_destroys(snap, plan)
        plan = self._operator_cancels(snap, plan)
        self._watch_suspects(plan, poll.polled_at, now)
        gone = self._log_decisions(plan)
        if gone and hasattr(self.admin, "forget"):
            self.admin.forget(gone)
        held_back = self.hold_back(min(cloud_polled_at, poll.polled_at)) if self.hold_back else None
        tasks = [] if self.dry_run or held_back else self._tasks(snap, plan)
        outcomes, self._pending_outcomes = tuple(self._pending_outcomes), []
        cpu = time.thread_time() - cpu0
        self._log_summary(snap, plan, cpu)
        if held_back and (plan.items or plan.boots):
            # a standby plans every cycle: say so at INFO when the reason changes only
            level = logging.DEBUG if held_back == self._held_back_logged else logging.INFO
            log.log(level, "cycle: %d action(s) and %d boot(s) not carried out: %s", len(plan.items),
                    sum(b.count for b in plan.boots), held_back)
        self._held_back_logged = held_back
        report = CycleReport(snapshot=snap, plan=plan, outcomes=outcomes,
                             matrix_hash=getattr(self.matrix, "sha256", ""),
                             matrix_error=self.matrix_error, cpu_seconds=cpu)
        self.last_report = report
        return report, tasks

    def _watch_suspects(self, plan: Plan, polled_at: float, now: float) -> None:
        """Add the time since the last counted poll to each node a new, fresh poll shows unpaired
        or down; a node shown otherwise starts again from 0, and so does every node after a gap in
        the polls longer than poll_stale_after (an outage is no evidence of absence)."""
        last = self._suspect_poll
        if now - polled_at > self.settings.core.poll_stale_after:
            self._suspect_for, self._suspect_poll = {}, None
            return
        if last is not None and polled_at <= last:
            return
        gap = polled_at - last if last is not None else 0.0
        if gap > self.settings.core.poll_stale_after:
            self._suspect_for, gap = {}, 0.0
        before = self._suspect_for
        self._suspect_for = {e.node_id: before.get(e.node_id, -gap) + gap for e in plan.nodes
                             if e.tuple.worker_state in (UNPAIRED, DOWN)}
        self._suspect_poll = polled_at

    def cycle(self, nodes: Sequence[CloudNode], cloud_polled_at: float, poll: SchedulerPoll) -> CycleReport:
        """Plan and carry out one cycle inline; the report holds this cycle's outcomes."""
        report, tasks = self.prepare(nodes, cloud_polled_at, poll)
        outcomes: list[Outcome] = []
        for task in tasks:
            assert self.actuator is not None  # prepare() hands out tasks only to an actuator
            outcomes.extend(self.actuator.run(task))
        self.record(outcomes)
        self._pending_outcomes = []
        report = replace(report, outcomes=report.outcomes + tuple(outcomes))
        self.last_report = report
        return report

    def record(self, outcomes: Iterable[Outcome]) -> None:
        """Log actuator outcomes (one line each) and keep them for the next report."""
        for o in outcomes:
            self._pending_outcomes.append(o)
            if o.kind == "destroy" and o.result == "ok":
                self.inputs.destroyed[o.node] = o.at
            if self.history is not None and o.node in self._seen:
                self.history.add(o.node, o.at, "outcome", f"{o.kind} {o.result}: {o.detail}")
            size = f", {o.size}" if o.size else ""
            level = {"ok": logging.INFO, "skipped": logging.DEBUG}.get(o.result, logging.WARNING)
            log.log(level, "outcome %s %s%s: %s: %s", o.kind, o.node, size, o.result, o.detail)

    # -- helpers --------------------------------------------------------------------------------

    def _resume_destroys(self, snap: Snapshot, plan: Plan) -> Plan:
        """Add a destroy for every listed node marked ``TAG_DESTROY`` that the plan does not destroy
        (a destroy interrupted by a restart or a failed call), unless actions are frozen/paused."""
        if plan.frozen or snap.paused:
            return plan
        planned = {i.node_id for i in plan.items if i.kind == ItemKind.DESTROY}
        resume = [n for n in snap.cloud_nodes
                  if n.tags.get(TAG_DESTROY) and n.id not in planned and not is_gone(n)
                  and n.id not in self._just_destroyed]  # listed before our destroy finished
        if not resume:
            return plan
        workers = {e.node_id: e.worker for e in plan.nodes}
        extra = [PlanItem(kind=ItemKind.DESTROY, node_id=n.id, node_name=n.name,
                          reason=f"finishing the destroy {_decided(n.tags[TAG_DESTROY], snap.now)}",
                          worker=workers.get(n.id), cancellable=False) for n in resume]
        resumed = {n.id for n in resume}
        items = tuple(i for i in plan.items if i.node_id not in resumed) + tuple(extra)
        return replace(plan, items=items)

    def _operator_cancels(self, snap: Snapshot, plan: Plan) -> Plan:
        """A CANCEL_DRAIN for each node whose drain of ours the operator asked to cancel; it
        replaces whatever the plan had for that node (except finishing a recorded destroy)."""
        if not hasattr(self.admin, "take_cancels"):
            return plan
        cancels = self.admin.take_cancels()
        if not cancels:
            return plan
        draining = {f.node: f for f in snap.in_flight if f.action == "drain"}
        nodes = {n.id: n for n in snap.cloud_nodes}
        workers = {e.node_id: e.worker for e in plan.nodes}
        extra = {}
        for node_id in sorted(cancels):
            node = nodes.get(node_id)
            if node is not None and node_id in draining and not node.tags.get(TAG_DESTROY):
                extra[node_id] = PlanItem(kind=ItemKind.CANCEL_DRAIN, node_id=node_id, node_name=node.name,
                                          reason="operator cancelled the drain", worker=workers.get(node_id),
                                          request_id=draining[node_id].request_id)
            else:
                log.info("node %s: operator cancel ignored: no drain of ours in progress", node_id)
        if not extra:
            return plan
        kept = tuple(i for i in plan.items if i.node_id not in extra)
        return replace(plan, items=kept + tuple(extra.values()))

    def _tasks(self, snap: Snapshot, plan: Plan) -> list[Task]:
        if not plan.items:
            return [Task(b) for b in plan.boots]
        nodes = {n.id: n for n in snap.cloud_nodes}
        workers = {w.name: w for w in snap.workers}
        tasks = [Task(item, nodes.get(item.node_id), workers.get(item.worker) if item.worker else None)
                 for item in plan.items]
        tasks.extend(Task(b) for b in plan.boots)
        return tasks

    def _log_decisions(self, plan: Plan) -> list[str]:
        """Log decision changes and actions; return the node ids that left the listing."""
        seen = self._seen
        acted = {i.node_id for i in plan.items}
        info, debug = log.isEnabledFor(logging.INFO), log.isEnabledFor(logging.DEBUG)
        history = self.history
        for e in plan.nodes:
            old = seen.get(e.node_id)  # (matrix action, action, blocked by, tuple, rule) last logged
            if e.action is not None or e.node_id in acted:
                level = logging.INFO
            elif (old is not None and old[0] is e.matrix_action and old[1] == e.action
                  and old[2] == e.blocked_by and old[3] == e.tuple and old[4] == e.rule):
                continue  # the common case: nothing new, nothing built
            elif (old is None or (old[0], old[1], old[2]) != (e.matrix_action, e.action, e.blocked_by)
                  or old[3].worker_state != e.tuple.worker_state):
                level = logging.INFO  # first seen, a new decision, or a new worker state
            else:  # only the window, a grace or the rule changed, with the same decision
                level = logging.DEBUG
            if debug or (info and level >= logging.INFO):
                log.log(level, "%s", decision_line(e, self.dry_run))
                if debug:
                    log.debug("%s", decision_details(e))
            if history is not None:
                _note_change(history, e, old, plan.now, self.dry_run)
            seen[e.node_id] = (e.matrix_action, e.action, e.blocked_by, e.tuple, e.rule)
        explained = {e.node_id for e in plan.nodes}
        gone = [k for k in seen if k not in explained]
        listed = {n.id: n for n in self.last_report.snapshot.cloud_nodes} \
            if gone and history is not None and self.last_report is not None else {}
        for node_id in gone:
            del seen[node_id]
            log.info("node %s left the cloud listing", node_id)
            if history is not None:
                n = listed.get(node_id)
                history.gone(node_id, plan.now, {"name": n.name, "size": n.size,
                                                 "launched_at": n.launched_at} if n else None)
        for item in plan.items:
            if item.node_id not in explained:
                prefix = "dry-run: would " if self.dry_run else ""
                log.info("node %s (%s) -> %s%s [%s]", item.node_name, item.node_id, prefix,
                         item.kind.value, item.reason)
        for b in plan.boots:
            prefix = "dry-run: would " if self.dry_run else ""
            log.info("boot %s%d x %s [%s]", prefix, b.count, b.size, b.reason)
        return gone

    def _log_summary(self, snap: Snapshot, plan: Plan, cpu: float) -> None:
        counts: dict[str, int] = {}
        for e in plan.nodes:
            counts[e.tuple.worker_state] = counts.get(e.tuple.worker_state, 0) + 1
        states = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
        boots = sum(b.count for b in plan.boots)
        key = (len(snap.cloud_nodes), states, len(snap.workers), sum(d.count for d in snap.demand),
               len(plan.items), boots, plan.frozen)
        level = logging.DEBUG if key == self._last_summary else logging.INFO
        self._last_summary = key
        log.log(level, "cycle: %d nodes (%s), %d workers, %d queued, %d action(s), %d boot(s)%s%s, %.3fs CPU",
                 len(snap.cloud_nodes), states, len(snap.workers), sum(d.count for d in snap.demand),
                 len(plan.items), boots, f", frozen: {plan.frozen}" if plan.frozen else "",
                 " (dry-run)" if self.dry_run else "", cpu)

