"""Price-aware size choice: a spot size's expected price counts the work a reclaim
makes run again, so long jobs (by requested walltime) boot on-demand and short ones spot."""

from __future__ import annotations

import math

import pytest

import policy_matrix
from nodemanager.configuration.config import loads
from nodemanager.core import plan
from nodemanager.core.pricing import expected_price
from nodemanager.model import Size
from tests.core_world import Demand, settings, snap

MATRIX = policy_matrix.load_default()
ON_DEMAND = Size("od", cores=4, ram_mb=16000, price=0.20)
# 0.3 of the on-demand price; 2 reclaims per VM-day (a harsh pool: EC2 Spot Advisor's ">20 %" band)
SPOT = Size("spot", cores=4, ram_mb=16000, price=0.06, market="spot", interruptions_per_day=2.0)


def boots(walltime: float | None, penalty: float = 0.0, share: float = math.inf) -> list[tuple[str, int]]:
    """The boots for 3 jobs; ``share``: max_rerun_share (inf: by expected price alone)."""
    s = settings(sizes=(ON_DEMAND, SPOT), reclaim_penalty=penalty, max_rerun_share=share)
    p = plan(snap(demand=[Demand(cpus=4, count=3, walltime=walltime)]), s, MATRIX)
    return [(b.size, b.count) for b in p.boots]


def test_short_jobs_boot_spot_and_long_jobs_boot_on_demand():
    assert boots(3600.0) == [("spot", 3)]              # 1 h: ~4 % re-run, still far cheaper
    assert boots(24 * 3600.0) == [("spot", 3)]         # 1 day: (e^2 - 1) / 2 = 3.2 x 0.06 = 0.19
    assert boots(36 * 3600.0) == [("od", 3)]           # 36 h: (e^3 - 1) / 3 = 6.4 x 0.06 = 0.38
    assert boots(None) == [("spot", 3)]                # no walltime given: the short-job limit
    # cheaper in money, but a day's job would be re-run 2.2 times its length: over 5 %
    assert boots(24 * 3600.0, share=0.05) == [("od", 3)]
    assert boots(3600.0, share=0.05) == [("spot", 3)]  # 4.3 % re-run


def test_a_long_job_never_fills_the_spare_cores_of_a_spot_node_booted_for_a_short_one():
    # a 1 h and a 2-day one-core job: one on-demand node holds both (the short one in its spare
    # cores), never one spot node holding both (the long job would hardly ever finish there)
    s = settings(sizes=(ON_DEMAND, SPOT))
    demand = [Demand(cpus=1, count=1, walltime=3600.0), Demand(cpus=1, count=1, walltime=172800.0)]
    for order in (demand, demand[::-1]):
        assert [(b.size, b.count) for b in plan(snap(demand=order), s, MATRIX).boots] == [("od", 1)]


def test_the_reclaim_penalty_tips_unknown_walltimes_to_on_demand():
    # each reclaim costs 3 h of node time: 0.06 x (1 + 2/24 x 3) = 0.075 < 0.20, spot still wins
    assert boots(None, penalty=3 * 3600.0) == [("spot", 3)]
    # a 3 h job: (e^0.25 - 1) = 0.28 reclaims; with 30 h each, 0.06 x (3.4 + 8.5) / 3 = 0.24
    assert boots(3 * 3600.0, penalty=30 * 3600.0) == [("od", 3)]
    assert boots(3 * 3600.0) == [("spot", 3)]


def test_expected_price():
    assert expected_price(ON_DEMAND, 86400.0, 3600.0) == 0.20
    assert expected_price(SPOT, None, 0.0) == 0.06
    assert expected_price(SPOT, 3600.0, 0.0) == pytest.approx(0.06 * 12 * (2.718281828 ** (1 / 12) - 1))
    assert expected_price(SPOT, 10 * 86400.0, 0.0) > 1e3  # would practically never finish


def test_interruptions_per_day_is_for_spot_sizes_only():
    ini = ("[Cloud]\ndriver = ec2\ncluster = site\n[Cloud Create]\nimage = i\n[Size s]\ncores = 4\nram_mb = 1\nprice = 0.1\n"
           "interruptions_per_day = 0.1\n")
    with pytest.raises(Exception, match="interruptions_per_day: only a spot size is interrupted"):
        loads(ini)
    assert loads(ini + "market = spot\n").core.sizes[0].interruptions_per_day == 0.1
    assert loads("[Daemon]\nreclaim_penalty = 10m\n").core.reclaim_penalty == 600.0


def test_a_spot_capacity_error_falls_back_to_on_demand_next_cycle():
    """EC2 answers a spot boot with MaxSpotInstanceCountExceeded: the spot size is held off for
    quota_backoff, no account quota is learned, and the next cycle boots the on-demand size."""
    from dataclasses import replace

    from libcloud.common.exceptions import exception_from_message

    from nodemanager.cloud.errors import classify
    from tests.fixtures.daemon import sim_settings
    from tests.test_controller import Loop

    base = sim_settings()
    small = base.core.sizes[0]
    spot = replace(small, name="small-spot", price=small.price * 0.3, market="spot")
    loop = Loop(replace(base, core=replace(base.core, sizes=(small, spot))))
    refused = exception_from_message(code=400, message="MaxSpotInstanceCountExceeded: Max spot "
                                     "instance count exceeded")
    loop.world.sim_cloud.fail_next("create_node", classify(refused, "create_node"))
    loop.run(30)
    boots = [(o.size, o.result) for r in loop.reports for o in r.outcomes if o.kind == "boot"]
    assert boots[0] == ("small-spot", "failed")
    assert ("small", "ok") in boots[1:] and ("small-spot", "ok") not in boots
    last = loop.reports[-1].snapshot
    assert last.blocked_sizes == frozenset({"small-spot"}) and last.quota is None


def test_walltimes_round_up_to_a_doubling_bucket_and_none_stays_none():
    from nodemanager.core.walltime import WALLTIME_BUCKETS, walltime_bucket

    assert [walltime_bucket(s) for s in (None, 0, -5, float("inf"), 1, 900, 901, 3600, 172800)] == [
        None, None, None, None, 900.0, 900.0, 1800.0, 3600.0, 230400.0]
    assert walltime_bucket(10**9) == WALLTIME_BUCKETS[-1] == 512 * 3600.0 and len(WALLTIME_BUCKETS) == 12
