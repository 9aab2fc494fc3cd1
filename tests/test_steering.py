"""Placement steering in the core and the cycle: ranks follow the victim order reversed (the node
given back last is filled first), nodes being given back come last, and the cycle sends only
what changed (nothing when steering is off and nothing was ranked)."""

from __future__ import annotations

from dataclasses import replace

import policy_matrix
from nodemanager.core import estimate, plan
from nodemanager.core.steering import keep_ranks
from nodemanager.cycle.steering import Steering
from nodemanager.model import ItemKind, Outcome
from tests.core_world import NOW, node, settings, snap, worker

DEFAULT = policy_matrix.load_default()


def mixed(name: str, busy: int, ends_in: float):
    return worker(name, "mix", cpus=8, cpus_busy=busy, running_jobs=busy,
                  job_end_times=tuple(NOW + ends_in for _ in range(busy)))


def world():
    """a: 1 job ending in 20 min; b: 3 jobs ending in 5 h; c: idle, within its idle grace."""
    nodes = [node("a"), node("b"), node("c")]
    workers = [mixed("a", 1, 1200.0), mixed("b", 3, 18000.0), worker("c", "idle", cpus=8)]
    return nodes, workers


def test_the_node_kept_longest_is_filled_first_and_the_idle_one_last():
    nodes, workers = world()
    s = snap(nodes, workers)
    p = plan(s, settings(idle_grace=3600.0), DEFAULT)
    ranks = keep_ranks(p, s, 7200.0, estimate)
    assert sorted(ranks, key=ranks.get) == ["b", "a", "c"]


def test_a_node_the_plan_gives_back_comes_last():
    nodes, workers = world()
    s = snap(nodes, workers)
    p = plan(s, settings(idle_grace=3600.0), DEFAULT)
    leaving = replace(p, nodes=tuple(e._replace(action=ItemKind.DRAIN)
                                     if e.node_id == "b" else e for e in p.nodes))
    ranks = keep_ranks(leaving, s, 7200.0, estimate)
    assert sorted(ranks, key=ranks.get) == ["a", "c", "b"]


def test_the_cycle_sends_only_changes_and_releases_when_switched_off():
    nodes, workers = world()
    s = snap(nodes, workers)
    on = settings(idle_grace=3600.0, steering=True)
    p = plan(s, on, DEFAULT)
    steering = Steering()
    first = steering.request(p, s, on)
    assert first is not None and {(w.name, r) for w, r in first.ranks} == {("b", 1), ("a", 2), ("c", 3)}
    assert steering.request(p, s, on) is None                 # unchanged: nothing to send
    steering.observe(Outcome("steer", "placement", "failed", "timed out", NOW))
    again = steering.request(p, s, on)
    assert again is not None and len(again.ranks) == 3        # a failed request is sent whole again
    off = settings(idle_grace=3600.0)
    released = steering.request(p, s, off)
    assert released is not None and {(w.name, r) for w, r in released.ranks} == {("b", None), ("a", None),
                                                                                  ("c", None)}
    assert steering.request(p, s, off) is None
    assert Steering().request(p, s, off) is None              # off and never on: no call at all
