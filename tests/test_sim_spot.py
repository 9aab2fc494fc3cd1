"""The simulator's spot market: a spot copy of the size at a price factor, reclaims
with a notice first that kill and requeue jobs as the cloud would, money and badput reported with
kills split between the cloud's reclaims and our own decisions."""

from __future__ import annotations

import json

import pytest

from nodemanager.cli import main
from nodemanager.model import Size
from nodemanager.sim.cloud import SimCloud
from nodemanager.sim.spot import NOTICE, SpotModel, spot_size

# 18 SWF fields: id submit wait run alloc avgcpu usedmem reqprocs reqtime reqmem status user ...
TRACE = """\
; Version: 2.2
; Computer: synthetic
; UnixStartTime: 0
1 1000 0 3600 4 -1 -1 4 7200 -1 1 1 1 -1 1 1 -1 -1
2 1000 0 3600 4 -1 -1 4 7200 -1 1 1 1 -1 1 1 -1 -1
3 1000 0 3600 4 -1 -1 4 7200 -1 1 1 1 -1 1 1 -1 -1
4 9000 0 1800 4 -1 -1 4 7200 -1 1 1 1 -1 1 1 -1 -1
"""


# the same jobs with no requested time: priced at the short-job limit, they go to spot at any rate
UNTIMED = TRACE.replace(" 4 7200 ", " 4 -1 ")


def simulate(tmp_path, capsys, *flags: str, trace_text: str = TRACE) -> dict:
    trace = tmp_path / "spot.swf"
    trace.write_text(trace_text)
    code = main(["simulate", "--trace", str(trace), "--cores-per-node", "4", "--jobs", "1",
                 "--json", *flags])
    out = capsys.readouterr()
    assert code == 0, out.err
    [run] = json.loads(out.out)["runs"]
    return run


def test_reclaims_kill_and_requeue_jobs_after_a_notice_that_drains_the_node(tmp_path, capsys):
    on_demand = simulate(tmp_path, capsys)
    calm = simulate(tmp_path, capsys, "--spot-price-factor", "0.3")
    harsh = simulate(tmp_path, capsys, "--spot-price-factor", "0.3", "--spot-interruptions-per-day", "12",
                     trace_text=UNTIMED)
    # asking for 2 h at 12 reclaims per VM-day (a re-run share of 55 %): on-demand, never reclaimed
    timed = simulate(tmp_path, capsys, "--spot-price-factor", "0.3", "--spot-interruptions-per-day", "12")
    assert timed["reclaims"] == 0 and timed["money"] == pytest.approx(on_demand["money"], abs=1e-3)
    # without reclaims the spot copy is the same pool at 0.3 of the money
    assert on_demand["reclaims"] == calm["reclaims"] == 0
    assert calm["paid_node_hours"] == on_demand["paid_node_hours"]
    assert calm["money"] == pytest.approx(0.3 * on_demand["money"], abs=1e-3)
    # 12 reclaims per VM-day (mean 2 h): some one-hour jobs are killed, requeued and still finish
    assert harsh["reclaims"] >= 1 and harsh["jobs_unfinished"] == 0
    assert harsh["jobs_killed_by"] == {"by_reclaim": harsh["jobs_killed"], "by_eviction": 0,
                                       "by_us": 0}
    assert harsh["jobs_killed"] >= 1
    assert harsh["badput_core_hours_by"]["by_us"] == 0.0
    assert harsh["badput_core_hours_by"]["by_reclaim"] == pytest.approx(harsh["badput_core_hours"], abs=1e-3)
    # every node is drained once: the idle ones we destroy, and the reclaimed ones at their notice
    assert harsh["drains"] == harsh["destroys"] + harsh["reclaims"]
    # a reclaimed node that still had work is replaced; one reclaimed while idle needs no boot
    assert on_demand["boots"] < harsh["boots"] <= on_demand["boots"] + harsh["reclaims"]
    assert on_demand["money"] > harsh["money"]


def test_a_spot_vm_gets_its_notice_before_the_cloud_terminates_it():
    t = [0.0]
    od = Size("od", cores=4, ram_mb=16000, price=0.2)
    spot = spot_size(od, 0.3, 24.0)
    seen: list[tuple[str, str, float]] = []
    cloud = SimCloud(clock=lambda: t[0], sizes=(od, spot), boot_delay=0.0, spot=SpotModel(),
                     on_notice=lambda nid, deadline: seen.append(("notice", nid, deadline)),
                     on_terminated=lambda nid: seen.append(("gone", nid, t[0])))
    a = cloud.create_node(spot, "a", {})
    b = cloud.create_node(od, "b", {})
    reclaim_at = SpotModel().events(a.id, spot, 0.0)[1][0]
    t[0] = reclaim_at - NOTICE - 1
    cloud.advance()
    assert seen == []
    t[0] = reclaim_at - NOTICE
    cloud.advance()
    assert seen == [("notice", a.id, reclaim_at)]
    assert cloud.next_event_time() == reclaim_at
    t[0] = reclaim_at
    cloud.advance()
    assert seen[-1] == ("gone", a.id, reclaim_at) and cloud.reclaimed == {a.id: reclaim_at}
    assert [n.id for n in cloud.list_nodes()] == [b.id]  # on-demand: never reclaimed
    assert cloud.next_event_time() is None


def test_spot_flags_are_checked(tmp_path, capsys):
    trace = tmp_path / "spot.swf"
    trace.write_text(TRACE)
    assert main(["simulate", "--trace", str(trace), "--spot-interruptions-per-day", "1"]) == 1
    assert "needs --spot-price-factor" in capsys.readouterr().err
    assert main(["simulate", "--trace", str(trace), "--spot-price-factor", "1.5"]) == 1
    assert "at most 1" in capsys.readouterr().err
