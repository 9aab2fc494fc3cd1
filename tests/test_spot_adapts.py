"""Spot that adapts: a spot market takes a job only while the job's expected re-runs stay within
``max_rerun_share`` of its walltime, at the reclaim rate the controller saw lately (the configured
rate is the prior). When reclaims come faster than configured, long jobs go to on-demand; when
they stop, the rate fades back and the jobs return to spot."""

from __future__ import annotations

import math
from dataclasses import replace

import policy_matrix
import pytest

from nodemanager.configuration.config import loads
from nodemanager.core import plan
from nodemanager.core.pricing import rerun_share, spot_walltime_limit
from nodemanager.core.reclaim_rates import HALF_LIFE
from nodemanager.cycle.reclaim_memory import ReclaimMemory
from nodemanager.model import Action, NodeExplanation, Size, StateTuple
from nodemanager.sim import baselines as B
from nodemanager.sim.figures import lower_bounds
from nodemanager.sim.replay import replay
from nodemanager.sim.spot import spot_size
from nodemanager.sim.swf import SwfJob
from tests.core_world import Demand, settings, snap

MATRIX = policy_matrix.load_default()
ON_DEMAND = Size("od", cores=4, ram_mb=16000, price=0.20)
# 0.3 of the on-demand price, configured with EC2 Spot Advisor's worst band
SPOT = Size("spot", cores=4, ram_mb=16000, price=0.06, market="spot", interruptions_per_day=0.0073)
HOUR, DAY = 3600.0, 86400.0


def boots(walltime: float, learned_per_day: float | None = None) -> list[str]:
    learned = {} if learned_per_day is None else {"spot": (learned_per_day / 24, "learned")}
    p = plan(snap(demand=[Demand(cpus=4, count=2, walltime=walltime)], reclaim_rates=learned),
             settings(sizes=(ON_DEMAND, SPOT)), MATRIX)
    return [b.size for b in p.boots]


def test_the_walltime_a_market_takes_is_where_the_expected_reruns_reach_the_share():
    for per_day in (0.0073, 0.2, 2.0):
        limit = spot_walltime_limit(per_day / 24, 0.05)
        assert rerun_share(per_day / 24, limit) <= 0.05 < rerun_share(per_day / 24, limit + 60)
    # a faster market takes shorter jobs; a market never reclaimed takes any
    assert spot_walltime_limit(0.2 / 24, 0.05) < spot_walltime_limit(0.0073 / 24, 0.05)
    assert spot_walltime_limit(0.0, 0.05) == math.inf


def test_a_two_day_job_goes_to_on_demand_once_reclaims_come_fast_and_returns_when_they_stop():
    assert boots(2 * DAY) == ["spot"]                       # configured: 0.7 % re-run, spot
    assert boots(2 * DAY, learned_per_day=0.2) == ["od"]    # seen lately: 22 % re-run
    assert boots(2 * HOUR, learned_per_day=0.2) == ["spot"]  # short jobs stay on spot
    assert boots(2 * DAY, learned_per_day=0.01) == ["spot"]  # the market calmed down


def test_a_job_too_long_for_every_size_says_what_the_spot_market_takes():
    p = plan(snap(demand=[Demand(cpus=4, count=1, walltime=2 * DAY)], reclaim_rates={"spot": (0.2 / 24, "")}),
             settings(sizes=(SPOT,)), MATRIX)
    assert p.boots == () or list(p.boots) == []
    assert any("spot takes jobs up to 11h" in n for n in p.notes), p.notes


def test_max_rerun_share_is_read_from_the_config_and_bad_values_name_the_option():
    assert loads("[Daemon]\nmax_rerun_share = 2%\nreclaim_prior = 5d\n").core.max_rerun_share == 0.02
    assert loads("[Daemon]\nmax_rerun_share = 0.1\n").core.max_rerun_share == 0.1
    with pytest.raises(Exception, match="max_rerun_share"):
        loads("[Daemon]\nmax_rerun_share = 150%\n")


def _up(node_id: str, state: str = "busy") -> NodeExplanation:
    return NodeExplanation(node_id=node_id, name=node_id, size="spot",
                           tuple=StateTuple(state, "open", "boot exceeded", "not idle"),
                           rule="m:1", matrix_action=Action.NONE, action=None, blocked_by=None, reason="")


def test_the_memory_learns_the_rate_it_sees_and_forgets_it_when_reclaims_stop():
    core = settings(sizes=(ON_DEMAND, SPOT), reclaim_prior=10 * DAY)
    mem = ReclaimMemory()
    t = 0.0
    for day in range(20):                 # 50 spot VMs up, 10 more reclaimed each day: 0.2 per VM-day
        for hour in range(24):
            t = (day * 24 + hour) * HOUR
            notices = [_up(f"r{day}-{k}", "reclaimed") for k in range(10)] if hour == 0 else []
            mem.observe([_up(f"n{i}") for i in range(50)] + notices, core.sizes, t)
            mem.observe(notices, core.sizes, t)    # a notice seen again is the same reclaim
    rate, words = mem.rates(core, t)["spot"]
    assert 0.15 < rate * 24 < 0.25, words
    assert "prior 0.0073" in words
    for hour in range(1, 28 * 24 + 1):    # four quiet weeks: the same VMs, no reclaim
        mem.observe([_up(f"n{i}") for i in range(50)], core.sizes, t + hour * HOUR)
    assert mem.rates(core, t + 28 * DAY)["spot"][0] * 24 < 0.02
    # with no VM watched for months the rate goes back to the configured prior
    assert mem.rates(core, t + 40 * HALF_LIFE)["spot"][0] * 24 == pytest.approx(0.0073, rel=0.05)


def test_a_replay_on_a_market_faster_than_configured_keeps_long_jobs_off_spot():
    """The spot sizes say 0.0073 reclaims per VM-day; the market has 2. Without learning, the
    18-hour jobs would run on spot (0.3 % expected re-run) and be re-run again and again."""
    jobs = [SwfJob(id=i + 1, submit=i * 600.0, runtime=(18 * HOUR if i % 3 == 0 else 1200.0), cores=8,
                   requested_time=(20 * HOUR if i % 3 == 0 else 1800.0)) for i in range(60)]
    bounds = lower_bounds(jobs, 8)
    base = loads("")
    od = B.default_size(8)
    told = replace(base, core=replace(base.core, sizes=(od, spot_size(od, 0.3, 0.0073)),
                                      max_nodes=bounds.nowait_peak_nodes + 4, reclaim_prior=2 * DAY))
    learned = replay(jobs, B.ours(told), B.SimParams(spot_rate=2.0), bounds, record_series=False).figures
    blind = replay(jobs, B.ours(replace(told, core=replace(told.core, reclaim_prior=1e12))),
                   B.SimParams(spot_rate=2.0), bounds, record_series=False).figures
    assert learned.reclaims > 0 and learned.jobs_killed_by["by_us"] == 0
    assert learned.badput_core_hours < blind.badput_core_hours / 2, (learned.badput_core_hours,
                                                                     blind.badput_core_hours)


def test_the_status_page_and_metrics_show_each_spot_markets_rate_and_the_walltime_it_takes():
    from prometheus_client import generate_latest

    from nodemanager.console import render_html
    from nodemanager.console.metrics import Metrics
    from nodemanager.console.status_document import StatusView, status_document
    from nodemanager.model import CycleReport
    from tests.core_world import NOW

    core = settings(sizes=(ON_DEMAND, SPOT))
    s = snap(demand=[Demand(cpus=4, count=1, walltime=2 * DAY)],
             reclaim_rates={"spot": (0.2 / 24, "0.2 reclaims per VM-day (prior 0.0073; 7.0 reclaims in 1d 11h "
                                               "of VM time watched lately)")})
    report = CycleReport(snapshot=s, plan=plan(s, core, MATRIX))
    doc = status_document(StatusView(report=report, last_cycle_at=NOW, core=core), None, NOW)
    market = doc["spot_markets"]["spot"]
    assert market["reclaims_per_day"] == pytest.approx(0.2)
    assert 11 * HOUR < market["takes_walltime_up_to"] < 12 * HOUR
    page = render_html(doc)
    assert "spot size spot: 0.2 reclaims per VM-day (prior 0.0073" in page and "up to 11h 3" in page
    metrics = Metrics(sizes=core.sizes)
    metrics.observe(report)
    text = generate_latest(metrics.registry).decode()
    assert 'nodemanager_spot_reclaims_per_day{size="spot"} 0.2' in text
