"""Budgets over time survive a restart (and so an HA takeover: both heads list the same cloud): the
real Controller and Actuator over libcloud's EC2 driver on moto, restarted several times within the
hour (a new adapter, actuator and controller each time: nothing kept in memory), destroy at most
``max_destroys_per_hour`` and boot at most ``max_boots_per_hour``."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from nodemanager.console.status_document import StatusView, status_document
from nodemanager.model import Demand
from tests.test_faults_ec2 import Ec2Loop

pytestmark = pytest.mark.ec2


def _loop(ec2_cloud, ec2_proxy, **core):
    loop = Ec2Loop(ec2_cloud, ec2_proxy, max_nodes=4, job_seconds=30.0)
    loop.settings = replace(loop.settings, core=replace(loop.settings.core, **core))
    cluster = f"rate-{uuid.uuid4().hex[:8]}"
    loop.start(ec2_cloud, cluster)
    return loop, cluster


def test_restarts_destroy_at_most_max_destroys_per_hour(ec2_cloud, ec2_proxy):
    loop, cluster = _loop(ec2_cloud, ec2_proxy, max_destroys_per_hour=1)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=3)]
    loop.run(40)                                  # boots, the jobs end, idle_grace passes: one goes
    assert len(loop.live()) == 2
    for _ in range(3):                            # three restarts, 100 s apart
        loop.start(ec2_cloud, cluster)
        loop.run(20)
    assert ec2_proxy.count("TerminateInstances") == 1 and len(loop.live()) == 2
    report = loop.reports[-1]
    held = [e for e in report.plan.nodes if e.blocked_by == "budget"]
    assert held and all("max_destroys_per_hour 1 reached (1 in the last hour)" in e.reason for e in held)
    doc = status_document(StatusView(report=report, last_cycle_at=loop.time.now, core=loop.settings.core),
                          None, loop.time.now)
    [cap] = [c for c in doc["summary"]["caps"] if c["name"] == "max_destroys_per_hour"]
    assert (cap["used"], cap["limit"], cap["binds"]) == (1, 1, True)
    loop.time.advance(3600.0)                     # an hour later the next one may go
    for _ in range(3):
        loop.sched.workers = {k: replace(w, last_heard=loop.time.now) for k, w in loop.sched.workers.items()}
        loop.run(1)
    assert ec2_proxy.count("TerminateInstances") == 2


def test_restarts_boot_at_most_max_boots_per_hour(ec2_cloud, ec2_proxy):
    loop, cluster = _loop(ec2_cloud, ec2_proxy, max_boots_per_hour=1)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=3)]
    loop.run(4)
    assert len(loop.live()) == 1
    for _ in range(3):
        loop.start(ec2_cloud, cluster)
        loop.run(4)
    assert ec2_proxy.count("RunInstances") == 1 and len(loop.live()) == 1
    [unmet] = loop.reports[-1].plan.unmet
    assert unmet.reason == "max_boots_per_hour" and "max_boots_per_hour 1 reached (1 booted in the last hour)" in unmet.text
