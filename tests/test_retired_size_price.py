"""VMs of a size no longer configured still count against ``max_total_price``: each VM carries its
price from its boot (a tag), and a VM without the tag counts at its size's last configured price.
Through ``nodemanager plan`` on a snapshot, and the real Controller and Actuator over libcloud's EC2
driver on moto with a reload (SIGHUP) that removes the size its VMs run."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from nodemanager.cli import main
from nodemanager.console.metrics import Metrics
from nodemanager.console.page import render_html
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.model import Demand, Size
TAG_PRICE = "nodemanager-price"   # the tag a VM carries its booted price in

NOW = 1767225600

CONFIG = """[Daemon]
max_nodes = 40
max_total_price = 1

[Size small]
cores = 4
ram_mb = 16000
price = 0.1
"""


def _plan(tmp_path, capsys, nodes, **extra):
    (tmp_path / "nm.ini").write_text(CONFIG)
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": NOW, "polled_at": {"cloud": NOW - 10, "scheduler": NOW - 10},
        "cloud_nodes": nodes, "demand": [{"cpus": 4, "ram_mb": 1000, "count": 20}], **extra}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config",
                 str(tmp_path / "nm.ini"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _retired(tags=None):
    return {"id": "i-old", "name": "nm-big-1", "size": "big", "launched_at": NOW - 600,
            "tags": tags or {}}


def test_plan_counts_a_vm_of_a_removed_size_at_its_tagged_price(tmp_path, capsys):
    # the big VM costs 0.8/h of the 1/h cap: two small nodes fit, not ten
    out = _plan(tmp_path, capsys, [_retired({TAG_PRICE: "0.8"})])
    assert [(b["size"], b["count"]) for b in out["boots"]] == [("small", 2)]
    [unmet] = [u for u in out["unmet"] if u["reason"] == "max_total_price"]
    assert "(1/h in use, 0.8/h of it by 1 VM(s) of sizes no longer configured)" in unmet["text"]


def test_plan_counts_an_untagged_vm_at_its_sizes_last_known_price(tmp_path, capsys):
    out = _plan(tmp_path, capsys, [_retired()], known_prices={"big": 0.5})
    assert [(b["size"], b["count"]) for b in out["boots"]] == [("small", 5)]


SMALL = Size(name="small", cores=2, ram_mb=4096, price=0.1, instance_type="t3.medium")
BIG = Size(name="big", cores=2, ram_mb=4096, price=0.15, instance_type="t3.large")


@pytest.mark.ec2
def test_daemon_after_a_reload_that_removes_a_size_boots_no_more_than_the_cap(ec2_cloud, ec2_proxy):
    from tests.test_faults_ec2 import Ec2Loop
    loop = Ec2Loop(ec2_cloud, ec2_proxy, max_nodes=10, job_seconds=10000.0)
    loop.settings = replace(loop.settings, core=replace(loop.settings.core, sizes=(SMALL, BIG),
                                                        max_total_price=0.25))
    cluster = f"retired-{uuid.uuid4().hex[:8]}"
    loop.start(ec2_cloud, cluster)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1, size="big")]
    loop.run(3)
    [big] = loop.live()
    assert big.tags.get(TAG_PRICE) == "0.15"
    # SIGHUP: [Size big] removed while its VM runs; more jobs queue for the small size
    loop.settings = replace(loop.settings, core=replace(loop.settings.core, sizes=(SMALL,)))
    loop.ctl.update_settings(loop.settings)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=5)]
    loop.run(6)
    live = loop.live()
    assert sorted(n.size for n in live) == ["big", "small"]   # 0.15 + 0.1: a second small would pass 0.25
    report = loop.reports[-1]
    doc = status_document(StatusView(report=report, last_cycle_at=loop.time.now, core=loop.settings.core),
                          None, loop.time.now)
    [cap] = [c for c in doc["summary"]["caps"] if c["name"] == "max_total_price"]
    assert (cap["used"], cap["limit"], cap["binds"]) == (0.25, 0.25, True)
    metrics = Metrics(sizes=(SMALL,), clock=loop.time)
    metrics.observe(report)
    assert metrics.registry.get_sample_value("nodemanager_estimated_spend_per_hour", {"size": "big"}) == 0.15
    page = render_html(doc)
    assert f"{big.name}: size big no longer configured, counted at 0.15/h (its price tagged at boot)" in page
    # a restart with the new settings only: the tag still prices the VM
    loop.start(ec2_cloud, cluster)
    loop.run(4)
    assert sorted(n.size for n in loop.live()) == ["big", "small"]

