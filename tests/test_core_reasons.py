"""Disruption reasons as objects: every decision names its reason and what
caused it, typed; resume-destroy and operator-cancel are decided in the core, so the explanation
agrees with the action; a new reason is one object in the ordered list and draws from the same
budgets. The facts the core computes once per node travel in the explanation (item 2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import policy_matrix

from nodemanager.core import plan
from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons import REASONS, Context, Stage
from nodemanager.model import Blocked, Cause, Freeze, ItemKind
from nodemanager.tags import TAG_DESTROY
from tests.core_world import NOW, InFlight, node, pool, settings, snap, worker

MATRIX = policy_matrix.load_default()


def explained(p, node_id):
    return next(e for e in p.nodes if e.node_id == node_id)


def test_each_action_names_its_reason_and_the_matrix_rule_or_command_behind_it():
    nodes, workers = pool({"idle-old": "idle", "down": "down*", "forced": "alloc", "ours": "drain"})
    s = snap(nodes, workers, forced_drains=frozenset({"forced"}),
             in_flight=[InFlight("ours", "drain", NOW - 600, request_id="r1")])
    p = plan(s, settings(), MATRIX)
    causes = {e.node_id: e.cause for e in p.nodes}
    drain_rule = MATRIX.lookup(explained(p, "idle-old").tuple).rule.location
    assert causes["idle-old"] == Cause("matrix_drain", drain_rule)
    assert causes["down"] == Cause("matrix_shutdown", explained(p, "down").rule)
    assert causes["forced"] == Cause("operator_drain", "operator")
    assert causes["ours"] == Cause("finish_drain", "our drain")
    assert {i.node_id: i.kind for i in p.items} == {
        "idle-old": ItemKind.DRAIN, "down": ItemKind.DESTROY, "forced": ItemKind.DRAIN,
        "ours": ItemKind.DESTROY}


def test_blocked_by_is_typed_and_prints_the_words_dashboards_use():
    nodes, workers = pool({"a": "idle", "b": "idle"})
    p = plan(snap(nodes, workers, held=frozenset({"b"})), settings(min_nodes=2), MATRIX)
    a, b = explained(p, "a"), explained(p, "b")
    assert a.blocked_by is Blocked.MIN_NODES and a.blocked_by == "min_nodes"
    assert a.cause is not None and a.cause.reason == "matrix_drain"  # what wanted it, what stopped it
    assert b.blocked_by is Blocked.HELD and f"{b.blocked_by}" == "held"


def test_a_resumed_destroy_is_in_the_plan_and_its_explanation_agrees():
    tagged = node("gone-soon", tags={TAG_DESTROY: str(int(NOW - 120))})
    s = snap([tagged, node("other")], [worker("gone-soon", state="down"), worker("other", idle_for=10)],
             in_flight=[InFlight("gone-soon", "destroy", NOW - 120)])
    p = plan(s, settings(), MATRIX)
    assert [(i.node_id, i.kind, i.cancellable) for i in p.items] == [("gone-soon", ItemKind.DESTROY, False)]
    e = explained(p, "gone-soon")
    assert (e.action, e.blocked_by) == (ItemKind.DESTROY, None)
    assert e.reason == "finishing the destroy decided 2m 00s ago" == p.items[0].reason
    assert e.cause == Cause("resume_destroy", f"{TAG_DESTROY} tag")
    # not while frozen, nor for a node this process destroyed moments ago
    flight = [InFlight("gone-soon", "destroy", NOW - 120)]
    for held_back in (dict(paused="maintenance"), dict(destroyed=frozenset({"gone-soon"}))):
        p = plan(snap([tagged], [worker("gone-soon", state="down")], in_flight=flight, **held_back), settings(),
                 MATRIX)
        assert p.items == () and explained(p, "gone-soon").blocked_by is Blocked.IN_FLIGHT


def test_a_leftover_destroy_tag_is_resumed_only_for_a_node_that_still_qualifies():
    """Held: nothing. Recovered (its worker idle or busy, heard, no drain of ours): the tag is
    removed. Down with a job still on it: nothing yet."""
    tagged = node("back", tags={TAG_DESTROY: str(int(NOW - 1200))})
    flight = [InFlight("back", "destroy", NOW - 1200)]
    for state in ("down", "idle", "alloc"):
        p = plan(snap([tagged], [worker("back", state=state)], in_flight=flight, held=frozenset({"back"})),
                 settings(), MATRIX)
        assert p.items == () and explained(p, "back").blocked_by is Blocked.HELD
    for state in ("idle", "alloc"):
        p = plan(snap([tagged], [worker("back", state=state)], in_flight=flight), settings(), MATRIX)
        assert [(i.kind, i.cancellable) for i in p.items] == [(ItemKind.CANCEL_DRAIN, False)]
        assert "no longer holds" in p.items[0].reason and TAG_DESTROY in p.items[0].reason
    p = plan(snap([tagged], [worker("back", state="down", running_jobs=1)], in_flight=flight), settings(), MATRIX)
    assert p.items == ()


def test_an_operator_cancel_is_decided_in_the_core_even_while_paused():
    nodes, workers = pool({"ours": "drng", "not-ours": "idle"})
    s = snap(nodes, workers, in_flight=[InFlight("ours", "drain", NOW - 60, request_id="r7")],
             cancel_drains=frozenset({"ours", "not-ours"}), paused="maintenance")
    p = plan(s, settings(), MATRIX)
    assert [(i.node_id, i.kind, i.request_id, i.reason) for i in p.items] == [
        ("ours", ItemKind.CANCEL_DRAIN, "r7", "operator cancelled the drain")]
    e = explained(p, "ours")
    assert (e.action, e.cause) == (ItemKind.CANCEL_DRAIN, Cause("operator_cancel", "operator"))
    assert explained(p, "not-ours").action is None  # no drain of ours: nothing to cancel
    assert p.frozen_by is Freeze.PAUSED


@dataclass(frozen=True)
class MaxLifetime:
    """A reason another engineer might add: destroy nodes older than a day."""

    name: str = "max_lifetime"
    stage: Stage = Stage.WANTS

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]:
        return [d.wanting(ItemKind.DESTROY, Cause(self.name, "max_lifetime 1d"), "older than a day",
                          cancellable=True)
                for d in candidates if ctx.snapshot.now - d.facts.node.launched_at > 86400]


def test_a_new_reason_is_one_object_in_the_list_and_draws_from_the_same_budgets():
    nodes = [node(f"old{i}", age=90000) for i in range(3)] + [node("young", age=7200)]
    workers = [worker(f"old{i}", state="alloc") for i in range(3)] + [worker("young", state="alloc")]
    reasons = (*REASONS[:2], MaxLifetime(), *REASONS[2:])  # before the matrix's reasons
    p = plan(snap(nodes, workers), settings(max_destroys_per_hour=2), MATRIX, reasons=reasons)
    assert plan(snap(nodes, workers), settings(max_destroys_per_hour=2), MATRIX).items == ()
    went = [i.node_id for i in p.items]
    assert len(went) == 2 and {i.kind for i in p.items} == {ItemKind.DESTROY}
    [kept] = [e for e in p.nodes if e.node_id.startswith("old") and e.node_id not in went]
    assert kept.blocked_by is Blocked.BUDGET and kept.cause == Cause("max_lifetime", "max_lifetime 1d")
    assert "max_destroys_per_hour 2 reached" in kept.reason
    assert explained(p, "young").cause is None


def test_the_facts_travel_in_the_explanation():
    nodes = [node("drained"), node("lost"), node("idle"), node("booting", age=60),
             node("leaving", state="shutting-down")]
    workers = [worker("drained", state="drain"), worker("lost", state="down*", last_heard=NOW - 4000),
               worker("idle", idle_for=10), worker("leaving")]
    s = snap(nodes, workers, in_flight=[InFlight("drained", "drain", NOW - 900, request_id="r1")])
    p = plan(s, settings(), MATRIX)
    facts = {e.node_id: (e.lost, e.gone, e.our_drain_since, e.drained, e.up) for e in p.nodes}
    assert facts == {
        "drained": (False, False, NOW - 900, True, False),
        "lost": (True, False, None, False, False),
        "idle": (False, False, None, False, True),
        "booting": (False, False, None, False, True),
        "leaving": (False, True, None, False, True),
    }


def test_consolidation_lifetime_and_drift_are_reasons_the_plan_runs_from_the_list():
    """Each way a busy node is given back is a reason object in ``REASONS``: a plan without it
    leaves the node busy; with it, the matrix (here the cost matrix) drains the relabelled node."""
    import os

    cost = policy_matrix.load(os.path.join(os.path.dirname(policy_matrix.default_path()), "cost.matrix"))
    names = [r.name for r in REASONS]
    assert names[:3] == ["drift", "max_lifetime", "consolidate"]
    assert all(r.stage is Stage.LABELS for r in REASONS[:3])
    old = node("old", age=90000.0, tags={"nodemanager-settings": "was"})
    busy = worker("old", "mix", cpus=4, cpus_busy=1, running_jobs=1, job_end_times=(NOW + 600,))
    cases = {"drift": settings(size_digests=(("small", "now"),)), "max_lifetime": settings(max_lifetime=86400.0),
             "consolidate": settings(consolidate=True, consolidate_margin=0)}
    for name, st in cases.items():
        others = tuple(r for r in REASONS if r.name not in cases or r.name == name)
        p = plan(snap([old], [busy]), st, cost, reasons=others)
        assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "old")], name
        without = tuple(r for r in REASONS if r.name != name)
        p = plan(snap([old], [busy]), st, cost, reasons=without)
        assert p.items == () and p.nodes[0].tuple.worker_state == "busy", name
