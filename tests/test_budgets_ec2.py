"""A ``[Budget NAME]`` in the daemon: the real Controller and Actuator over libcloud's EC2 driver on
moto (through the proxy), a scripted scheduler, a virtual clock. Four idle nodes are given back
one at a time under a one-node budget (all at once without it), and the status page and metrics
name the budget that holds the others back."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nodemanager.configuration.settings import DisruptionBudget
from nodemanager.console.limits_page import limits_html
from nodemanager.console.metrics import Metrics
from nodemanager.console.page import render_html
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.configuration.cron import parse_schedule
from nodemanager.model import Demand
from tests.test_faults_ec2 import SIZE, Ec2Loop

pytestmark = pytest.mark.ec2


def _give_back(ec2_cloud, ec2_proxy, budgets):
    loop = Ec2Loop(ec2_cloud, ec2_proxy, max_nodes=4, job_seconds=30.0)
    loop.settings = replace(loop.settings, core=replace(loop.settings.core, disruption_budgets=budgets))
    loop.start(ec2_cloud)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=4)]
    going = []
    for _ in range(100):                                  # the jobs end, idle_grace 60 s passes
        report = loop.cycle()
        going.append(sum(1 for e in report.plan.nodes if e.our_drain_since is not None or e.action is not None))
        loop.time.advance(5.0)
    assert len(loop.outcomes("boot", "ok")) == 4
    return loop, going


def test_a_one_node_budget_gives_idle_nodes_back_one_at_a_time(ec2_cloud, ec2_proxy):
    always = parse_schedule("0 0 * * *", "1d", "UTC")    # a window that never closes
    loop, going = _give_back(ec2_cloud, ec2_proxy, (DisruptionBudget("one-at-a-time", nodes=1, schedule=always),))
    assert max(going) == 1
    assert loop.live() == [] and ec2_proxy.count("TerminateInstances") == 4
    held = [r for r in loop.reports if any(b.held for b in r.plan.budgets)]
    assert held, "the budget never held a node back"
    report = held[0]
    [node] = [e for e in report.plan.nodes if e.blocked_by == "budget"][:1]
    assert "held back by budget one-at-a-time (matrix_drain: 1 node(s) at once allowed, 1 going)" in node.reason
    doc = status_document(StatusView(report=report, last_cycle_at=loop.time.now), None, loop.time.now)
    [shown] = doc["budgets"]
    assert (shown["name"], shown["active"], shown["allowed"], shown["held"]) == ("one-at-a-time", True, 1, 3)
    assert ("budget one-at-a-time: 1 node(s) at once for every budgeted reason, during &#x27;0 0 * * *&#x27; "
            "for 1d (UTC): active: 1 at once, 3 node(s) held back") in limits_html(doc)
    assert "held back by budget one-at-a-time" in render_html(doc)
    metrics = Metrics(sizes=(SIZE,), clock=loop.time)
    metrics.observe(report)
    assert metrics.registry.get_sample_value("nodemanager_budget_held_nodes", {"budget": "one-at-a-time"}) == 3
    assert metrics.registry.get_sample_value("nodemanager_budget_allowed_nodes", {"budget": "one-at-a-time"}) == 1
    assert metrics.registry.get_sample_value("nodemanager_budget_active", {"budget": "one-at-a-time"}) == 1


def test_without_a_budget_the_idle_nodes_go_together(ec2_cloud, ec2_proxy):
    loop, going = _give_back(ec2_cloud, ec2_proxy, ())
    assert max(going) == 4 and loop.live() == []
