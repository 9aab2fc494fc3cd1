"""Capacity circuit breakers in the daemon: the real Controller and Actuator over libcloud's EC2
driver on moto, through the fault proxy (a real ``InsufficientInstanceCapacity`` reply for one
instance type), a scripted scheduler and a virtual clock. A capacity error opens the size's
breaker: demand boots the next size meanwhile; when the cooldown ends one probe boot decides; a
second error doubles the cooldown; a created VM closes it. Status, metric and one log line per
change."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from nodemanager.configuration.settings import CloudSettings
from nodemanager.console.limits_page import limits_html
from nodemanager.console.metrics import Metrics
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.model import Demand, Size
from tests.test_faults_ec2 import Ec2Loop

pytestmark = pytest.mark.ec2

SMALL = Size("small", cores=2, ram_mb=4096, price=0.1, instance_type="t3.small")
LARGE = Size("large", cores=2, ram_mb=8192, price=0.2, instance_type="t3.large")


@pytest.fixture
def loop(ec2_cloud, ec2_proxy):
    loop = Ec2Loop(ec2_cloud, ec2_proxy, max_nodes=10, job_seconds=100000.0)
    s = loop.settings
    loop.settings = replace(s, core=replace(s.core, sizes=(SMALL, LARGE)),
                            cloud=replace(s.cloud, capacity_cooldown=300.0, capacity_max_cooldown=1800.0))
    loop.start(ec2_cloud)
    return loop


def changes(caplog, words):
    """The breaker's own log lines (the boot's outcome has its line too) containing ``words``."""
    return [r.getMessage() for r in caplog.records if r.name == "nodemanager.actuate" and words in r.getMessage()]


def booted(loop, since=0):
    return [o.size for r in loop.reports[since:] for o in r.outcomes if o.kind == "boot" and o.result == "ok"]


def test_a_capacity_error_opens_the_breaker_falls_back_and_a_probe_decides(loop, ec2_proxy, caplog):
    caplog.set_level(logging.INFO, logger="nodemanager.actuate")
    ec2_proxy.fail("RunInstances", 500, "InsufficientInstanceCapacity", times=2, instance_type="t3.small")
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    # the small size failed once; the job went to a large node
    assert booted(loop) == ["large"]
    report = loop.reports[-1]
    assert list(report.snapshot.open_breakers) == ["small"]
    assert "capacity breaker open: 1 capacity error(s) in a row" in report.snapshot.open_breakers["small"]
    doc = status_document(StatusView(report=report, last_cycle_at=loop.time.now), None, loop.time.now)
    assert "size small: capacity breaker open: 1 capacity error(s)" in limits_html(doc)
    metrics = Metrics(sizes=(SMALL, LARGE), clock=loop.time)
    metrics.observe(report)
    assert metrics.registry.get_sample_value("nodemanager_capacity_breaker", {"size": "small", "state": "open"}) == 1
    opened = changes(caplog, "capacity breaker open")
    assert len(opened) == 1 and "next probe boot in 5m 00s" in opened[0]

    # the cooldown ends: half-open, two jobs come: one probe small boot (it fails), the other large
    loop.time.advance(300.0)
    n = len(loop.reports)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=2)]
    loop.run(3)
    assert sorted(booted(loop, n)) == ["large", "large"]
    assert [p["InstanceType"] for p in ec2_proxy.params["RunInstances"]].count(["t3.small"]) == 2
    opened = changes(caplog, "capacity breaker open")
    assert len(opened) == 2 and "2 capacity error(s) in a row" in opened[1] and "next probe boot in 10m" in opened[1]
    assert len(changes(caplog, "half-open")) == 1

    # 10 minutes on the probe succeeds: the breaker closes and small boots again
    loop.time.advance(600.0)
    n = len(loop.reports)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=2)]
    loop.run(4)
    assert "small" in booted(loop, n)
    assert not loop.reports[-1].snapshot.open_breakers and not loop.reports[-1].snapshot.probe_sizes
    assert len(changes(caplog, "capacity breaker closed")) == 1


def test_without_a_cooldown_a_capacity_error_holds_the_size_off_for_quota_backoff(ec2_cloud, ec2_proxy):
    loop = Ec2Loop(ec2_cloud, ec2_proxy, max_nodes=10, job_seconds=100000.0)
    loop.settings = replace(loop.settings, core=replace(loop.settings.core, sizes=(SMALL, LARGE)))
    loop.start(ec2_cloud)
    assert loop.settings.cloud.capacity_cooldown == CloudSettings().capacity_cooldown == 0
    ec2_proxy.fail("RunInstances", 500, "InsufficientInstanceCapacity", times=1, instance_type="t3.small")
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert booted(loop) == ["large"] and not loop.reports[-1].snapshot.open_breakers
    assert loop.reports[-1].snapshot.blocked_sizes == {"small"}
