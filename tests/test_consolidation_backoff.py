"""Consolidation that backs off when its drains do not pay (``consolidate_backoff``): the rule
(:mod:`nodemanager.core.consolidation_backoff`), the plan under it, and the controller's memory fed
with the core's own plans (:mod:`nodemanager.cycle.consolidation_memory`)."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import policy_matrix
from nodemanager.core import plan
from nodemanager.core.consolidation_backoff import PAUSE, Level, Tally, judge, margin_factor
from nodemanager.cycle.consolidation_memory import ConsolidationMemory
from nodemanager.model import ItemKind, frozen_map
from nodemanager.snapshot import dumps, loads
from tests.core_world import NOW, Demand, InFlight, node, settings, snap, worker

COST = policy_matrix.load(os.path.join(os.path.dirname(policy_matrix.default_path()), "cost.matrix"))
ON = dict(consolidate=True, consolidate_margin=4, consolidate_backoff=True)
CORE = settings(**ON)   # idle_grace 300 s: a boot within it of a give-back is a re-buy


def mixed(name: str, busy: int, ends_in: float):
    return worker(name, "mix", cpus=8, cpus_busy=busy, running_jobs=busy,
                  job_end_times=tuple(NOW + ends_in for _ in range(busy)))


def two_half_empty():
    """a: 1 job ending in 20 min, 7 cores free; b: 3 jobs ending in 5 h, 5 free; c: full."""
    return [node("a"), node("b"), node("c")], [mixed("a", 1, 1200.0), mixed("b", 3, 18000.0), mixed("c", 8, 3600.0)]


def lost(n: int, won: int = 0) -> Tally:
    return Tally(completed=won, cancelled=n)


def test_more_drains_lost_than_won_widen_the_margin_twice_then_pause():
    level = judge(Level(since=0.0, tally=lost(3, won=1)), 100.0)
    assert (level.step, level.since, level.tally) == (1, 100.0, Tally())
    assert margin_factor(level, 100.0)[0] == 2.0
    level = judge(replace(level, tally=Tally(boots_held=3, completed=1)), 200.0)
    assert margin_factor(level, 200.0)[0] == 4.0
    level = judge(replace(level, tally=lost(4)), 300.0)
    factor, why = margin_factor(level, 300.0)
    assert factor == math.inf
    assert why == "consolidation paused for 1h 00m more: it did not pay (0 node(s) given back, 4 drain(s) " \
                  "cancelled, 0 re-bought)"


def test_a_pause_ends_by_time_alone_and_a_second_one_lasts_twice_as_long():
    paused = judge(Level(step=2, tally=lost(4)), 0.0)
    assert judge(paused, PAUSE - 1) == paused
    back = judge(paused, PAUSE)
    assert margin_factor(back, PAUSE)[0] == 4.0
    again = judge(replace(back, tally=lost(4)), PAUSE + 10)
    assert judge(again, PAUSE + 10 + 2 * PAUSE - 1).step == again.step
    assert margin_factor(judge(again, PAUSE + 10 + 2 * PAUSE), 0.0)[0] == 4.0


def test_drains_that_pay_bring_the_configured_margin_back():
    level = Level(step=2, pauses=1, tally=Tally(completed=2, cancelled=2))
    level = judge(level, 10.0)
    assert (level.step, level.pauses) == (1, 0)
    assert judge(replace(level, tally=Tally(completed=4)), 20.0).step == 0


def test_too_few_outcomes_judge_nothing():
    level = Level(tally=lost(3))
    assert judge(level, 50.0) is level


def test_a_paused_size_drains_nothing_and_a_widened_margin_keeps_more_free_cores():
    nodes, workers = two_half_empty()
    assert [i.node_id for i in plan(snap(nodes, workers), settings(**ON), COST).items] == ["a"]
    paused = frozen_map({"small": (math.inf, "consolidation paused for 1h 00m more")})
    assert plan(snap(nodes, workers, consolidation_backoff=paused), settings(**ON), COST).items == ()
    # x2 of at least one node's cores (4): 8 free cores must stay elsewhere; a leaves 5, b 7
    widened = frozen_map({"small": (2.0, "consolidation margin x2")})
    p = plan(snap(nodes, workers, consolidation_backoff=widened), settings(**ON), COST)
    assert p.items == ()
    widened = frozen_map({"small": (1.5, "consolidation margin x1.5")})
    p = plan(snap(nodes, workers, consolidation_backoff=widened), settings(**ON), COST)
    assert [i.node_id for i in p.items] == ["b"]
    assert "(consolidation margin x1.5)" in {e.node_id: e for e in p.nodes}["b"].reason


def test_a_snapshot_file_carries_the_back_off_and_null_means_paused():
    nodes, workers = two_half_empty()
    s = snap(nodes, workers, consolidation_backoff=frozen_map({"small": (math.inf, "paused"), "large": (2.0, "x2")}))
    again = loads(dumps(s))
    assert dict(again.consolidation_backoff) == {"small": (math.inf, "paused"), "large": (2.0, "x2")}


def _cancelled_bet(memory: ConsolidationMemory, at: float, boots: int = 0) -> None:
    """The cost profile drains a, then jobs come back: the core cancels the drain (and boots)."""
    nodes, workers = two_half_empty()
    drain = plan(snap(nodes, workers), settings(**ON), COST)
    assert [(i.kind, i.node_id) for i in drain.items] == [(ItemKind.DRAIN, "a")]
    memory.observe(drain, at, COST.vocabulary.core_state, CORE)
    back = plan(snap(nodes, workers, demand=[Demand(cpus=1, count=7 + 8 * boots)],
                     in_flight=[InFlight(node="a", action="drain", since=NOW)]), settings(**ON), COST)
    assert [(i.kind, i.node_id) for i in back.items] == [(ItemKind.CANCEL_DRAIN, "a")]
    memory.observe(back, at + 60, COST.vocabulary.core_state, CORE)


def test_the_controller_memory_backs_off_after_drains_the_jobs_cancel_and_keeps_it_in_the_state_dir(tmp_path):
    path = str(tmp_path / "pool.consolidation")
    memory = ConsolidationMemory(path)
    for k in range(3):
        _cancelled_bet(memory, NOW + 600 * k)
    assert memory.backoffs(NOW + 1800) == {}
    _cancelled_bet(memory, NOW + 1800)
    assert memory.backoffs(NOW + 1900) == {"small": (2.0, "consolidation margin x2: it did not pay at a "
                                                   "narrower one (0 node(s) given back, 4 drain(s) cancelled, "
                                                   "0 re-bought)")}
    assert memory.backoffs(NOW + 1900, on=False) == {}
    # a restart reads it back
    assert ConsolidationMemory(path).backoffs(NOW + 1900) == memory.backoffs(NOW + 1900)


def _given_back(memory: ConsolidationMemory, at: float) -> None:
    """The cost profile drains a at ``at``; a minute later a is no longer listed: given back."""
    nodes, workers = two_half_empty()
    memory.observe(plan(snap(nodes, workers), settings(**ON), COST), at, COST.vocabulary.core_state, CORE)
    memory.observe(plan(snap(nodes[1:], workers[1:]), settings(**ON), COST), at + 60, COST.vocabulary.core_state, CORE)


def test_a_drain_given_back_counts_as_won():
    memory = ConsolidationMemory()
    for k in range(4):
        _given_back(memory, NOW + 600 * k)
    level = memory.levels["small"]
    assert (level.step, level.judged.completed) == (0, 4)


def test_a_node_given_back_then_re_bought_within_idle_grace_is_a_lost_bet():
    memory = ConsolidationMemory()
    nodes, workers = two_half_empty()
    full = [worker(w.name, "alloc", cpus=8, cpus_busy=8, running_jobs=8) for w in workers[1:]]
    again = plan(snap(nodes[1:], full, demand=[Demand(cpus=1, count=1)]), settings(**ON), COST)
    assert [(b.size, b.count) for b in again.boots] == [("small", 1)]
    for k in range(4):
        at = NOW + 3600 * k
        _given_back(memory, at)
        # within idle_grace (300 s) of the give-back for k = 0..2: re-bought; the last one comes too late
        memory.observe(again, at + 60 + (100 if k < 3 else 400), COST.vocabulary.core_state, CORE)
    assert memory.levels["small"].step == 1
    assert memory.levels["small"].judged == Tally(completed=1, boots_held=3)
