"""The embedded default world: options, the job stream, and event-ordered time."""

from dataclasses import replace

import pytest

from nodemanager.configuration.config import ConfigError
from nodemanager.configuration.settings import SchedulerSettings
from nodemanager.sim.world import JobStream, SimWorld, world_options
from tests.fixtures.daemon import Time, sim_settings


def test_options_are_typed_and_bad_values_name_the_option():
    opts = world_options(sim_settings(burst_every="3m", job_runtime="90s", burst_size="7"))
    assert (opts.burst_every, opts.job_runtime, opts.burst_size) == (180.0, 90.0, 7)
    bad = replace(sim_settings(), scheduler=SchedulerSettings(kind="simulated",
                                                             options={"burst_every": "often", "seed": "x"}),
                  source="nm.ini")
    with pytest.raises(ConfigError) as e:
        world_options(bad)
    text = str(e.value)
    assert "nm.ini: [Scheduler] burst_every" in text and "[Scheduler] seed" in text


def test_job_stream_is_deterministic_and_bursts_vary():
    opts = world_options(sim_settings(burst_every="3m", burst_size="12", seed="4"))
    a, b = JobStream(0.0, opts), JobStream(0.0, opts)
    ja, jb = a.due(3600.0), b.due(3600.0)
    assert [(j.submit_time, j.runtime) for j in ja] == [(j.submit_time, j.runtime) for j in jb]
    sizes = [sum(1 for j in ja if j.submit_time == t) for t in sorted({j.submit_time for j in ja})]
    assert sizes[0] == 12 and len(sizes) == 21 and min(sizes) >= 3 and len(set(sizes)) > 1
    assert all(45.0 <= j.runtime <= 135.0 for j in ja)


def test_boot_and_join_delays_hold_when_time_jumps():
    t = Time()
    world = SimWorld(sim_settings(boot_delay="20s", join_delay="5s"), t, jobs=False)
    size = world.sim_cloud.sizes["small"]
    node = world.cloud.create_node(size, "a", {})
    t.advance(1000)                         # one big step: events still happen at their own times
    [w] = world.scheduler.poll().workers
    assert w.cloud_id == node.id
    assert w.registered_at == pytest.approx(node.launched_at + 25.0, abs=1.0)
