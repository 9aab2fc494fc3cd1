"""A scheduler clock ahead of ours does not keep an idle VM forever, against the real parts: a real
slurmctld whose ``LastBusyTime`` is a day ahead of the controller's clock (our clock is set a day
behind the real one, which slurmctld stamps with), the real SLURM adapter, libcloud's EC2 driver
against moto_server, and the real Controller and Actuator. The idle node counts as idle from the
cycle it was first seen so: its idle grace ends, it is drained and destroyed; the skew is shown on
the page and in a metric."""

from __future__ import annotations

import time

import policy_matrix
import pytest

from nodemanager.configuration.settings import CoreSettings, SchedulerSettings, Settings
from nodemanager.console.metrics import Metrics
from nodemanager.console.page import render_html
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.model import Size
from nodemanager.scheduler.slurm import SlurmScheduler
from tests.fixtures.daemon import Time

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

SIZE = Size("small", cores=2, ram_mb=1000, price=0.1, instance_type="t3.small")
DAY = 86400.0


@pytest.fixture
def comments(slurm):
    yield slurm
    slurm.set_node("node6", "Comment=")


def test_an_idle_node_whose_last_busy_is_a_day_ahead_is_given_back_after_its_grace(comments, ec2_cloud):
    slurm = comments
    clock = Time(time.time() - DAY)          # slurmctld's (and moto's) clock is a day ahead of ours
    # the cloud's clock is a day ahead too: launch times are corrected, no freeze for it here
    settings = Settings(core=CoreSettings(sizes=(SIZE,), boot_grace=60.0, idle_grace=60.0, max_clock_skew=0.0,
                                          poll_stale_after=3600.0, node_stale_after=3600.0))
    cloud = ec2_cloud(clock=clock)
    sched = SlurmScheduler.from_settings(SchedulerSettings("slurm", slurm.scheduler_options), clock=clock)
    ctl = Controller(settings, policy_matrix.load_default(), Actuator(cloud, sched, settings, clock=clock),
                     clock=clock)
    vm = cloud.create_node(SIZE, "node6", {})
    slurm.set_node("node6", f"Comment=instance-id={vm.id}")
    reports = []
    for _ in range(16):                      # 160 s of our clock: boot grace, then idle grace, pass
        reports.append(ctl.cycle(cloud.list_nodes(), clock.now, sched.poll()))
        clock.advance(10.0)
    first = next(e for e in reports[0].plan.nodes if e.name == "node6")
    assert first.tuple.worker_state == "idle"
    destroyed = [o for r in reports for o in r.outcomes if o.kind == "destroy" and o.result == "ok"]
    assert [o.node for o in destroyed] == [vm.id]
    assert vm.id not in {n.id for n in cloud.list_nodes() if n.state in ("pending", "running")}
    seen = reports[1]
    ahead = seen.snapshot.scheduler_clock_ahead
    assert ahead is not None and DAY - 120 < ahead < DAY + 120
    doc = status_document(StatusView(report=seen, last_cycle_at=clock.now), None, clock.now)
    assert "ahead of ours: idle nodes reporting an idle-since in the future count from when first seen" \
        in render_html(doc)
    metrics = Metrics(sizes=(SIZE,), clock=clock)
    metrics.observe(seen)
    assert metrics.registry.get_sample_value("nodemanager_scheduler_clock_ahead_seconds") == ahead
