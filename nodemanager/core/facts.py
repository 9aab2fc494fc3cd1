"""Stage 1 of the plan: each cloud node paired, classified, looked up in the matrix, with the facts
every later stage (and the actuator, metrics, status) reads: lost, gone, our drain, drained,
counted as up. Each fact is computed here once. Pure.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Mapping, Protocol

from nodemanager.core.billing import (BOOT_GRACE_ENDS, Schedule, TimedValue, _window, boot_grace_state,
                                      idle_grace_state, schedule_for, window_state)
from nodemanager.core.classify import Classification, classify_foreign, classify_worker, foreign_drain
from nodemanager.core.arrival_keeper import keep_until
from nodemanager.core.idle_timing import fixed_note, kept_grace, wait_keepers
from nodemanager.core.pair import Pairing, by_id
from nodemanager.core.reclaim import cloud_reclaim
from nodemanager.core.plan_node import NodeFacts, in_field_order
from nodemanager.model import GONE_STATES, Action, CloudNode, InFlight, Size, Snapshot, StateTuple, Worker
from nodemanager.core.settings import CoreSettings
from policy_matrix.matrix import Match
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, DOWN, IDLE, UNPAIRED, Vocabulary

__all__ = ["MatrixLookup", "node_facts", "matches", "is_lost", "RECLAIM_ENDS"]

RECLAIM_ENDS = "reclaim_foreign_after ends"
_NO_FLIGHTS: Mapping[str, InFlight] = {}


class MatrixLookup(Protocol):
    """What :func:`plan` needs of a matrix (a :class:`policy_matrix.Matrix`, or a test's stand-in)."""

    def lookup(self, state: StateTuple) -> Match: ...

    @property
    def vocabulary(self) -> Vocabulary: ...


def is_lost(worker: Worker | None, reference: float, stale_after: float) -> bool:
    """The one definition of a lost worker: last heard more than ``stale_after`` seconds before
    ``reference`` (the plan's now; the actuator's freshest ad of a poll). Never heard (0): not lost."""
    return worker is not None and worker.last_heard > 0 and reference - worker.last_heard > stale_after


def matches(node: CloudNode, worker: Worker | None, names: frozenset[str]) -> bool:
    """True when an operator's list of node ids or names (held, forced drains) names this node."""
    return bool(names) and (node.id in names or node.name in names
                            or (worker is not None and worker.name in names))


def in_flight_by_node(snapshot: Snapshot) -> dict[str, dict[str, InFlight]]:
    """Node id -> action -> the latest action of that kind under way."""
    flights: dict[str, dict[str, InFlight]] = {}
    for f in sorted(snapshot.in_flight, key=lambda f: (f.node, f.action, f.since)):
        flights.setdefault(f.node, {})[f.action] = f
    return flights


def node_facts(snapshot: Snapshot, settings: CoreSettings, matrix: MatrixLookup, sizes: dict[str, Size],
               pairing: Pairing) -> list[NodeFacts]:
    """Every listed node's facts, in node id order (``sizes``: the settings' sizes by name)."""
    paired, reasons = pairing.paired, pairing.reasons
    now = snapshot.now
    flights = in_flight_by_node(snapshot)
    held = snapshot.held
    schedules: dict[str, Schedule] = {s: schedule_for(sz) for s, sz in sizes.items()}
    lookups: dict[tuple[str, str, str, str], tuple[StateTuple, str, Action]] = {}
    out: list[NodeFacts] = []
    stale_after, boot_grace, idle_grace = settings.node_stale_after, settings.boot_grace, settings.idle_grace
    grace_note = fixed_note(idle_grace)
    graces = snapshot.idle_graces
    vocabulary = matrix.vocabulary
    core_state = vocabulary.core_state
    cores: dict[str, str] = {}  # worker_state -> core state, asked once per state
    always_open = window_state(None, 0.0, now)
    # an adapter's words (most workers share them) -> one classification, for workers heard
    # lately whose verdict is not idle: then the classification is the verdict's alone
    shared: dict[str, Classification] = {}
    first: list[tuple[CloudNode, Worker | None, bool, Classification]] = []
    for node in sorted(snapshot.cloud_nodes, key=by_id):
        worker = paired.get(node.id)
        lost = is_lost(worker, now, stale_after)
        if worker is None:
            unpaired_why = reasons.get(node.id)
            c = Classification(UNPAIRED, f"unpaired: {'no worker' if unpaired_why is None else unpaired_why}")
        elif lost or (verdict := worker.classified) is None or verdict.state == IDLE:
            c = classify_worker(worker, now, stale_after)
        else:
            c = shared.get(verdict.why) or shared.setdefault(verdict.why, classify_worker(worker, now, stale_after))
            if c.state != verdict.state:  # the same words for another state: its own classification
                c = classify_worker(worker, now, stale_after)
        first.append((node, worker, lost, c))
    # idle_timing = wait: each size's last free cores keep idle_grace (the break-even one is for the rest)
    keep = wait_keepers(_idle_or_busy(first, core_state)) \
        if graces and settings.idle_timing == "wait" else frozenset()
    kept_until: tuple[float | None, str] = (None, "")
    if keep and settings.wait_grace == "arrivals":
        kept_until = keep_until(snapshot.arrivals, now, settings.arrival_window, settings.arrival_chance)
    for node, worker, lost, c in first:
        nid = node.id
        theirs = foreign_drain(worker)
        foreign = False
        reclaim_at = None
        if theirs is not None and worker is not None:
            c, foreign, reclaim_at = classify_foreign(c, theirs, worker.drain_since, now,
                                                      settings.reclaim_foreign_after,
                                                      idle=worker.running_jobs == 0 and worker.cpus_busy == 0)
        if node.reclaim_at is not None:
            c = cloud_reclaim(node, c, now)
        sched = schedules.get(node.size)
        launched = node.launched_at
        win = _window(sched, launched, now) if sched else always_open
        boot = boot_grace_state(launched, now, boot_grace)
        # an added state counts idle grace as its like does
        core = cores.get(c.state) or cores.setdefault(c.state, core_state(c.state))
        grace = idle_grace
        if core == IDLE:
            note = grace_note
            if graces and node.size in graces:
                grace, note = graces[node.size]
            if nid in keep:
                grace, note = kept_grace(kept_until, c.idle_since or launched, idle_grace, grace, note)
            since = c.idle_since or launched
            unknown = "" if c.idle_since else " (idle-since unknown: counted from launch)"
            c = Classification(c.state, f"{c.why}{unknown}, idle for {now - since:.0f}s{note}", since)
        idle = idle_grace_state(core, c.idle_since or 0.0, now, grace)
        key = (c.state, win.value, boot.value, idle.value)
        found = lookups.get(key)
        if found is None:
            st = StateTuple(*key)
            match = matrix.lookup(st)
            found = lookups[key] = (st, match.rule.location, match.action)
        st, rule, maction = found
        ws = core
        # the earliest time at which the tuple changes by time alone (unrolled: no tuples per node)
        nxt, what = win.next_change, win.next_what
        at = boot.next_change
        if at is not None and (nxt is None or at < nxt):
            nxt, what = at, boot.next_what
        at = idle.next_change
        if at is not None and (nxt is None or at < nxt):
            nxt, what = at, idle.next_what
        if reclaim_at is not None and (nxt is None or reclaim_at < nxt):
            nxt, what = reclaim_at, RECLAIM_ENDS
        after_boot = None
        if what == BOOT_GRACE_ENDS and worker is not None:
            # a joined worker's boot grace ends without mattering to it: the change after it does
            after_boot = _earliest(win, idle, reclaim_at)
        mine = flights.get(nid, _NO_FLIGHTS)
        is_held = bool(held) and matches(node, worker, held)
        if mine:
            our_drain = mine.get("drain") if "cancel_drain" not in mine else None
            destroying = "destroy" in mine
        else:
            our_drain, destroying = None, False
        # a hold freezes the node as it is, so its drain still counts even on a foreign drain
        ours_draining = our_drain is not None and not destroying and (is_held or not foreign)
        drained = (our_drain is not None and ws == DOWN and worker is not None and worker.running_jobs == 0
                   and not lost)
        up = not ours_draining and not foreign and not destroying and (
            ws in (IDLE, BUSY) or (ws == UNPAIRED and st.boot_grace != BOOT_EXCEEDED))
        # in field order (checked in plan_node): one record per node per cycle
        out.append(in_field_order(NodeFacts, (
            node, worker, sizes.get(node.size), c, st, rule, maction, ws, nxt, what, theirs, foreign, mine,
            is_held, lost, node.state in GONE_STATES, our_drain, ours_draining, drained, up, after_boot)))
    return out


def _earliest(win: TimedValue, idle: TimedValue, reclaim_at: float | None) -> tuple[float, str] | None:
    """The earliest of a node's timed changes but its boot grace end (None: none)."""
    found = [(v.next_change, v.next_what or "changes") for v in (win, idle) if v.next_change is not None]
    if reclaim_at is not None:
        found.append((reclaim_at, RECLAIM_ENDS))
    return min(found) if found else None


def _idle_or_busy(first: Iterable[tuple[CloudNode, Worker | None, bool, Classification]],
                  core_state: Callable[[str], str]) -> Iterator[tuple[str, str, Worker, float | None]]:
    """What :func:`wait_keepers` reads of the listed nodes with a heard worker (``first``: each node,
    its worker, whether lost, its scheduler's classification): (node id, size, worker, idle since
    when classified idle, else None)."""
    for n, w, lost, c in first:
        if w is None or n.state in GONE_STATES or lost:
            continue
        yield n.id, n.size, w, (c.idle_since or n.launched_at) if core_state(c.state) == IDLE else None
