"""Replays of the development traces (read from ../shared/traces): skipping idle cycles must not
change a single figure, and every policy must finish every job without killing any."""

from dataclasses import replace

import pytest

from nodemanager.configuration.config import loads
from nodemanager.sim import baselines as B
from nodemanager.sim.figures import lower_bounds
from nodemanager.sim.replay import replay
from nodemanager.sim.swf import read_jobs

# (skip days, days, longest job kept): small windows, so that the replay without skipping
# (every cycle on the grid) stays within seconds
TRACES = {"LPC-EGEE-2004-1.2-cln.swf.gz": (0, 1.0, None),
          "HPC2N-2002-2.2-cln.swf.gz": (300, 0.5, 4 * 3600)}


@pytest.fixture(scope="module", params=sorted(TRACES))
def window(request, traces_dir):
    skip, days, longest = TRACES[request.param]
    jobs, _ = read_jobs(str(traces_dir / request.param), skip_days=skip, days=days)
    if longest:
        jobs = [j for j in jobs if j.runtime <= longest]
    bounds = lower_bounds(jobs, 8)
    base = loads("")
    settings = replace(base, core=replace(base.core, sizes=(B.default_size(8),),
                                          max_nodes=bounds.nowait_peak_nodes))
    return jobs, bounds, settings


def policies(settings, bounds):
    return [B.ours(settings)] + B.baselines(settings, bounds.nowait_peak_nodes)


@pytest.mark.slow
def test_skipping_cycles_changes_no_figure(window):
    jobs, bounds, settings = window
    for policy in policies(settings, bounds):
        fast = replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
        slow = replay(jobs, policy, B.SimParams(), bounds, record_series=False,
                      skip_cycles=False).figures
        assert fast.cycles_skipped > 0 or fast.cycles < slow.cycles
        for name in ("paid_node_hours", "busy_node_hours", "wait_p50", "wait_p95", "wait_max",
                     "jobs_completed", "boots", "drains", "drain_cancels", "destroys", "peak_nodes",
                     "money", "destroy_boot_60s"):
            assert getattr(fast, name) == pytest.approx(getattr(slow, name)), (policy.name, name)


def test_every_policy_runs_every_job_and_kills_none(window):
    jobs, bounds, settings = window
    for policy in policies(settings, bounds):
        f = replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
        assert f.jobs_completed == len(jobs) and f.jobs_unfinished == 0, policy.name
        assert f.jobs_killed == 0 and f.badput_core_hours == 0, policy.name
        # nobody beats the no-wait bound without making jobs wait, nor the work bound at all
        assert f.paid_node_hours >= f.lower_bound_work_node_hours, policy.name
        assert f.busy_node_hours <= f.paid_node_hours + 1e-9, policy.name
        waste = sum(f.waste.values())
        assert waste == pytest.approx(f.paid_node_hours, rel=1e-6), policy.name
