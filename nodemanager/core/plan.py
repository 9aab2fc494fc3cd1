"""The plan: from a snapshot, the settings and the matrix to drains, destroys, cancels, boots and
a why for every node. Pure: no I/O, no clock (``snapshot.now`` is the time), deterministic.

Order of reasoning, per cycle:

1. Pair cloud nodes with workers, classify, build each node's state tuple, look up the matrix.
2. What each node *wants*: the matrix action (START_DRAIN → drain, START_SHUTDOWN → destroy), an
   operator's forced drain, or for a drain of ours under way: destroy once drained, else maybe
   cancel (demand) or escalate (the ``escalation`` callback). A node drained by someone else
   (until ``reclaim_foreign_after``) wants nothing, whatever the matrix, a drain tag or an
   operator's forced drain say: blocked by ``foreign_drain``; it is no capacity for demand.
3. Demand is placed on capacity that exists, tier by tier, then on new boots
   (:mod:`nodemanager.core.placement`); nodes it uses are ``needed``.
4. Gates, in order: paused or stale input (nothing at all is done, not even boots), the
   operator's hold, the cloud's clock off ours beyond ``max_clock_skew`` or a mass of down nodes (no drain/destroy/escalation: probably a scheduler
   outage; cancels and boots still happen), demand, ``min_nodes``, then the budgets
   ``max_concurrent_drains`` and ``max_destroys_per_hour``. An operator's forced drain passes
   min_nodes and the drain budget (but counts in both). When a budget or min_nodes lets fewer
   nodes go than want to, the victims are chosen by :func:`order_victims`.
"""

from __future__ import annotations

import math
from typing import Callable, Protocol

from nodemanager.core.billing import (Schedule, _window, boot_grace_state, idle_grace_state,
                                      schedule_for, window_state)
from nodemanager.core.classify import (Classification, classify_foreign, classify_worker,
                                       foreign_drain)
from nodemanager.core.clocks import skew_freeze
from nodemanager.core.consolidate import apply_relabels, hold_boots, rebuy_hold, relabel, too_young
from nodemanager.core.halts import mass_down, stale_inputs
from nodemanager.core.pair import Pairing, by_id, pair
from nodemanager.core.placement import place_demand
from nodemanager.core.plan_node import PlanNode as _Node
from nodemanager.core.victims import Estimator, estimate, order_victims
from nodemanager.model import (Action, CloudNode, InFlight, ItemKind,
                               NodeExplanation, Plan, PlanItem, Size, Snapshot, StateTuple,
                               Unmet, VictimCost, Worker)
from nodemanager.settings import CoreSettings
from nodemanager.tags import TAG_REQUEST
from nodemanager.text import duration
from policy_matrix.matrix import Match
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, DOWN, IDLE, UNPAIRED, Vocabulary

__all__ = ["plan", "Escalation", "stale_inputs"]

Escalation = Callable[[Worker, InFlight, float], "str | None"]


class MatrixLookup(Protocol):
    """What :func:`plan` needs of a matrix (a :class:`policy_matrix.Matrix`, or a test's stand-in)."""

    def lookup(self, state: StateTuple) -> Match: ...

    @property
    def vocabulary(self) -> Vocabulary: ...


_STALE, _PAUSED, _FROZEN, _HELD = "stale", "paused", "frozen", "held"
_DEMAND, _MIN, _BUDGET, _IN_FLIGHT, _NO_WORKER = "demand", "min_nodes", "budget", "in_flight", "no_worker"
_UNCONFIRMED = "unconfirmed"
_FOREIGN = "foreign_drain"
_YOUNG = "min_lifetime"
RECLAIM_ENDS = "reclaim_foreign_after ends"
_KIND_ORDER = {ItemKind.CANCEL_DRAIN: 0, ItemKind.DESTROY: 1, ItemKind.DRAIN: 2, ItemKind.ESCALATE: 3}


def plan(snapshot: Snapshot, settings: CoreSettings, matrix: MatrixLookup, *, estimator: Estimator | None = None,
         escalation: Escalation | None = None) -> Plan:
    """Decide what to do now. ``matrix`` needs ``lookup(StateTuple) -> Match`` and the
    ``vocabulary`` its states come from (an added worker state is treated like its core state);
    ``estimator`` prices victims (default :func:`nodemanager.core.victims.estimate`);
    ``escalation`` may return ``"quick"`` or ``"fast"`` for a drain of ours that should be made
    harsher."""
    now = snapshot.now
    sizes = {s.name: s for s in settings.sizes}
    pairing = pair(snapshot.cloud_nodes, snapshot.workers)
    flights: dict[str, dict[str, InFlight]] = {}
    for f in sorted(snapshot.in_flight, key=lambda f: (f.node, f.action, f.since)):
        flights.setdefault(f.node, {})[f.action] = f
    nodes = _classify(snapshot, settings, matrix, sizes, pairing)
    vocabulary = matrix.vocabulary
    for n in nodes:
        n.core_state = vocabulary.core_state(n.tuple.worker_state)
    # issue 18: underused (consolidation) and expired busy nodes, as the matrix sees them
    apply_relabels(nodes, relabel(nodes, snapshot.demand, settings, now, estimator or estimate,
                            frozenset(k for k, v in flights.items() if "drain" in v)), matrix)

    halt = (f"paused: {snapshot.paused}" if snapshot.paused else None) or stale_inputs(
        snapshot, settings.poll_stale_after, settings.clock_tolerance)
    halt_kind = _PAUSED if snapshot.paused else _STALE

    _wants(nodes, snapshot, flights, settings.node_stale_after)
    freeze = skew_freeze(snapshot.cloud_clock_skew, settings.max_clock_skew) or mass_down(
        sum(1 for n in nodes if _broken(n)), len(nodes), settings)

    orphans = [(w, classify_worker(w, now, settings.node_stale_after)) for w in pairing.orphans]
    listed_requests = {n.tags.get(TAG_REQUEST) for n in snapshot.cloud_nodes if n.tags}
    boots_in_flight = [f for f in snapshot.in_flight
                       if f.action == "boot" and f.node not in listed_requests]
    placed = place_demand(snapshot, settings, sizes, [n for n in nodes if n.blocked != _IN_FLIGHT],
                          [(w, vocabulary.core_state(c.state)) for w, c in orphans],
                          boots_in_flight, sum(1 for n in nodes if _is_up(n)))
    boots, notes, unmet = placed.boots, placed.notes, placed.unmet
    boots = hold_boots(boots, rebuy_hold(snapshot.recent_destroys, snapshot.demand, settings, now),
                        notes, unmet)

    items: list[PlanItem] = []
    if halt:
        for n in nodes:
            if n.want is not None:
                n.blocked, n.reason = halt_kind, f"{_verb(n.want)} held back: {halt}"
                n.want = None
        unmet.extend(Unmet(f"{b.count} x {b.size}", 0, halt_kind, f"boot {b.count} x {b.size} held "
                           f"back: {halt}") for b in boots)
        boots = []
        notes.append(f"no action taken: {halt}")
    else:
        _gate(nodes, snapshot, settings, freeze, estimator or estimate)
        _escalate(nodes, escalation, now, freeze)
        for n in nodes:
            if n.want is not None:
                items.append(PlanItem(kind=n.want, node_id=n.node.id, node_name=n.node.name,
                                      reason=n.reason, worker=n.worker.name if n.worker else None,
                                      cancellable=n.cancellable, request_id=n.request_id,
                                      schedule=n.schedule))
    if boots and any(i.kind is ItemKind.DESTROY for i in items):
        boots = hold_boots(boots, rebuy_hold((now,), snapshot.demand, settings, now), notes, unmet)
    items.sort(key=lambda i: (_KIND_ORDER[i.kind], i.node_id))
    return Plan(now=now, items=tuple(items), boots=tuple(boots),
                nodes=tuple(_explain(n) for n in nodes), frozen=halt or freeze, notes=tuple(notes),
                unmet=tuple(unmet))


def _is_up(n: _Node) -> bool:
    """Counts towards min_nodes: idle, busy or booting, and not on its way out already."""
    return not n.ours_draining and not n.foreign and n.blocked != _IN_FLIGHT and (
        n.core_state in (IDLE, BUSY)
        or (n.core_state == UNPAIRED and n.tuple.boot_grace != BOOT_EXCEEDED))


def _broken(n: _Node) -> bool:
    """Down or never came up, with no drain of ours nor a block on it (counts for mass_down)."""
    return n.drain is None and not n.blocked and (
        n.core_state == DOWN
        or (n.core_state == UNPAIRED and n.tuple.boot_grace == BOOT_EXCEEDED))


_VERBS: dict[ItemKind | None, str] = {ItemKind.DRAIN: "drain", ItemKind.DESTROY: "destroy",
                                      ItemKind.CANCEL_DRAIN: "cancel of drain",
                                      ItemKind.ESCALATE: "escalation"}


def _verb(kind: ItemKind | None) -> str:
    return _VERBS[kind]


def _classify(snapshot: Snapshot, settings: CoreSettings, matrix: MatrixLookup, sizes: dict[str, Size],
              pairing: Pairing) -> list[_Node]:
    paired, reasons = pairing.paired, pairing.reasons
    now = snapshot.now
    schedules: dict[str, Schedule] = {s: schedule_for(sz) for s, sz in sizes.items()}
    lookups: dict[tuple[str, str, str, str], tuple[StateTuple, str, Action]] = {}
    out: list[_Node] = []
    stale_after, boot_grace, idle_grace = settings.node_stale_after, settings.boot_grace, settings.idle_grace
    grace_note = f" (idle_grace {idle_grace:.0f}s)"
    vocabulary = matrix.vocabulary
    always_open = window_state(None, 0.0, now)
    for node in sorted(snapshot.cloud_nodes, key=by_id):
        worker = paired.get(node.id)
        n = _Node(node, worker, sizes.get(node.size))
        c = (classify_worker(worker, now, stale_after) if worker is not None
             else Classification(UNPAIRED, f"unpaired: {reasons.get(node.id, 'no worker')}"))
        n.theirs = theirs = foreign_drain(worker)
        reclaim_at = None
        if theirs is not None and worker is not None:
            c, n.foreign, reclaim_at = classify_foreign(c, theirs, worker.drain_since, now,
                                                        settings.reclaim_foreign_after)
        sched = schedules.get(node.size)
        launched = node.launched_at
        win = _window(sched, launched, now) if sched else always_open
        boot = boot_grace_state(launched, now, boot_grace)
        core = vocabulary.core_state(c.state)  # an added state counts idle grace as its like does
        if core == IDLE:
            since = c.idle_since or launched
            unknown = "" if c.idle_since else " (idle-since unknown: counted from launch)"
            c = Classification(c.state, f"{c.why}{unknown}, idle for {now - since:.0f}s{grace_note}", since)
        idle = idle_grace_state(core, c.idle_since or 0.0, now, idle_grace)
        key = (c.state, win.value, boot.value, idle.value)
        found = lookups.get(key)
        if found is None:
            st = StateTuple(*key)
            match = matrix.lookup(st)
            found = lookups[key] = (st, match.rule.location, match.action)
        n.cls = c
        n.tuple, n.rule, n.maction = found
        # the earliest time at which the tuple changes by time alone
        nxt, what = win.next_change, win.next_what
        for at, at_what in ((boot.next_change, boot.next_what), (idle.next_change, idle.next_what),
                            (reclaim_at, RECLAIM_ENDS)):
            if at is not None and (nxt is None or at < nxt):
                nxt, what = at, at_what
        n.next_change, n.next_what = nxt, what
        out.append(n)
    return out


def _matches(node: CloudNode, worker: Worker | None, names: frozenset[str]) -> bool:
    return bool(names) and (node.id in names or node.name in names
                            or (worker is not None and worker.name in names))


def _wants(nodes: list[_Node], snapshot: Snapshot, flights: dict[str, dict[str, InFlight]],
           stale_after: float) -> None:
    now = snapshot.now
    held, forced = snapshot.held, snapshot.forced_drains
    for n in nodes:
        node, ws = n.node, n.core_state
        mine = flights.get(node.id, {})
        useless = ws in (DOWN, UNPAIRED)
        n.ours_draining = "drain" in mine and "cancel_drain" not in mine and "destroy" not in mine
        if "destroy" in mine:
            n.blocked, n.reason = _IN_FLIGHT, f"destroy under way for {duration(now - mine['destroy'].since)}"
            continue
        if held and _matches(node, n.worker, held):
            n.blocked, n.reason = _HELD, "held by an operator: no action"
            continue
        if n.foreign:
            # theirs, whatever the matrix, our old drain tag or an operator's forced drain say
            n.ours_draining = False
            n.blocked, n.reason = _FOREIGN, f"left alone (matrix says {n.maction}): {n.cls.why}"
            continue
        silent = (ws == DOWN and n.worker is not None and n.worker.last_heard > 0
                  and now - n.worker.last_heard > stale_after)
        if (n.maction is Action.START_SHUTDOWN and (ws == UNPAIRED or silent)
                and node.id in snapshot.unconfirmed):
            # a late or old ad is no proof the node is gone: this process's fresh polls must show it
            n.blocked = _UNCONFIRMED
            what = "silence of its worker" if silent else "missing scheduler record"
            n.reason = (f"matrix says START_SHUTDOWN, but the {what} is not confirmed yet by this "
                        f"process's fresh polls (node_stale_after): {n.cls.why}")
            continue
        if "drain" in mine and "cancel_drain" not in mine:
            n.drain = mine["drain"]
            n.request_id = n.drain.request_id
            w = n.worker
            drained = (ws == DOWN and w is not None and w.running_jobs == 0 and not (
                w.last_heard > 0 and now - w.last_heard > stale_after))
            n.drained = drained
            if drained or (useless and n.maction is Action.START_SHUTDOWN):
                n.want, n.cancellable = ItemKind.DESTROY, False
                n.reason = (f"our drain (started {duration(now - n.drain.since)} ago) finished: {n.cls.why}" if drained
                            else f"matrix says START_SHUTDOWN during our drain: {n.cls.why}")
            else:
                n.reason = f"our drain under way for {duration(now - n.drain.since)}: {n.cls.why}"
            continue
        if "cancel_drain" in mine:
            n.reason = f"cancel of our drain under way for {duration(now - mine['cancel_drain'].since)}"
            continue
        if forced and _matches(node, n.worker, forced) and not useless:
            if n.worker is not None and n.worker.draining:
                n.reason = f"operator asked for a drain; already draining: {n.cls.why}"
                continue
            n.want, n.forced = ItemKind.DRAIN, True
            n.reason = f"operator asked for a drain: {n.cls.why}"
            continue
        if n.maction is Action.START_SHUTDOWN:
            n.want, n.cancellable = ItemKind.DESTROY, not useless
            n.reason = f"matrix says START_SHUTDOWN: {n.cls.why}"
        elif n.maction is Action.START_DRAIN:
            if ws == UNPAIRED:
                n.blocked, n.reason = _NO_WORKER, "matrix says START_DRAIN but no worker to drain"
            elif n.worker is not None and n.worker.draining:
                n.reason = f"matrix says START_DRAIN; already draining (not ours): {n.cls.why}"
            else:
                n.want = ItemKind.DRAIN
                n.reason = f"matrix says START_DRAIN: {n.cls.why}"
        else:
            n.reason = f"matrix says no action: {n.cls.why}"


# ---- gates and budgets --------------------------------------------------------------------

def _gate(nodes: list[_Node], snapshot: Snapshot, settings: CoreSettings, freeze: str | None,
          estimator: Estimator) -> None:
    now = snapshot.now
    # drains of ours the demand needs are cancelled
    for n in nodes:
        if n.drain is not None and n.needed:
            n.want, n.cancellable = ItemKind.CANCEL_DRAIN, True
            n.reason = f"cancel our drain: {n.why_needed}"

    if freeze:
        for n in nodes:
            if n.want in (ItemKind.DRAIN, ItemKind.DESTROY):
                n.blocked, n.reason = _FROZEN, f"{_verb(n.want)} held back: {freeze}"
                n.want = None
        return

    recent = sum(1 for t in snapshot.recent_destroys if now - t < 3600.0)
    destroys_left = (max(settings.max_destroys_per_hour - recent, 0)
                     if settings.max_destroys_per_hour > 0 else math.inf)
    up = sum(1 for n in nodes if _is_up(n))
    room = up - settings.min_nodes

    def budget_destroy(n: _Node) -> bool:
        nonlocal destroys_left
        if destroys_left <= 0:
            n.blocked = _BUDGET
            n.reason = (f"destroy held back: max_destroys_per_hour {settings.max_destroys_per_hour}"
                        f" reached ({recent} in the last hour); {n.reason}")
            n.want = None
            return False
        destroys_left -= 1
        return True

    # forced drains first: the operator's word beats min_nodes and the drain budget (counts in it)
    forced = sum(1 for n in nodes if n.want is ItemKind.DRAIN and n.forced)
    room -= forced

    # useless nodes next (not cancellable): nothing runs there; a booting one still counts as up
    for n in nodes:
        if n.want is ItemKind.DESTROY and not n.cancellable:
            booting = n.drain is None and n.tuple.boot_grace != BOOT_EXCEEDED and (
                n.core_state == UNPAIRED)
            if booting and room <= 0:
                n.blocked = _MIN
                n.reason = f"destroy held back: min_nodes {settings.min_nodes} ({up} up); {n.reason}"
                n.want = None
            elif budget_destroy(n) and booting:
                room -= 1
    draining = sum(1 for n in nodes if n.ours_draining and n.want is None)
    drains_left = max(settings.max_concurrent_drains - draining, 0) - forced
    started = forced


    candidates = [n for n in nodes if n.want in (ItemKind.DRAIN, ItemKind.DESTROY)
                  and n.cancellable and not n.forced]
    for n in candidates:
        young = too_young(n, settings, now)  # issue 18: no give-back shortly after a boot
        if young is not None:
            n.blocked, n.reason, n.want = _YOUNG, f"{_verb(n.want)} {young}; {n.reason}", None
            continue
        if n.needed:
            n.blocked = _DEMAND
            n.reason = f"{_verb(n.want)} held back: {n.why_needed}; {n.reason}"
            n.want = None
    candidates = [n for n in candidates if n.want is not None]
    drains = sum(1 for n in candidates if n.want is ItemKind.DRAIN)
    destroys = len(candidates) - drains
    # victims are ordered only when some, not all, may go (pricing thousands of them costs time)
    some_may_go = room > 0 and ((drains and drains_left > 0) or (destroys and destroys_left > 0))
    if some_may_go and (len(candidates) > room or drains > drains_left or destroys > destroys_left):
        costs = [(n.node.id, estimator(n.worker, now) if n.worker is not None else _FREE)
                 for n in candidates]
        order = {nid: i for i, nid in enumerate(order_victims(costs, settings.victim_horizon))}
        candidates.sort(key=lambda n: order[n.node.id])
        chosen_note = "; other nodes cost more to give back (seed 003 victim order)"
    else:
        chosen_note = ""
    for n in candidates:
        if room <= 0:
            n.blocked = _MIN
            n.reason = (f"{_verb(n.want)} held back: min_nodes {settings.min_nodes} "
                        f"({up} up){chosen_note}; {n.reason}")
            n.want = None
            continue
        if n.want is ItemKind.DRAIN:
            if drains_left <= 0:
                n.blocked = _BUDGET
                n.reason = (f"drain held back: max_concurrent_drains "
                            f"{settings.max_concurrent_drains} reached ({draining} under way, "
                            f"{started} starting now){chosen_note}; {n.reason}")
                n.want = None
                continue
            drains_left -= 1
            started += 1
        elif not budget_destroy(n):
            n.reason += chosen_note
            continue
        room -= 1


_FREE = VictimCost()  # an unpaired node: nothing runs there


def _escalate(nodes: list[_Node], escalation: Escalation | None, now: float,
              freeze: str | None) -> None:
    if escalation is None or freeze:
        return
    for n in nodes:
        if n.drain is not None and n.want is None and n.worker is not None:
            schedule = escalation(n.worker, n.drain, now)
            if schedule:
                n.want, n.schedule = ItemKind.ESCALATE, schedule
                n.reason = f"escalate our drain to {schedule}: {n.reason}"


def _explain(n: _Node) -> NodeExplanation:
    return NodeExplanation(
        node_id=n.node.id, name=n.node.name, size=n.node.size, tuple=n.tuple, rule=n.rule,
        matrix_action=n.maction, action=n.want, blocked_by=n.blocked, reason=n.reason,
        worker=n.worker.name if n.worker is not None else None,
        raw_state=n.worker.state if n.worker is not None else None,
        next_change=n.next_change, next_change_what=n.next_what)
