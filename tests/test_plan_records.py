"""Each node's facts and decisions carry what their names say: the plan builds them from tuples in
field order (a named tuple's own constructor costs more than the record, several per node per
cycle), so every field is checked here against the record built by keyword from the inputs."""

from __future__ import annotations

import random

from nodemanager.core.classify import classify_foreign, foreign_drain
from nodemanager.core.facts import in_flight_by_node, is_lost, matches, node_facts
from nodemanager.core.pair import pair
from nodemanager.core.plan_node import Decision, NodeFacts
from nodemanager.model import GONE_STATES, Blocked, Cause, ItemKind
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, DOWN, IDLE, UNPAIRED
from tests.test_plan_reuse import World


def test_every_fact_of_a_node_holds_what_its_name_says():
    world = World(random.Random(11))
    seen: set[str] = set()
    for _ in range(120):
        world.step()
        s, settings, matrix = world.snapshot(), world.settings, world.matrix
        sizes = {z.name: z for z in settings.sizes}
        pairing = pair(s.cloud_nodes, s.workers)
        flights = in_flight_by_node(s)
        for f in node_facts(s, settings, matrix, sizes, pairing):
            node, worker = f.node, pairing.paired.get(f.node.id)
            match = matrix.lookup(f.tuple)
            mine = flights.get(node.id, {})
            our_drain = mine.get("drain") if "cancel_drain" not in mine else None
            held = matches(node, worker, s.held)
            lost = is_lost(worker, s.now, settings.node_stale_after)
            theirs = foreign_drain(worker)
            foreign = theirs is not None and worker is not None and classify_foreign(
                f.cls, theirs, worker.drain_since, s.now, settings.reclaim_foreign_after).left_alone
            core = matrix.vocabulary.core_state(f.tuple.worker_state)
            ours_draining = our_drain is not None and "destroy" not in mine and (held or not foreign)
            expected = NodeFacts(
                node=node, worker=worker, size=sizes.get(node.size), cls=f.cls, tuple=f.tuple,
                rule=match.rule.location, maction=match.action, core_state=core, next_change=f.next_change,
                next_what=f.next_what, theirs=theirs, foreign=foreign, flights=mine, held=held, lost=lost,
                gone=node.state in GONE_STATES, our_drain=our_drain, ours_draining=ours_draining,
                drained=(our_drain is not None and core == DOWN and worker is not None
                         and worker.running_jobs == 0 and not lost),
                up=not ours_draining and not foreign and "destroy" not in mine and (
                    core in (IDLE, BUSY) or (core == UNPAIRED and f.tuple.boot_grace != BOOT_EXCEEDED)),
                after_boot=f.after_boot)
            assert f == expected, (f, expected)
            # the fields taken from the record itself above, checked for what they are
            assert f.cls.state == f.tuple.worker_state
            assert (f.next_change is None) == (f.next_what is None)
            assert f.next_change is None or (isinstance(f.next_change, float) and f.next_change >= s.now)
            assert f.after_boot is None or (worker is not None and isinstance(f.after_boot[0], float)
                                            and isinstance(f.after_boot[1], str))
            seen.update(name for name, v in zip(NodeFacts._fields, f) if v not in (None, False, "", {}))
    assert set(NodeFacts._fields) - seen == set(), set(NodeFacts._fields) - seen


def test_each_step_of_a_decision_changes_only_the_fields_it_names():
    world = World(random.Random(3))
    for _ in range(20):
        world.step()
    s = world.snapshot()
    sizes = {z.name: z for z in world.settings.sizes}
    facts = node_facts(s, world.settings, world.matrix, sizes, pair(s.cloud_nodes, s.workers))
    assert facts
    cause = Cause(reason="matrix_drain", by="rule:1")
    for f in facts:
        start = Decision(facts=f)
        # every field set, so a step that dropped or moved one would show
        full = start._replace(want=ItemKind.DRAIN, cause=cause, blocked=Blocked.BUDGET, reason="r",
                              cancellable=False, forced=True, drain=f.our_drain, needed="jobs",
                              request_id="req", schedule="quick", budget="nights")
        for d in (start, full):
            assert d.wanting(ItemKind.DESTROY, cause, "w", cancellable=False) == d._replace(
                want=ItemKind.DESTROY, cause=cause, reason="w", cancellable=False)
            assert d.wanting(ItemKind.DRAIN, cause, "w") == d._replace(
                want=ItemKind.DRAIN, cause=cause, reason="w", cancellable=True)
            assert d.held_back(Blocked.FROZEN, "h") == d._replace(
                want=None, blocked=Blocked.FROZEN, reason="h", budget=None)
            assert d.held_back(Blocked.BUDGET, "h", budget="b") == d._replace(
                want=None, blocked=Blocked.BUDGET, reason="h", budget="b")
            assert d.saying("s") == d._replace(reason="s")
            assert type(d.saying("s")) is Decision


def test_a_worker_smaller_than_its_size_is_noted_once_also_when_a_reason_relabels_its_node():
    import policy_matrix

    from nodemanager.core import plan
    from tests.core_world import node, settings, snap, worker

    nodes = [node("big", "large", age=90000.0), node("fits", "large")]
    workers = [worker("big", "alloc", cpus=8), worker("fits", "alloc", cpus=16)]
    p = plan(snap(nodes, workers), settings(max_lifetime=86400.0), policy_matrix.load_default())
    expired = next(e for e in p.nodes if e.node_id == "big")
    assert expired.tuple.worker_state == "expired"  # max_lifetime relabelled it
    assert [n for n in p.notes if "smaller than its size" in n] == [
        "node big: worker big has 8 CPUs, smaller than its size large (16 cores): jobs placed for its cores wait"]
