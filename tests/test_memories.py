"""The controller's memories kept in the state dir across a restart: an open capacity breaker stays
open until its cooldown ends (the real Controller and Actuator over libcloud's EC2 driver on moto,
restarted as a new process would be), the finished runtimes and the learned spot reclaim rates
come back, and a bad or truncated file is one warning naming it, the memory starting empty."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from nodemanager.configuration.settings import CloudSettings, ManageSettings, Settings
from nodemanager.cycle.memories import Memories
from nodemanager.model import Demand, FinishedJob, RunningJob, Size
from nodemanager.scheduler.port import SchedulerPoll
from tests.core_world import settings as core_settings
from tests.test_faults_ec2 import Ec2Loop
from tests.test_spot_adapts import DAY, HOUR, ON_DEMAND, SPOT, _up

SMALL = Size("small", cores=2, ram_mb=4096, price=0.1, instance_type="t3.small")
LARGE = Size("large", cores=2, ram_mb=8192, price=0.2, instance_type="t3.large")


def _kept(state_dir, **core) -> Settings:
    """A daemon's settings on a cloud outside this process, with a state dir."""
    return Settings(core=core_settings(**core), cloud=CloudSettings(driver="ec2", cluster="pool1"),
                    manage=ManageSettings(state_dir=str(state_dir)))


def _restart(loop: Ec2Loop, ec2_cloud) -> None:
    """A new process: new adapter, actuator and controller, wired to the state dir as the daemon does."""
    loop.start(ec2_cloud)
    loop.ctl.memories = Memories.for_settings(loop.settings, loop.actuator.breakers, loop.time())


def _booted(loop: Ec2Loop, since: int = 0) -> list[str]:
    return [o.size for r in loop.reports[since:] for o in r.outcomes if o.kind == "boot" and o.result == "ok"]


@pytest.mark.ec2
def test_an_open_capacity_breaker_stays_open_across_a_restart_until_its_cooldown_ends(ec2_cloud, ec2_proxy,
                                                                                     tmp_path, caplog):
    loop = Ec2Loop(ec2_cloud, ec2_proxy, max_nodes=10, job_seconds=100000.0)
    s = loop.settings
    loop.settings = replace(s, core=replace(s.core, sizes=(SMALL, LARGE)),
                            cloud=replace(s.cloud, driver="ec2", cluster="pool1", capacity_cooldown=300.0, capacity_max_cooldown=1800.0),
                            manage=replace(s.manage, state_dir=str(tmp_path)))
    _restart(loop, ec2_cloud)
    ec2_proxy.fail("RunInstances", 500, "InsufficientInstanceCapacity", times=1, instance_type="t3.small")
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert _booted(loop) == ["large"] and list(loop.reports[-1].snapshot.open_breakers) == ["small"]
    assert (tmp_path / "pool1.breakers.json").exists()

    # the process restarts 2 minutes later: the breaker is still open, a new job goes to large again
    loop.time.advance(120.0)
    caplog.set_level(logging.INFO)
    _restart(loop, ec2_cloud)
    assert "size small: capacity breaker still open from before the restart" in caplog.text
    assert "next probe boot in 2m " in caplog.text     # 5 minutes from the error, 2 and some cycles gone
    n = len(loop.reports)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert _booted(loop, n) == ["large"]
    assert "capacity breaker open: 1 capacity error(s) in a row" in loop.reports[-1].snapshot.open_breakers["small"]
    assert [p["InstanceType"] for p in ec2_proxy.params["RunInstances"]].count(["t3.small"]) == 1

    # once its cooldown has passed, one probe boot of small decides (it succeeds: closed)
    loop.time.advance(300.0)
    n = len(loop.reports)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert _booted(loop, n) == ["small"] and not loop.reports[-1].snapshot.open_breakers
    _restart(loop, ec2_cloud)        # and a closed breaker stays closed
    assert not loop.ctl.snapshot([], loop.time(), loop.sched.poll()).open_breakers


def _finished(job_id: str, user: str, name: str | None, runtime: float) -> FinishedJob:
    return FinishedJob(job=RunningJob(job_id=job_id, user=user, start=1000.0, name=name, limit=36000.0),
                       end=1000.0 + runtime)


def test_finished_runtimes_and_learned_reclaim_rates_survive_a_restart(tmp_path):
    settings = _kept(tmp_path, sizes=(ON_DEMAND, SPOT), runtime_prediction="recent", reclaim_prior=10 * DAY)
    memories = Memories.for_settings(settings, None, 0.0)
    poll = SchedulerPoll(workers=(), demand=(), polled_at=0.0,
                         finished=(_finished("1", "alice", "sim", 600), _finished("2", "alice", "sim", 1000)))
    memories.recall(poll, settings.core, 0.0)
    t = 0.0
    for day in range(10):                    # 50 spot VMs up, 10 more reclaimed each day
        for hour in range(24):
            t = (day * 24 + hour) * HOUR
            notices = [_up(f"r{day}-{k}", "reclaimed") for k in range(10)] if hour == 0 else []
            memories.reclaim.observe([_up(f"n{i}") for i in range(50)] + notices, settings.core.sizes, t)
    learned = memories.reclaim.rates(settings.core, t)["spot"]
    memories.save(t)
    assert (tmp_path / "pool1.runtimes.json").exists()
    memories.save(t, force=True)             # a clean stop writes what is not written yet

    again = Memories.for_settings(settings, None, t)
    assert again.runtimes.recent("alice", "sim") == (600.0, 1000.0)
    assert again.runtimes.recent("alice", None) == (600.0, 1000.0)
    assert again.reclaim.rates(settings.core, t)["spot"] == pytest.approx(learned)
    assert learned[0] * 24 > 0.1             # well above the configured 0.0073 per VM-day
    # a reclaim seen before the restart is not counted again when its node is seen once more
    again.reclaim.observe([_up("r9-0", "reclaimed")], settings.core.sizes, t)
    assert again.reclaim.rates(settings.core, t)["spot"] == pytest.approx(learned)


@pytest.mark.parametrize("text", ['{"runtimes": [["alice", 3, [1]]]}', '{"breakers": {"small": [1, 2', "\x00"])
def test_a_bad_or_truncated_file_is_named_and_the_memory_starts_empty(tmp_path, caplog, text):
    settings = _kept(tmp_path, sizes=(SMALL,))
    for what in ("runtimes", "reclaim", "breakers"):
        (tmp_path / f"pool1.{what}.json").write_text(text)
    from nodemanager.cycle.breakers import Breakers
    breakers = Breakers()
    memories = Memories.for_settings(settings, breakers, 0.0)
    assert memories.runtimes.recent("alice", None) == () and breakers.records() == {}
    for what in ("runtimes", "reclaim", "breakers"):
        path = str(tmp_path / f"pool1.{what}.json")
        (line,) = [r.getMessage() for r in caplog.records if path in r.getMessage()]
        assert "unreadable" in line and "starts empty" in line


def test_a_dry_run_or_a_simulated_cloud_keeps_nothing_in_the_state_dir(tmp_path):
    for settings in (replace(_kept(tmp_path), dry_run=True),
                     replace(_kept(tmp_path), cloud=CloudSettings(driver="simulated", cluster="pool1"))):
        memories = Memories.for_settings(settings, None, 0.0)
        memories.runtimes.record("alice", "sim", 60.0)
        memories.save(1000.0, force=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["htcondor", "slurm"])
def test_the_daemons_adapters_read_finished_jobs_only_with_runtime_prediction_on(kind):
    from nodemanager.configuration.settings import CoreSettings, SchedulerSettings
    from nodemanager.ports import build_ports
    from nodemanager.scheduler.finished_window import MAX_FINISHED
    spot = replace(SMALL, name="small-spot", market="spot")
    # auto (the default) reads them where a spot size is configured
    for mode, sizes, limit in (("recent", (SMALL,), MAX_FINISHED), ("off", (SMALL,), 0), ("auto", (SMALL,), 0),
                               ("auto", (SMALL, spot), MAX_FINISHED), ("off", (SMALL, spot), 0)):
        settings = Settings(core=CoreSettings(sizes=sizes, runtime_prediction=mode),
                            cloud=CloudSettings(driver="dummy", cluster="pool1"), scheduler=SchedulerSettings(kind))
        _, scheduler, _ = build_ports(settings, lambda: 0.0)
        assert scheduler.finished_limit == limit
