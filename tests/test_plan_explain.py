"""Each node's explanation carries its facts and decision under the right names: the plan builds
it in field order (a call with that many keywords is slow), so every field is checked here against
the record built by keyword."""

from __future__ import annotations

import random

from nodemanager.core.facts import node_facts
from nodemanager.core.pair import pair
from nodemanager.core.plan import explain
from nodemanager.core.plan_node import Decision, reason_of
from nodemanager.model import Cause, ItemKind, NodeExplanation
from tests.test_plan_reuse import World


def by_keyword(d: Decision) -> NodeExplanation:
    f, w = d.facts, d.facts.worker
    drain = f.our_drain
    return NodeExplanation(
        node_id=f.node.id, name=f.node.name, size=f.node.size, tuple=f.tuple, rule=f.rule,
        matrix_action=f.maction, action=d.want, blocked_by=d.blocked, reason=reason_of(d),
        worker=w.name if w is not None else None, raw_state=w.state if w is not None else None,
        next_change=f.next_change, next_change_what=f.next_what, cause=d.cause, lost=f.lost,
        gone=f.gone, our_drain_since=drain.since if drain is not None else None, drained=f.drained,
        up=f.up, after_boot=f.after_boot, budget=d.budget,
        idle_since=f.cls.idle_since if f.core_state == "idle" else None)


def test_every_field_of_an_explanation_holds_what_its_name_says():
    rng = random.Random(7)
    world = World(rng)
    seen: set[str] = set()
    for _ in range(80):
        world.step()
        s = world.snapshot()
        sizes = {z.name: z for z in world.settings.sizes}
        decisions = []
        for f in node_facts(s, world.settings, world.matrix, sizes, pair(s.cloud_nodes, s.workers)):
            d = Decision(facts=f)
            if rng.random() < 0.4:
                d = d.wanting(rng.choice(list(ItemKind)), Cause(reason="matrix_drain", by=f.rule), "the matrix says so")
            if rng.random() < 0.2:
                d = d.held_back("budget", "held back: budget nights", budget="nights")
            decisions.append(d)
        expected = [by_keyword(d) for d in decisions]
        got = explain(list(decisions))
        assert got == tuple(expected)
        for e in got:  # the world reaches every kind of value the fields hold
            seen.update(name for name, v in zip(NodeExplanation._fields, e) if v not in (None, False, ""))
    assert set(NodeExplanation._fields) - seen == set(), set(NodeExplanation._fields) - seen
