"""A node an administrator drained is never touched, against the real parts: a
real slurmctld (``scontrol update State=DRAIN Reason="admin: ..."``), the real SLURM adapter,
libcloud's EC2 driver against moto_server, and the real Controller and Actuator on a hand-set
clock. Beside it, an idle node of ours is drained and destroyed in the same cycles, so the loop is
shown to act."""

from __future__ import annotations

import logging
import re
import time

import policy_matrix
import pytest

from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.model import Size
from nodemanager.scheduler.slurm import SlurmScheduler
from nodemanager.configuration.settings import CoreSettings, SchedulerSettings, Settings
from tests.fixtures.daemon import Time

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

SIZE = Size("small", cores=2, ram_mb=1000, price=0.1, instance_type="t3.small")
ADMIN = "admin: bad dimm, do not touch"
CYCLES = 8


def two_vms(slurm, ec2_cloud, **core):
    """The real Controller and Actuator on the real SLURM adapter and EC2 on moto, with VMs of
    ours paired with node5 and node6; ``core``: CoreSettings fields. -> (clock, controller, cloud,
    scheduler)"""
    clock = Time(time.time())            # moto and slurmctld stamp times with the real clock
    # the clock runs ahead of the real inputs' poll times: only the graces decide here
    core = {"boot_grace": 60.0, "idle_grace": 30.0, **core}
    settings = Settings(core=CoreSettings(sizes=(SIZE,), poll_stale_after=3600.0, node_stale_after=3600.0,
                                          **core))
    cloud = ec2_cloud(clock=clock)
    sched = SlurmScheduler.from_settings(SchedulerSettings("slurm", slurm.scheduler_options))
    ctl = Controller(settings, policy_matrix.load_default(),
                     Actuator(cloud, sched, settings, clock=clock), clock=clock)
    for name in ("node5", "node6"):
        vm = cloud.create_node(SIZE, name, {})
        slurm.set_node(name, f"Comment=instance-id={vm.id}")   # pairs SLURM node and VM
    return clock, ctl, cloud, sched


def _loop(slurm, ec2_cloud, reclaim_after: float = 0.0):
    clock, ctl, cloud, sched = two_vms(slurm, ec2_cloud, reclaim_foreign_after=reclaim_after)

    def cycles(n: int, step: float = 10.0) -> list:
        reports = []
        for _ in range(n):
            reports.append(ctl.cycle(cloud.list_nodes(), clock.now, sched.poll()))
            clock.advance(step)
        return reports

    def live() -> set[str]:
        return {n.name for n in cloud.list_nodes() if n.state in ("pending", "running")}

    return clock, cycles, live


@pytest.fixture
def comments(slurm):
    yield slurm
    for name in ("node5", "node6"):
        slurm.set_node(name, "Comment=")


def test_an_admin_drain_on_an_idle_node_is_never_destroyed(comments, ec2_cloud, caplog):
    slurm = comments
    caplog.set_level(logging.DEBUG, "nodemanager.decisions")
    slurm.set_node("node5", "State=DRAIN", f"Reason={ADMIN}")
    clock, cycles, live = _loop(slurm, ec2_cloud)
    clock.advance(120)                                     # past boot and idle grace
    reports = cycles(CYCLES)
    assert live() == {"node5"}                             # ours (node6) went, theirs stayed
    assert slurm.states()["node5"] == "drain"
    acted = [o for r in reports for o in r.outcomes if o.node == "node5" or "node5" in o.detail]
    assert acted == []
    why = next(e for e in reports[-1].plan.nodes if e.name == "node5")
    assert why.tuple.worker_state == "idle" and why.action is None
    assert _theirs(why.reason)
    # the INFO line names the block; the whole reason, the admin's words, follows at DEBUG
    assert any(r.levelno == logging.INFO and r.message.startswith("node node5 ")
               and "blocked by foreign_drain" in r.message for r in caplog.records)
    assert any(r.levelno == logging.DEBUG and r.message.startswith("node node5 ")
               and _theirs(r.message) for r in caplog.records)


def test_reclaim_foreign_after_lets_the_matrix_decide_once_their_drain_is_old(comments, ec2_cloud):
    slurm = comments
    slurm.set_node("node5", "State=DRAIN", f"Reason={ADMIN}")
    clock, cycles, live = _loop(slurm, ec2_cloud, reclaim_after=600.0)
    clock.advance(120)
    cycles(3)
    assert "node5" in live()                               # their drain is minutes old
    clock.advance(600)
    cycles(3)
    assert "node5" not in live()                           # past reclaim_foreign_after: destroyed


def _theirs(text: str) -> bool:
    """The words for the administrator's drain: whose, how long ago, their reason."""
    return re.search(rf"drained by someone else [^:]* ago: {re.escape(ADMIN)}", text) is not None
