"""Fault injection over the simulated world: the real Controller and Actuator on a virtual clock,
each fault class on its own, the safety invariants checked after every cycle.

Each scenario runs an hour of virtual time with the fault on (jobs keep arriving), then the faults
stop and the world runs until the queue is empty and every VM is gone. The regressions at the end
were bugs found here and fixed since.
"""

from __future__ import annotations

import functools
import random

import pytest

from nodemanager.sim.faults import CloudFaults, FaultyCloud, SchedulerFaults, dud_boots
from nodemanager.sim.invariants import CheckedRun
from tests.fixtures.daemon import sim_settings

HOUR = 3600.0
SEEDS = (1, 2)


def busy_world(**options: str):
    """The demo world with a steady job stream: bursts every 10 min plus 60 single jobs per hour."""
    return sim_settings(burst_every="10m", jobs_per_hour="60", **options)


def settle(run: CheckedRun, seconds: float = 1800.0) -> None:
    """Stop every fault and every new job, then let the world drain out."""
    run.faulty_cloud.enabled = False
    run.faulty_cloud.faults = CloudFaults()
    run.faulty_scheduler.clear()
    run.world.jobs = None
    run.run(seconds)


def assert_healthy(run: CheckedRun) -> None:
    stats = run.world.pool.stats
    assert run.inv.violations == [], run.inv.violations[:5]
    assert run.inv.counts["checks"] > 100
    assert stats.killed == 0
    assert stats.idle == 0 and stats.running == 0 and stats.completed == stats.submitted
    assert run.world.sim_cloud.live_count() == 0, "VMs leaked"


@functools.cache
def baseline_creates(seed: int) -> int:
    run = CheckedRun(busy_world(), seed=seed)
    run.run(HOUR)
    settle(run)
    return run.world.sim_cloud.calls["create_node"]


CLOUD_CASES = {
    "http 500/503/429/timeouts/quota/capacity": CloudFaults(error_rate=0.2),
    "create fails but creates": CloudFaults(create_but_fails=0.4),
    "destroy fails but destroys": CloudFaults(destroy_but_fails=0.4),
    "reordered listings": CloudFaults(reorder_listing=0.5),
    "cloud clock 1h ahead": CloudFaults(skew=HOUR),
    "cloud clock 2 min behind": CloudFaults(skew=-120.0),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(CLOUD_CASES))
def test_cloud_fault(case, seed):
    run = CheckedRun(busy_world(), seed=seed, cloud_faults=CLOUD_CASES[case])
    run.run(HOUR)
    injected = sum(run.injected.values())
    settle(run)
    assert injected > 0 or "clock" in case
    assert_healthy(run)
    # nothing is booted twice for the same demand: a create that raised but created is adopted
    creates = run.world.sim_cloud.calls["create_node"]
    assert creates <= baseline_creates(seed) + run.injected["create_node_effect"] + 2


def test_partial_listings_below_the_cap_break_no_invariant():
    run = CheckedRun(busy_world(), seed=1, cloud_faults=CloudFaults(partial_listing=0.2))
    run.run(HOUR)
    settle(run)
    assert run.injected["list_nodes_partial"] > 20
    assert_healthy(run)


SCHEDULER_CASES = {
    "unreachable for minutes": SchedulerFaults(outage_rate=0.02, outage_length=300.0),
    "drain/cancel/confirm calls fail": SchedulerFaults(call_error_rate=0.3),
    "stale polls": SchedulerFaults(stale_poll=0.3),
    "lagging ads": SchedulerFaults(lagging_ads=0.3),
    "scheduler clock 5 min behind": SchedulerFaults(skew=300.0),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(SCHEDULER_CASES))
def test_scheduler_fault(case, seed):
    run = CheckedRun(busy_world(), seed=seed, scheduler_faults=SCHEDULER_CASES[case])
    run.run(HOUR)
    assert sum(run.injected.values()) > 0 or "clock" in case
    settle(run)
    assert_healthy(run)


def test_throttling_is_obeyed_not_hammered():
    """A 429 with Retry-After: no cloud call from the actuators until it has passed."""
    run = CheckedRun(busy_world(), seed=3)
    run.faulty_cloud.fail_next("create_node", "throttle")
    run.cycle()
    first = run.world.sim_cloud.calls["create_node"]
    assert first == 0 and run.faulty_cloud.injected["create_node_throttle"] == 1
    for _ in range(3):                       # 15 s < Retry-After 20 s
        run.clock.advance(5)
        run.cycle()
    assert run.world.sim_cloud.calls["create_node"] == 0
    run.clock.advance(10)
    run.cycle()
    assert run.world.sim_cloud.calls["create_node"] > 0
    run.run(HOUR)
    settle(run)
    assert_healthy(run)


def test_quota_error_stops_booting_that_size_instead_of_looping():
    run = CheckedRun(busy_world(), seed=4)
    run.faulty_cloud.fail_next("create_node", "quota", count=50)
    run.run(300)
    attempts = run.faulty_cloud.injected["create_node_quota"]
    assert 1 <= attempts <= 2, f"{attempts} creates tried within quota_backoff after a quota error"
    run.faulty_cloud._scripted.clear()
    run.run(HOUR)
    settle(run)
    assert_healthy(run)


def test_outage_then_recovery_decides_on_fresh_data_only():
    """slurmctld/collector down for 10 minutes while nodes are idle past their grace: nothing is
    drained or destroyed during the outage (inputs stale), and the nodes go once it is back."""
    run = CheckedRun(sim_settings(), seed=5)
    run.run(120)
    live = run.world.sim_cloud.live_count()
    assert live == 3
    start = run.clock()
    run.faulty_scheduler.outage(start, start + 600)
    run.run(600)
    assert run.world.sim_cloud.live_count() == live
    assert any(r.plan.frozen and "stale" in r.plan.frozen for r in run.reports[-50:])
    settle(run)
    assert_healthy(run)


def test_mass_down_from_a_blank_scheduler_does_not_mass_destroy():
    """The collector restarts and answers with no ads for two minutes while six VMs run jobs:
    every node looks gone at once, which freezes destroys instead of emptying the pool."""
    run = CheckedRun(sim_settings(burst_size="24", job_runtime="900s"), seed=6)
    run.run(400)                            # past boot_grace: unpaired nodes are shutdown candidates
    assert run.world.sim_cloud.live_count() == 6
    start = run.clock()
    run.faulty_scheduler.blank(start, start + 120)
    run.run(120)
    assert run.faulty_scheduler.injected["poll_blank"] > 0
    assert run.world.sim_cloud.live_count() == 6
    settle(run)
    assert_healthy(run)


def test_vm_whose_worker_never_joins_is_reaped_after_boot_grace():
    run = CheckedRun(busy_world(), seed=7)
    duds = dud_boots(run.world, 0.3, random.Random(7))
    run.run(HOUR)
    settle(run)
    assert duds["dud_boot"] > 0
    assert_healthy(run)                      # includes: no dud left past boot_grace + slack


def test_every_cloud_fault_at_once():
    faults = CloudFaults(error_rate=0.1, create_but_fails=0.1, destroy_but_fails=0.1, partial_listing=0.1,
                         reorder_listing=0.3, keep_terminated=1800.0)
    sched = SchedulerFaults(outage_rate=0.01, outage_length=240.0, call_error_rate=0.1, stale_poll=0.1,
                            lagging_ads=0.1)
    run = CheckedRun(busy_world(), seed=8, cloud_faults=faults, scheduler_faults=sched)
    run.run(2 * HOUR)
    assert len(run.injected) >= 10
    settle(run)
    assert_healthy(run)


def test_fault_schedule_is_deterministic():
    def once() -> tuple:
        run = CheckedRun(busy_world(), seed=9, cloud_faults=CloudFaults(error_rate=0.2, partial_listing=0.2),
                         scheduler_faults=SchedulerFaults(stale_poll=0.2, outage_rate=0.01))
        run.run(1800)
        return dict(run.injected), dict(run.world.sim_cloud.calls), run.world.pool.stats

    assert once() == once()


def test_a_create_that_raised_but_created_is_adopted_not_booted_again():
    run = CheckedRun(sim_settings(), seed=10)
    run.faulty_cloud.fail_next("create_node", "effect", count=3)
    run.run(900)
    assert run.faulty_cloud.injected["create_node_effect"] == 3
    assert run.world.sim_cloud.calls["create_node"] == 3      # 12 one-core jobs on 4-core nodes
    adopted = [o for r in run.reports for o in r.outcomes if o.kind == "boot" and o.result == "ok"
               and "raised but the node is listed" in o.detail]
    assert len(adopted) == 3
    assert_healthy(run)


def test_faulty_cloud_classifies_like_the_adapters():
    run = CheckedRun(sim_settings(), seed=11)
    cloud = FaultyCloud(run.world.cloud, CloudFaults(), random.Random(0))
    from nodemanager.cloud.port import CloudError, ErrorKind
    expected = {"http500": ErrorKind.TRANSIENT, "http503": ErrorKind.TRANSIENT, "timeout": ErrorKind.TRANSIENT,
                "throttle": ErrorKind.RATE_LIMIT, "quota": ErrorKind.QUOTA, "capacity": ErrorKind.CAPACITY}
    for fault, kind in expected.items():
        cloud.fail_next("list_nodes", fault)
        with pytest.raises(CloudError) as info:
            cloud.list_nodes()
        assert info.value.kind is kind and info.value.call == "list_nodes"
        assert (info.value.retry_after is not None) == (fault == "throttle")


def test_partial_listings_never_give_two_vms_the_same_name():
    run = CheckedRun(sim_settings(burst_every="5m", jobs_per_hour="200", job_runtime="300s"), seed=1,
                     cloud_faults=CloudFaults(partial_listing=0.3))
    run.run(600)
    assert [v for v in run.inv.violations if "share the name" in v] == []


@pytest.mark.parametrize("seed", [2, 3])
def test_every_fault_at_once_under_a_price_cap(seed):
    from dataclasses import replace
    settings = sim_settings(burst_every="10m", burst_size="40", job_runtime="400s")
    settings = replace(settings, core=replace(settings.core, max_total_price=1.0))
    run = CheckedRun(settings, seed=seed,
                     cloud_faults=CloudFaults(error_rate=0.1, create_but_fails=0.2, partial_listing=0.2,
                                              keep_terminated=1800.0, destroy_but_fails=0.2),
                     scheduler_faults=SchedulerFaults(missing_ad=0.1, stale_poll=0.1, outage_rate=0.01))
    run.run(2 * HOUR)
    assert run.inv.violations == [], run.inv.violations[:3]


def test_a_long_outage_followed_by_a_blank_poll_does_not_kill_jobs():
    run = CheckedRun(sim_settings(burst_size="8", job_runtime="1800s"), seed=1)
    run.run(400)
    assert run.world.sim_cloud.live_count() == 2
    start = run.clock()
    run.faulty_scheduler.outage(start, start + 660)
    run.faulty_scheduler.blank(start + 660, start + 665)
    run.run(700)
    settle(run)
    assert_healthy(run)


def test_a_long_outage_followed_by_lagging_ads_does_not_kill_jobs():
    from dataclasses import replace

    from nodemanager.sim.pool import Job
    run = CheckedRun(sim_settings(burst_size="4", job_runtime="300s"), seed=1)
    while run.world.pool.stats.completed < 4:                # one VM ran the burst; now it is idle
        run.run(run.step)
    assert run.world.sim_cloud.live_count() == 1
    start = run.clock()
    scheduler = run.faulty_scheduler
    scheduler.outage(start, start + 660)                     # we cannot see the scheduler...
    for i in range(4):                                       # ...while it starts new jobs on the VM
        run.world.pool.submit(Job(id=f"during-{i}", cpus=1, ram_mb=1000, runtime=1800.0, submit_time=start))
    run.run(660)
    calm = scheduler.faults
    scheduler.faults = replace(calm, lagging_ads=1.0)       # the first poll after the outage lags
    run.run(run.step)
    scheduler.faults = calm
    run.run(60)
    settle(run, 3600)
    assert_healthy(run)


def test_a_vm_booted_just_before_an_outage_is_not_destroyed_by_the_first_poll_after():
    run = CheckedRun(sim_settings(burst_size="4", job_runtime="1800s"), seed=1)
    while run.world.sim_cloud.calls["create_node"] < 1:
        run.run(run.step)
    start = run.clock()
    run.faulty_scheduler.outage(start, start + 660)
    run.faulty_scheduler.blank(start + 660, start + 665)
    run.run(700)
    settle(run, 3600)
    assert_healthy(run)


# -- regressions: each was a bug this file found (fixed since; the docstring says what it was) ----

@pytest.mark.parametrize("faults", [SchedulerFaults(missing_ad=0.2), SchedulerFaults(flapping=1.0)],
                         ids=["missing ad", "flapping node"])
def test_missing_or_flapping_ad_does_not_kill_jobs(faults):
    """Was: a running node missing from ONE poll was classed unpaired + boot exceeded ->
    START_SHUTDOWN, and the destroy re-check found no worker in that poll: VM destroyed, jobs killed."""
    run = CheckedRun(busy_world(), seed=1, scheduler_faults=faults)
    run.run(HOUR)
    settle(run)
    assert run.injected["poll_missing_ad"] + run.injected["poll_flapping"] > 50
    assert_healthy(run)


def test_blank_poll_on_a_small_pool_does_not_kill_jobs():
    """Was: a blank poll on a pool of <= down_freeze_count nodes (no mass-down freeze) destroyed
    every node with its jobs."""
    run = CheckedRun(sim_settings(burst_size="8", job_runtime="900s"), seed=6)
    run.run(400)
    assert run.world.sim_cloud.live_count() == 2
    start = run.clock()
    run.faulty_scheduler.blank(start, start + 60)
    run.run(60)
    settle(run)
    assert_healthy(run)


@pytest.mark.parametrize("world", ["at the cap", "below the cap"])
def test_partial_listings_never_exceed_max_nodes_nor_boot_extra(world):
    """Was: a listing that missed nodes was taken as the truth: 10 VMs alive with max_nodes 8
    within 10 s, and 26 creates instead of 22 below the cap."""
    if world == "at the cap":
        settings = sim_settings(burst_every="10m", burst_size="40", job_runtime="400s")
    else:
        settings = busy_world()
    run = CheckedRun(settings, seed=1, cloud_faults=CloudFaults(partial_listing=0.2))
    run.run(HOUR)
    settle(run)
    assert run.injected["list_nodes_partial"] > 20
    assert_healthy(run)                                  # includes max_nodes after every cycle
    if world == "below the cap":
        assert run.world.sim_cloud.calls["create_node"] <= baseline_creates(1) + 2


def test_scheduler_clock_far_behind_does_not_kill_jobs():
    """Was: the scheduler's clock 11 min behind ours (> node_stale_after) made every worker 'down'
    and the destroy path treated them as lost although the fresh poll showed them running jobs."""
    run = CheckedRun(sim_settings(), seed=1, scheduler_faults=SchedulerFaults(skew=660.0))
    run.run(1200)
    settle(run)
    assert_healthy(run)


def test_cloud_clock_behind_more_than_boot_grace_does_not_boot_loop():
    """Was: launched_at 400 s behind our clock (> boot_grace) made every new VM boot-exceeded at
    once: destroyed before its worker joined and booted again, forever (720 creates in 20 min)."""
    run = CheckedRun(sim_settings(), seed=1, cloud_faults=CloudFaults(skew=-400.0))
    run.run(1200)
    assert run.world.sim_cloud.calls["create_node"] <= 6
    assert run.world.pool.stats.completed == 12


def test_terminated_nodes_in_the_listing_are_neither_destroyed_again_nor_counted():
    """Was: terminated VMs still listed (EC2 keeps them about an hour) were planned like live ones:
    destroyed again every cycle and counted against max_nodes (32 of 384 jobs done in an hour)."""
    settings = sim_settings(burst_every="5m", burst_size="32")
    run = CheckedRun(settings, seed=1, cloud_faults=CloudFaults(keep_terminated=HOUR))
    run.run(HOUR)
    assert run.faulty_cloud.injected["list_nodes_terminated"] > 0
    on_terminated = [i for r in run.reports for i in r.plan.items
                     if any(n.id == i.node_id and n.state == "terminated" for n in r.snapshot.cloud_nodes)]
    assert on_terminated == []
    stats = run.world.pool.stats
    assert stats.completed >= 0.9 * stats.submitted
    assert run.inv.violations == []
