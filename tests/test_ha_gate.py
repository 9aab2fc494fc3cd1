"""The HA gate against real parts: a leader lease on the test etcd, libcloud's EC2 driver against
moto_server (through the counting proxy), the simulated pool, and the admin state kept in etcd.
Clocks are injected: the lease's deadline passes when the test says so."""

from __future__ import annotations

import re

import pytest

from nodemanager.console.admin import AdminRefused, AdminState
from nodemanager.cloud.port import TAG_FENCE, TAG_REQUEST, CloudError
from nodemanager.ha.etcd import EtcdClient
from nodemanager.ha.gate import NOT_LEADER
from nodemanager.ha.wiring import HighAvailability
from nodemanager.model import Size
from nodemanager.scheduler.port import DrainSchedule, SchedulerError
from nodemanager.configuration.settings import HASettings
from nodemanager.sim.world import SimWorld
from tests.fixtures.daemon import Time, sim_settings

pytestmark = pytest.mark.ec2

SMALL = Size("small", cores=2, ram_mb=4096, price=0.1, instance_type="t3.small")
TTL, MARGIN = 2.0, 0.5


def head(url: str, me: str, clock: Time, wall: Time | None = None) -> HighAvailability:
    ha = HASettings(endpoints=(url,), lease_ttl=TTL, stop_margin=MARGIN, timeout=1.0,
                    election_key="/nodemanager/g/leader", admin_key="/nodemanager/g/admin")
    return HighAvailability(ha, me=me, clock=clock, wall=wall or (lambda: 1.7e9))


def test_every_cloud_mutation_carries_the_fence_and_stops_at_the_deadline(etcd, ec2_cloud, ec2_proxy) -> None:
    clock = Time()
    ha = head(etcd.url, "head1:1", clock)
    ha.lease.step()
    cloud, _ = ha.fence_ports(ec2_cloud(), SimWorld(sim_settings(), clock).scheduler)
    fence = str(ha.lease.fence)
    node = cloud.create_node(SMALL, "g-small-1", {TAG_REQUEST: "r1"})
    listed = {n.id: n for n in cloud.list_nodes()}
    assert listed[node.id].tags[TAG_FENCE] == fence
    # a node without our fence (booted by an earlier leader) is signed before it is destroyed
    cloud._inner.set_tags(listed[node.id], {TAG_FENCE: "1"})
    stale = {n.id: n for n in cloud.list_nodes()}[node.id]
    cloud.destroy_node(stale)
    assert ec2_proxy.actions[-2:] == ["CreateTags", "TerminateInstances"]
    clock.advance(TTL - MARGIN)          # no keepalive since the election: the deadline passed
    runs = ec2_proxy.count("RunInstances")
    with pytest.raises(CloudError, match=re.escape(NOT_LEADER)):
        cloud.create_node(SMALL, "g-small-2", {TAG_REQUEST: "r2"})
    with pytest.raises(CloudError, match=re.escape(NOT_LEADER)):
        cloud.set_tags(listed[node.id], {"x": "y"})
    assert ec2_proxy.count("RunInstances") == runs     # nothing was sent


def test_a_standby_drains_nothing_in_the_pool(etcd) -> None:
    clock = Time()
    leader, standby = head(etcd.url, "head1:1", clock), head(etcd.url, "head2:2", clock)
    leader.lease.step()
    standby.lease.step()
    world = SimWorld(sim_settings(), clock)
    _, scheduler = standby.fence_ports(world.cloud, world.scheduler)
    from nodemanager.model import Worker
    worker = Worker(name="w1", scheduler="sim", state="idle")
    with pytest.raises(SchedulerError, match=re.escape(NOT_LEADER)):
        scheduler.drain(worker, DrainSchedule.GRACEFUL, "test")
    with pytest.raises(SchedulerError, match=re.escape(NOT_LEADER)):    # nor steers its placement
        scheduler.steer([(worker, 1)])


def test_holds_drains_and_a_pause_survive_a_failover_and_a_standby_refuses_changes(etcd) -> None:
    ca, cb = Time(), Time()
    a, b = head(etcd.url, "head1:1", ca), head(etcd.url, "head2:2", cb)
    a.lease.step()
    b.lease.step()
    admin_a, admin_b = AdminState(clock=ca, store=a.admin_store), AdminState(clock=cb, store=b.admin_store)
    assert admin_a.hold("i-1").changed and admin_a.drain("i-2").changed
    admin_a.pause("maintenance")
    with pytest.raises(AdminRefused, match="standby.*head1:1") as refused:
        admin_b.hold("i-3")
    assert refused.value.leader.startswith("head1:1") and admin_b.held == frozenset()
    a.lease.stop()                        # the leader goes; b wins the next round
    b.lease.step()
    b.admin = admin_b
    assert b.hold_back(1.7e9 + 10) == "new leader: starting from fresh inputs, as a restart does"
    assert b.hold_back(1.7e9 + 10) is None  # reads the admin state from etcd first
    assert admin_b.held == {"i-1"} and admin_b.forced_drains == {"i-2"}
    assert admin_b.paused == "maintenance"


def test_a_new_leader_waits_for_inputs_polled_after_its_election(etcd) -> None:
    clock, wall = Time(), Time(now=1.7e9)
    a, b = head(etcd.url, "head1:1", clock, wall), head(etcd.url, "head2:2", clock, wall)
    b.lease.step()
    a.lease.step()
    assert a.hold_back(wall()) == "standby; leader is head2:2 since 2023-11-14 22:13:20Z"
    b.lease.stop()
    elected_at = wall()
    a.lease.step()
    a.hold_back(elected_at)               # the first call after the election: fresh inputs
    assert a.hold_back(elected_at - 0.1).startswith("new leader: waiting for a cloud listing")
    assert a.hold_back(elected_at + 0.1) is None


def test_metrics_say_who_leads(etcd) -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    clock = Time()
    a, b = head(etcd.url, "head1:1", clock), head(etcd.url, "head2:2", clock)
    ra, rb = CollectorRegistry(), CollectorRegistry()
    ra.register(a.collector())
    rb.register(b.collector())
    a.lease.step()
    b.lease.step()
    clock.advance(0.5)
    text_a, text_b = generate_latest(ra).decode(), generate_latest(rb).decode()
    assert "nodemanager_leader 1.0" in text_a and "nodemanager_leader 0.0" in text_b
    assert "nodemanager_lease_age_seconds 0.5" in text_a and "\nnodemanager_lease_age_seconds " not in text_b
    assert "nodemanager_elections_total 1.0" in text_a and "nodemanager_elections_total 0.0" in text_b


def test_a_standby_controller_plans_but_carries_out_nothing_and_says_why_once(etcd, caplog) -> None:
    import logging

    from tests.test_controller import Loop
    caplog.set_level(logging.DEBUG, "nodemanager.decisions")
    clock = Time()
    leader, standby = head(etcd.url, "head1:1", clock), head(etcd.url, "head2:2", clock)
    leader.lease.step()
    standby.lease.step()
    loop = Loop(sim_settings(), time=clock)
    loop.ctl.hold_back = standby.hold_back
    loop.run(120)
    assert any(r.plan.boots for r in loop.reports)                 # it plans the boots...
    assert loop.world.sim_cloud.live_count() == 0                   # ...and boots nothing
    lines = [r for r in caplog.records if "not carried out: standby; leader is head1:1" in r.message]
    assert [r.levelno for r in lines][:2] == [logging.INFO, logging.DEBUG]


def test_a_rate_limit_wait_never_carries_a_destroy_past_the_lease(etcd, ec2_cloud, ec2_proxy) -> None:
    """The lease is checked after the cloud's rate-limit wait, right before the call is sent."""
    clock = Time()
    ha = head(etcd.url, "head1:1", clock)
    ha.lease.step()
    slow = ec2_cloud(calls_per_second=0.25, clock=clock, sleep=clock.advance)  # 4 s between calls
    cloud, _ = ha.fence_ports(slow, SimWorld(sim_settings(), clock).scheduler)
    node = cloud.create_node(SMALL, "g-small-1", {TAG_REQUEST: "r1"})
    listed = {n.id: n for n in cloud.list_nodes()}[node.id]   # waited 4 s for its token
    ha.lease.step()                                           # renewed: acting for 1.5 s more
    assert ha.lease.acting()
    sent = len(ec2_proxy.actions)
    with pytest.raises(CloudError, match=re.escape(NOT_LEADER)):
        cloud.destroy_node(listed)                            # acting when called, not after the wait
    assert ec2_proxy.actions[sent:] == []                     # neither the fence tag nor the terminate


@pytest.mark.slurm
def test_a_slow_scheduler_query_never_carries_a_drain_or_an_escalation_past_the_lease(etcd, slurm) -> None:
    """The SLURM adapter reads the pool before it drains or escalates; the lease is checked again
    right before each scontrol/scancel, after that read."""
    from nodemanager.scheduler.slurm import SlurmOptions, SlurmScheduler
    clock = Time()
    ha = head(etcd.url, "head1:1", clock)
    ha.lease.step()
    slow = {"query": 0.0}                                     # seconds each read of the pool takes

    def adapter_clock() -> float:
        return clock.advance(slow["query"])
    inner = SlurmScheduler(SlurmOptions.from_mapping(slurm.scheduler_options), clock=adapter_clock)
    _, sched = ha.fence_ports(SimWorld(sim_settings(), clock).cloud, inner)
    job = slurm.sbatch("-w", "node6", "-c1")
    slurm.wait_job(job, "RUNNING")
    slurm.wait_state("node6", {"mix", "alloc"})
    node6 = {w.name: w for w in sched.poll().workers}["node6"]
    ticket = sched.drain(node6, DrainSchedule.GRACEFUL, "test")   # fast reads: drained while acting
    slow["query"] = TTL                                       # now each read outlasts the lease
    ha.lease.step()
    with pytest.raises(SchedulerError, match=re.escape(NOT_LEADER)):
        sched.escalate(ticket, DrainSchedule.QUICK)
    assert slurm.job_state(job) == "RUNNING"                  # not requeued
    node5 = {w.name: w for w in inner.poll().workers}["node5"]
    ha.lease.step()
    with pytest.raises(SchedulerError, match=re.escape(NOT_LEADER)):
        sched.drain(node5, DrainSchedule.GRACEFUL, "test")
    assert slurm.states()["node5"] == "idle"                  # not drained
