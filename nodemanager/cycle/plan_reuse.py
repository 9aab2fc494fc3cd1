"""Last cycle's per-node work reused: a :class:`~nodemanager.core.plan.Stages` for
:func:`nodemanager.core.plan` that gives the plan's own answers, computing only nodes whose inputs
changed. The controller plans through it (:func:`reusing`), in the daemon and in the replay. It pays
off when an unchanged node's records are the very same objects: the simulated pool hands them
back, and so do the HTCondor and libcloud adapters while a node's source is equal
(:mod:`nodemanager.model.same_records`); new equal records are compared field by field, which
costs about what computing the facts does.

The pairing is last cycle's while the listing holds the very same nodes in the same order and
each worker in its place is the same object or pairs alike (the same cloud id; without one, the
same name, address and record times), with this cycle's workers in it.

A node's records are the same when they are equal: the very same objects (the simulated pool
hands back an unchanged record cycle after cycle), or new ones that compare equal (the
adapters' records are frozen values). Kept, per cloud node id, and reused:

* the node's facts, while the listing holds an equal ``CloudNode`` paired with an equal
  ``Worker`` (or with none, for the same pairing reason), the settings and the matrix are the same
  objects and the held set is equal, no action of ours is under way on the node now, ``now`` is
  before the facts' next change by time alone and not before the cycle that made them, and the worker is not lost yet. Never kept: facts
  whose words name ``now`` (an idle node's "idle for", a reclaim notice's countdown, someone
  else's drain: how long ago it began) or made while an action of ours was under way. Reused
  facts are handed on with this cycle's records in them, so last cycle's records are freed;
* the explanation of a node no reason claimed, made from facts equal to this cycle's.

Nothing is kept under ``idle_timing = wait`` with break-even graces: an idle node's grace then
reads the other nodes' free cores.

``tests/test_plan_reuse.py`` holds it equal to the plain plan, cycle after cycle of a changing world.
"""

from __future__ import annotations

from dataclasses import replace
from operator import attrgetter, is_
from typing import Any, Callable, NamedTuple, Sequence, cast

from nodemanager.core.facts import MatrixLookup, node_facts
from nodemanager.core.pair import Pairing, pair
from nodemanager.core.plan import explain
from nodemanager.core.plan_node import Decision, NodeFacts, in_field_order
from nodemanager.model import CloudNode, NodeExplanation, Plan, Size, Snapshot, Worker
from nodemanager.configuration.settings import CoreSettings
from policy_matrix.vocabulary import IDLE

__all__ = ["ReusingStages", "KeptNode", "reusing"]

_NEVER = float("inf")
_BY_NODE_ID = attrgetter("node.id")  # the order node_facts gives: cloud nodes by id
_facts_of = NodeFacts._make  # a node's facts with its new records in front (no keyword binding)


class KeptNode(NamedTuple):
    """A node's facts, the records they were made from and the explanation they gave while no
    reason claimed the node (None: not made yet); valid while ``now < until``."""

    node: CloudNode
    worker: Worker | None
    unpaired_why: str | None
    until: float
    facts: NodeFacts
    explanation: NodeExplanation | None = None


def _pairs_by(w: Worker) -> tuple[object, ...]:
    """What pairing reads of a worker (:mod:`nodemanager.core.pair`): one with a cloud id pairs by
    it alone (its name and address name it in reasons and order orphans); one without, by name or
    address, refused when its record is older than the VM."""
    if w.cloud_id:  # registered_at: a worker with another VM's id may be a conflict (rule 5)
        return (w.cloud_id, w.name, w.address, w.registered_at)
    return (None, w.name, w.address, w.registered_at, w.last_heard)


def _undecided(d: Decision) -> bool:
    """No reason claimed the node and nothing blocked it: its explanation is its facts' alone."""
    return not d.reason and d.want is None and d.blocked is None and d.cause is None


class ReusingStages:
    """The plan's per-node stages with last cycle's work reused (see the module docstring). Not
    thread-safe: one planner uses it at a time."""

    def __init__(self) -> None:
        self._settings: CoreSettings | None = None
        self._matrix: MatrixLookup | None = None
        self._held: frozenset[str] | None = None
        self._now = -float("inf")
        self._kept: dict[str, KeptNode] = {}
        # last cycle's nodes and workers, in order, and their pairing
        self._pairing: tuple[tuple[CloudNode, ...], tuple[Worker, ...], Pairing] | None = None
        self.reused = 0  # facts reused over the planner's life (a test's check that it reuses)

    def pair(self, cloud_nodes: Sequence[CloudNode], workers: Sequence[Worker]) -> Pairing:
        last = self._pairing
        if (last is not None and len(cloud_nodes) == len(last[0]) and len(workers) == len(last[1])
                and all(map(is_, cloud_nodes, last[0]))):
            moved: dict[int, Worker] = {}  # id of last cycle's worker -> the one in its place now
            for old, new in zip(last[1], workers):
                if old is not new:
                    if _pairs_by(old) != _pairs_by(new):
                        break
                    moved[id(old)] = new
            else:
                p = last[2]
                if moved:  # the same pairs, this cycle's records in them
                    get = moved.get
                    p = Pairing({k: get(id(w), w) for k, w in p.paired.items()}, p.reasons,
                                tuple(get(id(w), w) for w in p.orphans), p.ambiguous, p.conflicts)
                self._pairing = (tuple(cloud_nodes), tuple(workers), p)
                return p
        p = pair(cloud_nodes, workers)
        self._pairing = (tuple(cloud_nodes), tuple(workers), p)
        return p

    def facts(self, snapshot: Snapshot, settings: CoreSettings, matrix: MatrixLookup, sizes: dict[str, Size],
              pairing: Pairing) -> list[NodeFacts]:
        # kept facts are valid until a later time, never before the cycle that made them: a clock
        # stepped back (NTP, a VM resumed) plans every node afresh
        if (settings is not self._settings or matrix is not self._matrix or snapshot.held != self._held
                or snapshot.now < self._now):
            self._settings, self._matrix, self._held = settings, matrix, snapshot.held
            self._kept = {}
        self._now = snapshot.now
        if settings.idle_timing == "wait" and snapshot.idle_graces:
            # an idle node's grace reads the other nodes' free cores (idle_timing = wait): all afresh
            self._kept = {}
            return node_facts(snapshot, settings, matrix, sizes, pairing)
        now = snapshot.now
        busy = {f.node for f in snapshot.in_flight}
        paired, reasons = pairing.paired, pairing.reasons
        last, kept = self._kept, {}
        out: list[NodeFacts] = []
        changed: list[CloudNode] = []
        for node in snapshot.cloud_nodes:
            nid = node.id
            worker = paired.get(nid)
            e = last.get(nid)
            if (e is not None and now < e.until and nid not in busy
                    and (e.node is node or e.node == node)
                    and (e.worker is worker or (worker is not None and e.worker == worker))
                    and (worker is not None or e.unpaired_why == reasons.get(nid))):
                if e.node is not node or e.worker is not worker:  # equal new records: hand those on
                    e = KeptNode(node=node, worker=worker, unpaired_why=e.unpaired_why, until=e.until,
                                 facts=_facts_of((node, worker, *e.facts[2:])), explanation=e.explanation)
                kept[nid] = e
                out.append(e.facts)
            else:
                changed.append(node)
        self.reused += len(out)
        if changed:
            stale_after = settings.node_stale_after
            for f in node_facts(replace(snapshot, cloud_nodes=tuple(changed)), settings, matrix, sizes, pairing):
                out.append(f)
                n, w = f.node, f.worker
                # words that name now, or an action of ours under way: made afresh every cycle
                if f.flights or f.core_state == IDLE or n.reclaim_at is not None or f.theirs is not None:
                    continue
                until = _NEVER if f.next_change is None else f.next_change
                if w is not None and w.last_heard > 0:
                    until = min(until, w.last_heard + stale_after)  # lost from then on
                kept[n.id] = KeptNode(node=n, worker=w, unpaired_why=reasons.get(n.id) if w is None else None,
                                      until=until, facts=f)
            out.sort(key=_BY_NODE_ID)
        self._kept = kept
        return out

    def explain(self, decisions: list[Decision]) -> tuple[NodeExplanation, ...]:
        kept = self._kept
        out: list[NodeExplanation | None] = []  # None: made afresh below
        append = out.append
        fresh: list[Decision] = []
        where: list[int] = []
        for d in decisions:
            f = d.facts
            e = kept.get(f.node.id)
            # an unclaimed node (no reason, want, block or cause) on this cycle's kept facts
            if e is not None and e.explanation is not None and e.facts is f and not d.reason and (
                    d.want is None and d.blocked is None and d.cause is None):
                append(e.explanation)
            else:
                where.append(len(out))
                append(None)
                fresh.append(d)
        if fresh:
            for i, d, x in zip(where, list(fresh), explain(fresh)):
                out[i] = x
                f = d.facts
                e = kept.get(f.node.id)
                # only kept facts come back next cycle: their explanation with them
                if e is not None and e.facts is f and _undecided(d):
                    kept[f.node.id] = in_field_order(KeptNode, e[:-1] + (x,))  # _replace costs 5 times as much
        return tuple(cast("list[NodeExplanation]", out))


def reusing(inner: Callable[..., Plan] | None = None) -> Callable[..., Plan]:
    """``inner`` (default :func:`nodemanager.core.plan`; a planner with its signature that hands
    its keywords on to it) with one :class:`ReusingStages` kept across its calls."""
    from nodemanager.core.plan import plan

    stages = ReusingStages()
    run = inner or plan

    def planner(snapshot: Snapshot, settings: CoreSettings, matrix: MatrixLookup, **kw: Any) -> Plan:
        return run(snapshot, settings, matrix, stages=stages, **kw)

    return planner
