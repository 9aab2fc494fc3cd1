"""The replay's newer skip rules, each against the real core or a replay with
every cycle run: consolidation's verdict told from the busy nodes' free cores alone
(:func:`nodemanager.sim.skip_rules.no_spare`), a node's busy/idle change that the matrix leaves
alone (:func:`nodemanager.sim.skip_rules.settles`), and a cycle that only destroyed nodes
(:func:`nodemanager.sim.skip_rules.settled_destroys`)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

import policy_matrix
from nodemanager.configuration.config import loads
from nodemanager.core import plan
from nodemanager.sim import baselines as B
from nodemanager.sim.replay import replay
from nodemanager.sim.skip_rules import Settles, no_spare, settles
from tests.core_world import node, settings, snap, worker
from tests.test_core_consolidate import COST, mixed
from tests.test_sim_skip import _figures, synthetic_pool


def test_no_spare_says_exactly_when_consolidation_relabels_no_node():
    """Random pools of busy nodes (0-8 of 8 cores free, some idle), random margins: no_spare
    over the busy nodes' free cores is True iff the core's plan relabels none ``underused``."""
    rng = random.Random(18)
    said = Counter()
    for case in range(300):
        nodes, workers, free = [], [], []
        for k in range(rng.randint(0, 9)):
            name = f"n{k}"
            nodes.append(node(name))
            if rng.random() < 0.15:
                workers.append(worker(name, "idle", cpus=8))
                continue
            busy = rng.randint(1, 8)
            workers.append(mixed(name, busy, rng.uniform(60, 36000)))
            if busy < 8:
                free.append(8 - busy)
        margin = rng.randint(0, 30)
        p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=margin), COST)
        relabelled = any(e.tuple.worker_state == "underused" for e in p.nodes)
        quiet = no_spare(sum(free), Counter(free), margin)
        assert quiet == (not relabelled), (case, free, margin)
        said[quiet] += 1
    assert said[True] > 50 and said[False] > 50, said


def test_no_spare_counts_the_smallest_free_node():
    # 7 + 2 free: the 2-core node would leave 7 >= 6 elsewhere, the 7-core one only 2
    assert not no_spare(9, Counter({7: 1, 2: 1}), 6)
    assert no_spare(9, Counter({7: 1, 2: 1}), 8)
    assert no_spare(0, Counter(), 0)


def _matrix(rules: str):
    """The shipped matrix with ``rules`` first (the first matching rule wins)."""
    text = rules + "\n" + open(policy_matrix.default_path()).read()
    return policy_matrix.parse(text.encode(), "<test>")


def test_settles_reads_the_matrix_and_stays_off_where_history_or_relabels_decide():
    base = loads("")
    core = base.core
    assert settles(_matrix(""), core) == Settles(True, True, core.idle_grace)
    # a matrix that drains young busy nodes, or idle ones still in their grace
    assert not settles(_matrix("busy | * | boot wait | * -> START_DRAIN"), core).busy
    assert not settles(_matrix("idle | * | boot exceeded | idle wait -> START_DRAIN"), core).idle_wait
    # break-even idle grace and consolidation (the cost profile), lifetimes: only a VM coming up
    off = Settles(False, False, core.idle_grace)
    assert settles(_matrix(""), loads("", profile="cost").core) == off
    assert settles(_matrix(""), replace(core, max_lifetime=3600.0)) == off
    od = B.default_size(8)
    from nodemanager.sim.spot import spot_size
    assert settles(_matrix(""), replace(core, sizes=(od, spot_size(od, 0.3, 12.0)))) is None


@pytest.fixture(scope="module")
def small_pool():
    """Six hours of jobs keeping about 60 8-core nodes busy."""
    return synthetic_pool(0.25, 11)


@pytest.mark.slow
@pytest.mark.parametrize("rules", [
    "",                                                          # both changes settle
    "busy | * | boot wait | * -> START_DRAIN",                   # a young node turning busy acts
    "idle | * | boot exceeded | idle wait -> START_DRAIN",       # a node turning idle acts at once
])
def test_busy_and_idle_changes_skipped_change_no_figure(small_pool, rules):
    """Skipping the cycles of busy/idle changes (where the matrix allows it) changes no figure
    against the replay that runs every cycle, under matrices that do and do not act on them."""
    jobs, bounds, s = small_pool
    policy = B.ours(s, _matrix(rules), "nodemanager")
    fast = replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
    slow = replay(jobs, policy, B.SimParams(), bounds, record_series=False, skip_cycles=False).figures
    assert fast.cycles < slow.cycles
    assert _figures(fast) == _figures(slow)


def test_busy_and_idle_changes_the_matrix_leaves_alone_run_no_cycle(small_pool, monkeypatch):
    """With the shipped matrix a node's turn from busy to idle (it wakes at its idle grace's end)
    or back runs no cycle: fewer than with the rule off, and the same figures."""
    import nodemanager.sim.replay_world as R

    jobs, bounds, s = small_pool
    on = replay(jobs, B.ours(s), B.SimParams(), bounds, record_series=False).figures
    monkeypatch.setattr(R, "settles", lambda matrix, core: None)
    off = replay(jobs, B.ours(s), B.SimParams(), bounds, record_series=False).figures
    assert on.cycles < 0.9 * off.cycles, (on.cycles, off.cycles)
    assert _figures(on) == _figures(off)


def test_a_cycle_counts_as_planning_nothing_after_destroys_only_when_nothing_else_waits():
    """settled_destroys: destroys that all went through, with nothing else planned, queued unmet,
    held back or frozen; any of those (or a failed destroy) keeps the next cycle."""
    from nodemanager.model import (Blocked, BootRequest, ItemKind, NodeExplanation, Outcome, Plan,
                                   PlanItem, Unmet)
    from nodemanager.sim.skip_rules import settled_destroys
    from policy_matrix import Action

    def entry(nid, action, matrix_action, blocked=None):
        return NodeExplanation(node_id=nid, name=nid, size="sim8", tuple=None, rule="", reason="",
                               matrix_action=matrix_action, action=action, blocked_by=blocked)

    gone = PlanItem(kind=ItemKind.DESTROY, node_id="a", node_name="a", reason="drained")
    ok = Outcome("destroy", "a", "ok", "destroyed", 0.0)
    quiet = Plan(now=0.0, items=(gone,), nodes=(entry("a", ItemKind.DESTROY, Action.START_SHUTDOWN),
                                                entry("b", None, Action.NONE)))
    assert settled_destroys(quiet, [ok])
    held = replace(quiet, nodes=quiet.nodes + (entry("c", None, Action.START_DRAIN, Blocked.BUDGET),))
    drain = PlanItem(kind=ItemKind.DRAIN, node_id="c", node_name="c", reason="idle")
    for louder, outcomes in [
            (held, [ok]),
            (replace(quiet, unmet=(Unmet(what="1 job(s) of 8 cpus, 0 MB", jobs=1, reason="max_nodes",
                                         text=""),)), [ok]),
            (replace(quiet, boots=(BootRequest(size="sim8", count=1, reason="demand"),)), [ok]),
            (replace(quiet, items=(gone, drain)), [ok, Outcome("drain", "c", "ok", "", 0.0)]),
            (quiet, [Outcome("destroy", "a", "failed", "cloud error", 0.0)]),
            (replace(quiet, items=()), [])]:
        assert not settled_destroys(louder, outcomes), louder
