"""What a large pool costs per node between cycles and during one: shared texts, no per-node copies
in the decision log, no cyclic garbage collection while a cycle builds its records."""

import gc

import policy_matrix

from nodemanager.cycle.controller import Controller
from nodemanager.core import plan
from nodemanager.console.decision_log import DecisionLog
from nodemanager.scheduler.port import SchedulerPoll
from nodemanager.configuration.settings import Settings
from tests.core_world import NOW, pool, settings, snap

MATRIX = policy_matrix.load_default()


def busy_pool(n=20):
    return pool({f"b{i:02d}": "alloc" for i in range(n)})


def test_busy_nodes_no_reason_claims_share_one_reason_text():
    nodes, workers = busy_pool()
    p = plan(snap(nodes, workers), settings(), MATRIX)
    reasons = [e.reason for e in p.nodes]
    assert reasons[0].startswith("matrix says no action: ")
    assert set(reasons) == {reasons[0]}
    # one string kept for all of them, not one per node (50,000 nodes: ~9 MB a plan)
    assert len({id(r) for r in reasons}) == 1


def test_the_decision_log_keeps_the_plans_own_explanations_not_a_copy_per_node():
    nodes, workers = busy_pool()
    log = DecisionLog()
    for _ in range(2):  # the second plan's records replace the first's
        p = plan(snap(nodes, workers), settings(), MATRIX)
        log.decisions(p, False, None, None)
        assert all(log.seen[e.node_id] is e for e in p.nodes)


def test_no_cyclic_collection_runs_during_a_cycle_and_it_resumes_after():
    nodes, workers = busy_pool()
    enabled_while_planning = []

    def planner(*args, **kw):
        enabled_while_planning.append(gc.isenabled())
        return plan(*args, **kw)

    ctl = Controller(Settings(), MATRIX, None, clock=lambda: NOW, dry_run=True, planner=planner)
    assert gc.isenabled()
    report, tasks = ctl.prepare(nodes, NOW, SchedulerPoll(tuple(workers), (), NOW))
    assert enabled_while_planning == [False]
    assert gc.isenabled()
    assert len(report.plan.nodes) == len(nodes) and tasks == []


def test_a_collector_switched_off_by_someone_else_stays_off():
    nodes, workers = busy_pool(2)
    ctl = Controller(Settings(), MATRIX, None, clock=lambda: NOW, dry_run=True)
    gc.disable()
    try:
        ctl.prepare(nodes, NOW, SchedulerPoll(tuple(workers), (), NOW))
        assert not gc.isenabled()
    finally:
        gc.enable()
