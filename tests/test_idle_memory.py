"""Break-even idle timing in the controller: what it remembers from consecutive cycles (boot+join
times, idle periods re-used or given back), each idle node's grace in its why, and a replay where
idle nodes are never re-used."""

import logging
import math
from dataclasses import replace

import policy_matrix

from nodemanager.configuration.config import loads
from nodemanager.cycle.controller import Controller
from nodemanager.core import plan
from nodemanager.model import CloudNode, Worker
from nodemanager.scheduler import SchedulerPoll, classified
from nodemanager.configuration.settings import Settings
from nodemanager.sim import baselines as B
from nodemanager.sim.figures import lower_bounds
from nodemanager.sim.replay import replay
from nodemanager.sim.swf import SwfJob
from policy_matrix.vocabulary import IDLE_EXCEEDED, IDLE_WAIT
from tests import core_world as W

MATRIX = policy_matrix.load_default()
L = W.NOW


def _node(nid: str, launched: float) -> CloudNode:
    return CloudNode(id=nid, name=nid, size="small", launched_at=launched)


def _worker(nid: str, state: str, since: float, now: float, launched: float) -> Worker:
    busy = state == "alloc"
    return classified(Worker(name=nid, scheduler="slurm", state=state, cloud_id=nid, last_heard=now,
                             state_since=since, registered_at=launched + 60, cpus=4, ram_mb=15200,
                             cpus_busy=4 if busy else 0, running_jobs=1 if busy else 0))


class Cycles:
    """A dry-run controller in break-even mode fed hand-made listings and polls."""

    def __init__(self, **core):
        self.now = L
        core = W.settings(idle_grace_mode="break-even", **core)
        self.ctl = Controller(Settings(core=core), MATRIX, None, clock=lambda: self.now, dry_run=True)

    def at(self, t, nodes=(), workers=()):
        self.now = t
        poll = SchedulerPoll(workers=tuple(workers), demand=(), polled_at=t)
        return self.ctl.prepare(list(nodes), t, poll)[0]


def test_boot_join_times_and_idle_periods_are_remembered_from_consecutive_cycles():
    c = Cycles()
    a, b, d = _node("a", L - 10), _node("b", L + 395), _node("c", L + 895)
    c.at(L, [a])                                                     # booting, no worker
    c.at(L + 110, [a], [_worker("a", "idle", L + 105, L + 110, a.launched_at)])  # joined: 120 s
    c.at(L + 150, [a], [_worker("a", "alloc", L + 140, L + 150, a.launched_at)])  # re-used after 40 s
    c.at(L + 200, [a], [_worker("a", "idle", L + 195, L + 200, a.launched_at)])
    # a leaves the listing and the poll (given back); kept a while by the input memory
    for t in (L + 260, L + 320, L + 390):
        c.at(t)
    # a boot of the size 195 s after a's idle period began: a could have run its job
    c.at(L + 400, [b])
    c.at(L + 520, [b], [_worker("b", "idle", L + 515, L + 520, b.launched_at)])  # joined: 125 s
    for t in (L + 600, L + 660, L + 730):
        c.at(t)
    # the next boot comes after idle_grace (300 s) of b's idle period: b was never re-used
    c.at(L + 900, [d])
    memory = c.ctl.memories.idle
    assert memory.joins("small") == [120.0, 125.0]
    assert memory.periods("small") == [40.0, 195.0, math.inf]


def test_a_restart_or_a_new_leader_starts_from_the_configured_grace():
    c = Cycles()
    a = _node("a", L - 10)
    c.at(L, [a])
    c.at(L + 110, [a], [_worker("a", "idle", L + 105, L + 110, a.launched_at)])
    assert c.ctl.memories.idle.joins("small") == [120.0]
    c.ctl.forget_inputs()
    assert c.ctl.memories.idle.joins("small") == []


def _idle_history(c: Cycles, periods: int) -> None:
    """``periods`` nodes of size small, each booted, joined after 120 s, idle, given back and
    never re-used (no boot within idle_grace)."""
    t = L
    for i in range(periods):
        n = _node(f"n{i}", t)
        c.at(t + 10, [n])
        c.at(t + 120, [n], [_worker(n.id, "idle", t + 115, t + 120, t)])
        for dt in (180, 240, 310):
            c.at(t + dt)
        t += 1000


def test_each_idle_node_says_its_break_even_grace_and_the_log_says_when_it_changes(caplog):
    caplog.set_level(logging.INFO, "nodemanager.decisions")
    c = Cycles()
    _idle_history(c, 10)
    t = c.now + 1000
    n = _node("x", t - 600)
    report = c.at(t, [n], [_worker("x", "idle", t - 130, t, n.launched_at)])
    e = next(e for e in report.plan.nodes if e.node_id == "x")
    assert e.tuple.idle_grace == IDLE_EXCEEDED   # idle 130 s: past the 60 s floor, within idle_grace 300 s
    assert ("idle for 130s (idle grace 60s (the floor): break-even: boot+join 120s, 0 % of the last "
            "10 idle periods re-used within it)") in e.reason
    assert "size small: idle grace 60s (the floor): break-even" in caplog.text and "(was 300s)" in caplog.text


def test_a_snapshot_without_break_even_graces_plans_with_idle_grace():
    nodes, workers = W.pool({"a": "idle"}, idle_for=70.0)
    fixed = plan(W.snap(nodes, workers), W.settings(), MATRIX)
    assert fixed.nodes[0].tuple.idle_grace == IDLE_WAIT and "(idle_grace 300s)" in fixed.nodes[0].reason
    graces = {"small": (60.0, " (idle grace 60s (the floor): break-even: ...)")}
    short = plan(W.snap(nodes, workers, idle_graces=graces), W.settings(), MATRIX)
    assert short.nodes[0].tuple.idle_grace == IDLE_EXCEEDED
    assert "(idle grace 60s (the floor): break-even: ...)" in short.nodes[0].reason


def test_a_replay_whose_idle_nodes_are_never_re_used_gives_them_back_sooner():
    """One 8-core job every 40 minutes: each boots a node that idles after its job and never runs
    another before the next boot is due. Break-even learns that and gives nodes back after one
    boot+join time (120 s) instead of idle_grace's 600 s: fewer paid node-hours, no job waits
    longer."""
    jobs = [SwfJob(id=i + 1, submit=i * 2400.0, runtime=600.0, cores=8) for i in range(30)]
    bounds = lower_bounds(jobs, 8)
    base = loads("")
    core = replace(base.core, sizes=(B.default_size(8),), max_nodes=4, idle_grace=600.0)
    fixed = replay(jobs, B.ours(replace(base, core=core)), B.SimParams(), bounds, record_series=False).figures
    core = replace(core, idle_grace_mode="break-even")
    breakeven = replay(jobs, B.ours(replace(base, core=core)), B.SimParams(), bounds,
                       record_series=False).figures
    assert fixed.jobs_completed == breakeven.jobs_completed == 30
    assert fixed.jobs_killed == breakeven.jobs_killed == 0
    assert fixed.boots == breakeven.boots == 30
    # the first 10 idle periods teach it; the other 20 nodes each pay about 480 s less
    assert breakeven.paid_node_hours < fixed.paid_node_hours - 20 * 450 / 3600
    assert breakeven.wait_max == fixed.wait_max


def test_skipping_quiet_cycles_changes_no_break_even_figure():
    """The memory takes in events only at the cycles that see them, so a replay that skips quiet
    cycles learns the same graces as one that runs every cycle."""
    jobs = [SwfJob(id=i + 1, submit=i * 700.0 + (i % 3) * 150.0, runtime=300.0 + 40 * (i % 5), cores=8)
            for i in range(40)]
    bounds = lower_bounds(jobs, 8)
    base = loads("", "<test>", profile="cost")
    core = replace(base.core, sizes=(B.default_size(8),), max_nodes=4)
    policy = B.ours(replace(base, core=core), policy_matrix.load(base.matrix_file), "nodemanager-cost")
    fast = replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
    slow = replay(jobs, policy, B.SimParams(), bounds, record_series=False, skip_cycles=False).figures
    fixed = replace(core, idle_grace_mode="fixed")
    fixed_run = replay(jobs, replace(policy, settings=replace(policy.settings, core=fixed)), B.SimParams(),
                       bounds, record_series=False).figures
    assert fast.paid_node_hours < fixed_run.paid_node_hours   # the grace did change on the way
    own = {"wall_seconds", "cycles", "cycles_skipped"}
    assert fast.cycles < slow.cycles
    assert {k: v for k, v in fast.as_dict().items() if k not in own} == \
        {k: v for k, v in slow.as_dict().items() if k not in own}
