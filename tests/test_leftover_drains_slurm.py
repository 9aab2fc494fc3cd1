"""Drains of ours left behind by a destroy cut short between the cloud's TerminateInstances and
the scheduler's "node destroyed" step, against the real parts: a real slurmctld and slurmd, the
real SLURM adapter, libcloud's EC2 driver on moto, the real Controller and Actuator.

A name we drained whose VM no longer exists is given back to the pool (the state the adapter's
``node_destroyed`` leaves: ``down``, reason ``nodemanager: destroyed``, no drain flag), so the VM
booted later under it joins idle; a VM that joins already drained by us for an older VM of its
name has that drain cancelled, never finished by a destroy."""

from __future__ import annotations

import time

import policy_matrix
import pytest

from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.model import Size
from nodemanager.scheduler.slurm import DESTROYED_REASON, SlurmScheduler
from nodemanager.scheduler.slurm_json import drain_reason
from nodemanager.configuration.settings import CoreSettings, SchedulerSettings, Settings
from tests.fixtures.daemon import Time

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

SIZE = Size("small", cores=2, ram_mb=1000, price=0.1, instance_type="t3.small")
LEFT = ("node2", "node3", "node4")


class Loop:
    def __init__(self, slurm, ec2_cloud, ahead: float = 0.0) -> None:
        self.slurm = slurm
        self.clock = Time(time.time() + ahead)   # moto and slurmctld stamp times with the real clock
        settings = Settings(core=CoreSettings(sizes=(SIZE,), boot_grace=60.0, idle_grace=3600.0,
                                              poll_stale_after=3600.0, node_stale_after=3600.0))
        self.cloud = ec2_cloud(clock=self.clock)
        self.sched = SlurmScheduler.from_settings(SchedulerSettings("slurm", slurm.scheduler_options))
        self.ctl = Controller(settings, policy_matrix.load_default(),
                              Actuator(self.cloud, self.sched, settings, clock=self.clock), clock=self.clock)
        self.reports: list = []

    def boot(self, name: str):
        """A VM of this name, its slurmd started and advertising its instance id."""
        vm = self.cloud.create_node(SIZE, name, {})
        self.slurm.start_slurmd(name)
        self.slurm.set_node(name, f"Comment=instance-id={vm.id}")
        return vm

    def cycles(self, n: int, step: float = 10.0) -> None:
        for _ in range(n):
            self.reports.append(self.ctl.cycle(self.cloud.list_nodes(), self.clock.now, self.sched.poll()))
            self.clock.advance(step)

    def live(self) -> set[str]:
        return {n.name for n in self.cloud.list_nodes() if n.state in ("pending", "running")}

    def outcomes(self, kind: str) -> list:
        return [o for r in self.reports for o in r.outcomes if o.kind == kind]


@pytest.fixture
def cluster(slurm):
    yield slurm
    for name in ("node2", "node3", "node4", "node5"):
        slurm.set_node(name, "Comment=")


def _leftover_drains(slurm) -> None:
    """What a kill between TerminateInstances and "node destroyed" leaves: our drains on names
    whose VMs are gone (their slurmd stopped)."""
    for name in LEFT:
        slurm.set_node(name, "State=DRAIN", f"Reason={drain_reason('idle for 20m', 'c0ffee01')}")
        slurm.stop_slurmd(name)
    for name in LEFT:
        slurm.wait_state(name, "drain*", timeout=60)      # slurmctld has seen the VM go


def test_names_drained_for_vms_that_no_longer_exist_are_given_back_and_a_new_vm_joins_idle(cluster, ec2_cloud):
    slurm = cluster
    _leftover_drains(slurm)
    loop = Loop(slurm, ec2_cloud)
    loop.cycles(2)                                         # the first cycles of a new process
    states = slurm.states()
    assert {name: states[name] for name in LEFT} == {name: "down*" for name in LEFT}
    reasons = set(slurm.run("sinfo", "-h", "-N", "-o", "%N|%E").stdout.splitlines())
    assert sorted(r for r in reasons if r.split("|")[0] in LEFT) == sorted(
        f"{name}|{DESTROYED_REASON}" for name in LEFT)
    given = [o for o in loop.outcomes("destroy") if o.result == "ok"]
    assert sorted(o.node for o in given) == sorted(f"no VM: {name}" for name in LEFT)
    assert loop.live() == set()                            # nothing to destroy: no VM was touched
    # a VM booted later under one of the names joins idle and is kept
    vm = loop.boot("node3")
    slurm.wait_state("node3", "idle", timeout=30)
    loop.clock.advance(120)                                # past boot grace, within idle grace
    loop.cycles(3)
    assert loop.live() == {"node3"} and slurm.states()["node3"] == "idle"
    e = next(e for e in loop.reports[-1].plan.nodes if e.node_id == vm.id)
    assert e.tuple.worker_state == "idle" and e.action is None


def test_a_vm_that_joins_drained_by_us_for_an_older_vm_has_the_drain_cancelled(cluster, ec2_proxy, ec2_cloud):
    """The names' VMs are booted before the leftovers are seen: the drain is older than the VM
    (the cloud's launch times run ten minutes after the drain here), so it is cancelled, and the
    node is kept idle rather than destroyed as "drained"."""
    slurm = cluster
    _leftover_drains(slurm)
    ec2_proxy.date_offset = 600.0
    loop = Loop(slurm, ec2_cloud, ahead=600.0)
    vm = loop.boot("node3")
    slurm.wait_state("node3", "drain", timeout=30)         # it joins drained
    loop.clock.advance(120)                                # past boot grace
    loop.cycles(3)                                         # SLURM shows it idle* until its next ping
    assert loop.live() == {"node3"}
    slurm.wait_state("node3", "idle", timeout=30)
    loop.cycles(2)
    assert loop.live() == {"node3"}
    e = next(e for e in loop.reports[-1].plan.nodes if e.node_id == vm.id)
    assert e.tuple.worker_state == "idle" and e.action is None
    cancels = [o for o in loop.outcomes("cancel_drain") if o.node == vm.id]
    assert [o.result for o in cancels] == ["ok"] and "older VM" in cancels[0].detail
