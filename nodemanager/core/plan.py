"""The plan: from a snapshot, the settings and the matrix to drains, destroys, cancels, boots and
a why for every node. Pure: no I/O, no clock (``snapshot.now`` is the time), deterministic.

The pipeline, per cycle, each stage handing on new immutable records:

1. Facts (:mod:`nodemanager.core.facts`): pair cloud nodes with workers, classify, build each
   node's state tuple, look up the matrix; lost, gone, our drain, drained, counted as up. The
   reasons of stage ``LABELS`` (settings drift, ``max_lifetime``, consolidation) relabel some busy
   nodes ``expired`` or ``underused``, and the matrix's word on the new state is the node's.
2. Wants: the guards (:mod:`nodemanager.core.guards`: destroy under way, held, ambiguous
   pairing, someone else's drain, unconfirmed absence, cancel under way) stop some nodes; the disruption reasons of stage
   ``WANTS`` (:data:`nodemanager.core.reasons.REASONS`: finish our drain, operator drain, matrix
   shutdown, matrix drain) claim the others, first come first served. A node drained by someone
   else (until ``reclaim_foreign_after``) wants nothing and is no capacity for demand.
3. Demand is placed on capacity that exists, tier by tier, then on new boots
   (:mod:`nodemanager.core.placement`); nodes it uses are ``needed``.
4. Gates, in order: paused or stale input (nothing at all is done, not even boots), the reasons of
   stage ``AFTER_DEMAND`` (cancel our drain for demand, drain warm nodes that give way to queued
   jobs), the cloud's clock off ours beyond
   ``max_clock_skew`` or a mass of down nodes (no drain/destroy/escalation: probably a scheduler
   outage; cancels and boots still happen), demand, ``min_nodes``, then the budgets
   ``max_concurrent_drains`` and ``max_destroys_per_hour`` (:mod:`nodemanager.core.budgets`);
   then stage ``AFTER_GATES`` (escalate our drains).
5. Stage ``LAST``: the cancel of a drain an older VM of the name left, an operator's cancel of our
   drain and the resumption of an interrupted destroy override the node's decision; their items
   come after the others. Then the names we drained for VMs that no longer exist are given back
   to the scheduler (:mod:`nodemanager.core.leftovers`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, Sequence

from nodemanager.core.budgets import gate, verb
from nodemanager.core.classify import classify_worker
from nodemanager.core.clocks import skew_freeze
from nodemanager.core.consolidate import hold_boots, rebuy_hold
from nodemanager.core.facts import RECLAIM_ENDS, MatrixLookup, node_facts
from nodemanager.core.guards import guard
from nodemanager.core.halts import mass_down, stale_clouds, stale_inputs
from nodemanager.core.leftovers import gone_vm_drains
from nodemanager.core.pair import Pairing, pair
from nodemanager.core.placement import place_demand
from nodemanager.core.plan_node import UNDECIDED, Decision, NodeFacts, in_field_order, reason_of
from nodemanager.core import reasons as registry
from nodemanager.core.reasons import Context, Escalation, Reason, Stage
from nodemanager.core.undersized import undersized
from nodemanager.core.victims import Estimator, estimate
from nodemanager.core.warm import hold_warm
from nodemanager.model import (Action, Blocked, BudgetUse, CloudNode, Freeze, ItemKind, NodeExplanation, Plan,
                               PlanItem, Snapshot, Size, Unmet, Worker, frozen_map)
from nodemanager.core.settings import CoreSettings
from nodemanager.tags import TAG_REQUEST
from policy_matrix.vocabulary import BOOT_EXCEEDED, DOWN, IDLE, UNPAIRED

__all__ = ["plan", "Stages", "PlainStages", "explain", "Escalation", "MatrixLookup", "RECLAIM_ENDS", "stale_inputs"]

_DOWN_LIKE = frozenset((DOWN, UNPAIRED))  # the core states :func:`_broken` may count
_KIND_ORDER = {ItemKind.CANCEL_DRAIN: 0, ItemKind.DESTROY: 1, ItemKind.DRAIN: 2, ItemKind.ESCALATE: 3}


class Stages(Protocol):
    """The plan's per-node stages, which a caller may replace with ones that give the same
    answers (the controller reuses last cycle's work where a node's inputs did not change)."""

    def pair(self, cloud_nodes: Sequence[CloudNode], workers: Sequence[Worker]) -> Pairing:
        """Nodes paired with workers (:func:`nodemanager.core.pair.pair`)."""
        ...

    def facts(self, snapshot: Snapshot, settings: CoreSettings, matrix: MatrixLookup, sizes: dict[str, Size],
              pairing: Pairing) -> list[NodeFacts]:
        """Every listed node's facts, in node id order (:func:`nodemanager.core.facts.node_facts`)."""
        ...

    def explain(self, decisions: list[Decision]) -> tuple[NodeExplanation, ...]:
        """Each node's explanation, in the decisions' order (:func:`explain`); may empty ``decisions``."""
        ...


@dataclass(frozen=True)
class PlainStages:
    """Every node's pairing, facts and explanation computed afresh: the plan's default."""

    def pair(self, cloud_nodes: Sequence[CloudNode], workers: Sequence[Worker]) -> Pairing:
        return pair(cloud_nodes, workers)

    def facts(self, snapshot: Snapshot, settings: CoreSettings, matrix: MatrixLookup, sizes: dict[str, Size],
              pairing: Pairing) -> list[NodeFacts]:
        return node_facts(snapshot, settings, matrix, sizes, pairing)

    def explain(self, decisions: list[Decision]) -> tuple[NodeExplanation, ...]:
        return explain(decisions)


_PLAIN = PlainStages()


def plan(snapshot: Snapshot, settings: CoreSettings, matrix: MatrixLookup, *, estimator: Estimator | None = None,
         escalation: Escalation | None = None, reasons: Sequence[Reason] | None = None,
         stages: Stages = _PLAIN) -> Plan:
    """Decide what to do now. ``matrix`` needs ``lookup(StateTuple) -> Match`` and the
    ``vocabulary`` its states come from (an added worker state is treated like its core state);
    ``estimator`` prices victims (default :func:`nodemanager.core.victims.estimate`);
    ``escalation`` may return ``"quick"`` or ``"fast"`` for a drain of ours that should be made
    harsher; ``reasons`` are the disruption reasons, in order (default
    :data:`nodemanager.core.reasons.REASONS` as registered now); ``stages`` computes the pairing and each node's facts
    and explanation (default :class:`PlainStages`: afresh; another must give the same answers)."""
    now = snapshot.now
    if reasons is None:
        reasons = registry.REASONS
    sizes = {s.name: s for s in settings.sizes}
    silent = stale_clouds(snapshot, settings.poll_stale_after) if snapshot.cloud_polled else {}
    if silent:  # a silent cloud's sizes are not booted: demand goes to the other clouds
        snapshot = replace(snapshot, open_breakers=frozen_map({
            **snapshot.open_breakers, **{s.name: f"not booted: {silent[s.cloud]}" for s in settings.sizes
                                         if s.cloud in silent}}))
    pairing = stages.pair(snapshot.cloud_nodes, snapshot.workers)
    ctx = Context(snapshot=snapshot, settings=settings, frozen=False, escalation=escalation, matrix=matrix,
                  estimator=estimator or estimate)
    # stage LABELS: relabelled (consolidation, lifetimes, drift), as the matrix then sees them
    facts = stages.facts(snapshot, settings, matrix, sizes, pairing)
    # read before the relabels, which keep both (they change a node's state, matrix word, next change)
    up_sizes = [f.node.size for f in facts if f.up]
    small = undersized(facts)
    decisions = _run(Stage.LABELS, [in_field_order(Decision, (f,) + UNDECIDED) for f in facts],  # Decision(facts=f)
                     ctx, reasons)
    del facts  # from here on each node's facts are reached through its decision only

    halt = (f"paused: {snapshot.paused}" if snapshot.paused else None) or stale_inputs(
        snapshot, settings.poll_stale_after, settings.clock_tolerance)
    halt_kind = Blocked.PAUSED if snapshot.paused else Blocked.STALE
    frozen_by: Freeze | None = None
    if halt:
        frozen_by = Freeze.PAUSED if snapshot.paused else Freeze.STALE

    decisions = _wants(decisions, ctx, reasons, pairing.ambiguous, pairing.conflicts)
    skew = skew_freeze(snapshot.cloud_clock_skew, settings.max_clock_skew)
    freeze = skew or mass_down(sum(1 for d in decisions if d.facts.core_state in _DOWN_LIKE and _broken(d)),
                               len(decisions), settings)
    if frozen_by is None and freeze:
        frozen_by = Freeze.CLOCK_SKEW if skew else Freeze.MASS_DOWN

    vocabulary = matrix.vocabulary
    orphans = [(w, vocabulary.core_state(classify_worker(w, now, settings.node_stale_after).state))
               for w in pairing.orphans]
    boots_in_flight = [f for f in snapshot.in_flight if f.action == "boot"]
    if boots_in_flight:
        listed_requests = {n.tags.get(TAG_REQUEST) for n in snapshot.cloud_nodes if n.tags}
        boots_in_flight = [f for f in boots_in_flight if f.node not in listed_requests]
    in_flight = Blocked.IN_FLIGHT
    placed = place_demand(snapshot, settings, sizes, [d for d in decisions if d.blocked != in_flight],
                          orphans, boots_in_flight, up_sizes)
    boots, notes, unmet, needed = placed.boots, placed.notes, placed.unmet, placed.needed
    boots = hold_boots(boots, rebuy_hold(snapshot.recent_destroys, snapshot.demand, settings, now),
                       notes, unmet)
    notes.extend(small)
    if needed:
        decisions = [d._replace(needed=needed[d.facts.node.id]) if d.facts.node.id in needed else d
                     for d in decisions]
    if placed.warm:
        decisions = hold_warm(decisions, placed.warm)

    budget_uses: tuple[BudgetUse, ...] = ()
    if halt:
        decisions = [d.held_back(halt_kind, f"{verb(d.want)} held back: {halt}")
                     if d.want is not None else d for d in decisions]
        unmet.extend(Unmet(f"{b.count} x {b.size}", 0, halt_kind, f"boot {b.count} x {b.size} held "
                           f"back: {halt}") for b in boots)
        boots = []
        notes.append(f"no action taken: {halt}")
    else:
        ctx = ctx._replace(frozen=bool(freeze), gives_way=placed.gives_way)
        decisions = _run(Stage.AFTER_DEMAND, decisions, ctx, reasons)
        decisions, budget_uses = gate(decisions, snapshot, settings, freeze, estimator or estimate, reasons)
        decisions = _run(Stage.AFTER_GATES, decisions, ctx, reasons)
        if silent:
            decisions = [d.held_back(Blocked.STALE, f"{verb(d.want)} held back: {silent[d.facts.node.cloud]}")
                         if d.want is not None and d.facts.node.cloud in silent else d for d in decisions]
    items = sorted((_item(d) for d in decisions if d.want is not None),
                   key=lambda i: (_KIND_ORDER[i.kind], i.node_id))
    items, decisions = _last(items, decisions, ctx._replace(frozen=bool(halt or freeze)), reasons)
    if silent:  # an override's cloud call on a silent cloud waits for its listing too
        clouds = {d.facts.node.id: d.facts.node.cloud for d in decisions}
        items = [i for i in items if i.kind is ItemKind.CANCEL_DRAIN or clouds.get(i.node_id) not in silent]
    # a silent cloud's VMs may be missing from the listing: no name is taken for a gone VM's then
    if pairing.orphans and not (halt or freeze or silent):
        items.extend(gone_vm_drains(pairing.orphans, snapshot.cloud_nodes))
    if boots and any(i.kind is ItemKind.DESTROY for i in items):
        boots = hold_boots(boots, rebuy_hold((now,), snapshot.demand, settings, now), notes, unmet)
    return Plan(now=now, items=tuple(items), boots=tuple(boots),
                nodes=stages.explain(decisions), frozen=halt or freeze, notes=tuple(notes),
                unmet=tuple(unmet), frozen_by=frozen_by, budgets=budget_uses,
                clouds=tuple(placed.clouds) if boots else ())


def _wants(undecided: list[Decision], ctx: Context, reasons: Sequence[Reason],
           ambiguous: frozenset[str], conflicts: frozenset[str] = frozenset()) -> list[Decision]:
    """Stage 2: each node's decision from the guards, then the ``WANTS`` reasons in order."""
    snapshot = ctx.snapshot
    out: list[Decision] = []
    open_: list[Decision] = []
    shutdown = Action.START_SHUTDOWN
    unconfirmed = snapshot.unconfirmed
    for d in undecided:
        f = d.facts
        # most nodes have nothing a guard looks at (a shutdown is stopped only when unconfirmed)
        stopped = (guard(f, snapshot, ambiguous, conflicts) if f.flights or f.held or f.foreign
                   or (f.maction is shutdown and f.node.id in unconfirmed)
                   or (ambiguous and f.node.id in ambiguous) or (conflicts and f.node.id in conflicts)
                   else None)
        if stopped is None:
            open_.append(d)
        else:
            d = stopped
        out.append(d)
    claimed: dict[str, Decision] = {}
    # the last reason first, each overwriting those after it: the first to claim a node wins
    # (what a later one proposed for it is dropped), without filtering every node after each
    for reason in reversed([r for r in reasons if r.stage is Stage.WANTS]):
        for d in (reason.propose(open_, ctx) if open_ else ()):
            claimed[d.facts.node.id] = d
    return [claimed.get(d.facts.node.id, d) for d in out] if claimed else out


def _run(stage: Stage, decisions: list[Decision], ctx: Context, reasons: Sequence[Reason]) -> list[Decision]:
    """The reasons of ``stage`` in order, each seeing the decisions the ones before it made."""
    for reason in reasons:
        if reason.stage is stage:
            proposed = reason.propose(decisions, ctx)
            if proposed:
                mine = {d.facts.node.id: d for d in proposed}
                decisions = [mine.get(d.facts.node.id, d) for d in decisions]
    return decisions


def _last(items: list[PlanItem], decisions: list[Decision], ctx: Context,
          reasons: Sequence[Reason]) -> tuple[list[PlanItem], list[Decision]]:
    """Stage ``LAST``: overrides; each reason's items replace the node's and come after the rest."""
    for reason in reasons:
        if reason.stage is Stage.LAST:
            proposed = reason.propose(decisions, ctx)
            if proposed:
                mine = {d.facts.node.id: d for d in proposed}
                decisions = [mine.get(d.facts.node.id, d) for d in decisions]
                items = [i for i in items if i.node_id not in mine] + [_item(d) for d in proposed]
    return items, decisions


def _broken(d: Decision) -> bool:
    """Down or never came up, with no drain of ours nor a block on it (counts for mass_down)."""
    f = d.facts
    # a down-like node the matrix drains (a reclaim notice) is being handled, not broken
    return d.drain is None and not d.blocked and f.maction is not Action.START_DRAIN and (
        f.core_state == DOWN or (f.core_state == UNPAIRED and f.tuple.boot_grace == BOOT_EXCEEDED))


def _item(d: Decision) -> PlanItem:
    f = d.facts
    assert d.want is not None
    return PlanItem(kind=d.want, node_id=f.node.id, node_name=f.node.name, reason=reason_of(d),
                    worker=f.worker.name if f.worker else None, cancellable=d.cancellable,
                    request_id=d.request_id, schedule=d.schedule)


def explain(decisions: list[Decision]) -> tuple[NodeExplanation, ...]:
    """Each node's explanation, in the decisions' order; empties ``decisions`` as it goes, so each
    node's stage records are freed once its explanation exists (the cycle's peak memory)."""
    out: list[NodeExplanation] = []
    # built from a tuple in field order (checked at import below): a call with 16 keywords or more
    # goes through a dict on CPython, six times the cost of the record (one per node per cycle)
    append, new, explanation = out.append, in_field_order, NodeExplanation
    # nodes no reason claimed that share a classification share one text (most busy nodes: less
    # to build now, less kept until the next plan)
    unclaimed: dict[str, str] = {}
    decisions.reverse()
    take = decisions.pop
    while decisions:
        d = take()
        f = d.facts
        node = f.node
        w = f.worker
        drain = f.our_drain
        reason = d.reason
        if not reason:
            why = f.cls.why
            reason = unclaimed.get(why) or unclaimed.setdefault(why, reason_of(d))
        append(new(explanation, (
            node.id, node.name, node.size, f.tuple, f.rule, f.maction, d.want, d.blocked, reason,
            w.name if w is not None else None, w.state if w is not None else None,
            f.next_change, f.next_what, d.cause, f.lost, f.gone,
            drain.since if drain is not None else None, f.drained, f.up, f.after_boot, d.budget,
            f.cls.idle_since if f.core_state == IDLE else None)))
    return tuple(out)


# the order :func:`explain` builds its records in
assert NodeExplanation._fields == (
    "node_id", "name", "size", "tuple", "rule", "matrix_action", "action", "blocked_by", "reason",
    "worker", "raw_state", "next_change", "next_change_what", "cause", "lost", "gone",
    "our_drain_since", "drained", "up", "after_boot", "budget", "idle_since"), "explain() builds NodeExplanation in field order"
