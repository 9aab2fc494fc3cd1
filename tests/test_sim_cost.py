"""Issue 18 in the simulator: several sizes and money, destroy->boot pairs, breadth- and
depth-first placement, and the Karpenter-like and COBalD baselines, through the real core,
actuator, simulated cloud and simulated pool."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from nodemanager.actors.clock import ManualClock
from nodemanager.cli import main
from nodemanager.configuration.config import loads
from nodemanager.model import ItemKind, Size, Snapshot
from nodemanager.sim import baselines as B
from nodemanager.sim.baseline_layer import (Load, consolidation_candidate, karpenter,
                                            linear_control)
from nodemanager.sim.cloud import SimCloud
from nodemanager.sim.figures import destroy_boot_pairs
from nodemanager.sim.pool import Job, SimPool

# 18 SWF fields: id submit wait run alloc avgcpu usedmem reqprocs reqtime reqmem status user ...
HEAD = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"


def swf(*jobs: tuple[int, int, int]) -> str:
    """(submit, run time, cores) per job."""
    return HEAD + "".join(f"{i} {s} 0 {r} {c} -1 -1 {c} 900 -1 1 1 1 -1 1 1 -1 -1\n"
                          for i, (s, r, c) in enumerate(jobs, 1))


def simulate(tmp_path, capsys, text: str, *args: str) -> dict:
    trace = tmp_path / "t.swf"
    trace.write_text(text)
    ini = tmp_path / "30s.ini"
    ini.write_text("[Polling]\ncycle_interval = 30s\n")
    code = main(["simulate", "--trace", str(trace), "--config", str(ini), "--boot-delay", "60",
                 "--join-delay", "30", "--jobs", "1", "--json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_destroy_boot_pairs_counts_destroys_followed_within_60s_by_a_boot():
    assert destroy_boot_pairs([100.0], [160.0]) == 1          # 60 s later: a pair
    assert destroy_boot_pairs([100.0], [161.0, 90.0]) == 0     # too late; a boot before it
    assert destroy_boot_pairs([100.0, 110.0], [120.0]) == 1    # one boot pairs with one destroy
    assert destroy_boot_pairs([100.0, 110.0], [120.0, 130.0]) == 2
    assert destroy_boot_pairs([100.0], [100.0]) == 1           # the same instant counts


def test_a_node_destroyed_just_before_demand_returns_is_one_destroy_boot_pair(tmp_path, capsys):
    # The default policy, 30 s cycles on t0 + 30k with t0 = 850: jobs at 1000 run 1140-1740 on
    # one 4-core node; idle grace ends 2040, drained 2050, destroyed 2080. A job queued at 2100
    # boots a node on the cycle at 2110: 30 s after the destroy. One at 3000 is no pair.
    doc = simulate(tmp_path, capsys, swf((1000, 600, 2), (2100, 100, 1), (3000, 100, 1)),
                   "--cores-per-node", "4")
    run = doc["runs"][0]
    assert run["destroy_boot_60s"] == 1 and run["boots"] == 3
    assert {"paid_node_hours", "money", "wait_p95", "jobs_killed", "destroy_boot_60s"} <= set(run)


def test_money_is_each_vms_paid_time_at_its_sizes_price(tmp_path, capsys):
    # one 4-core size at 4 x 0.0425 an hour: money is paid node-hours times that price
    doc = simulate(tmp_path, capsys, swf((1000, 600, 2)), "--cores-per-node", "4")
    run = doc["runs"][0]
    assert run["money"] == pytest.approx(run["paid_node_hours"] * 0.17, abs=1e-4)
    assert run["money"] > 0


def test_several_sizes_boot_the_cheapest_fit_and_split_jobs_per_the_largest(tmp_path, capsys):
    # The 1-core job boots the cheapest size that fits, sim2 (0.085/h): launched 1000, destroyed
    # 2080 (1080 s). The 6-core job is split per the largest size, 4 cores: a 4-core piece (only
    # sim4 fits, 0.17/h) and a 2-core one (sim2); both launched 5020, destroyed 5590 (570 s).
    doc = simulate(tmp_path, capsys, swf((1000, 600, 1), (5000, 100, 6)), "--sizes", "2,4")
    run = doc["runs"][0]
    assert doc["cores_per_node"] == 4 and (run["wide_jobs_split"], run["pieces"]) == (1, 3)
    assert run["paid_node_hours"] == pytest.approx((1080 + 570 + 570) / 3600, abs=1e-4)
    assert run["money"] == pytest.approx(((1080 + 570) * 0.085 + 570 * 0.17) / 3600, abs=1e-4)
    assert run["jobs_completed"] == 2 and run["jobs_killed"] == 0


def test_sizes_and_cores_per_node_exclude_each_other_and_bad_sizes_are_named(tmp_path, capsys):
    trace = tmp_path / "t.swf"
    trace.write_text(swf((1000, 600, 1)))
    assert main(["simulate", "--trace", str(trace), "--sizes", "2,x"]) == 1
    assert "--sizes '2,x'" in capsys.readouterr().err
    assert main(["simulate", "--trace", str(trace), "--sizes", "2,4", "--cores-per-node", "4"]) == 1
    assert "exclude each other" in capsys.readouterr().err


SIZE = Size("m4", cores=4, ram_mb=8000)
T0 = 1_200_000.0


@pytest.mark.parametrize("placement, lands_on", [("breadth", "n1"), ("depth", "n2")])
def test_depth_first_packs_onto_the_fullest_startd_breadth_takes_the_first_in_join_order(
        placement, lands_on):
    clock = ManualClock(T0)
    pool = SimPool(clock, join_delay=0.0, negotiation_interval=0.0, placement=placement)
    cloud = SimCloud(clock=clock, sizes=(SIZE,), boot_delay=0.0, on_running=pool.vm_started)
    nodes = {name: cloud.create_node(SIZE, name, {}).id for name in ("n1", "n2")}
    pool.advance(T0)
    pool.submit(Job("short", cpus=4, ram_mb=1000, runtime=100.0, submit_time=T0))   # fills n1
    pool.advance(T0)
    pool.submit(Job("long", cpus=3, ram_mb=1000, runtime=9000.0, submit_time=T0))   # so to n2
    pool.advance(T0)
    clock.advance(200.0)
    pool.advance(T0 + 200.0)                 # "short" ended: n1 has 4 free cores, n2 has 1
    pool.submit(Job("small", cpus=1, ram_mb=500, runtime=60.0, submit_time=T0 + 200.0))
    pool.advance(T0 + 200.0)
    used = {name: SIZE.cores - pool.startd(nid).free_cpus for name, nid in nodes.items()}
    assert used == ({"n1": 1, "n2": 3} if lands_on == "n1" else {"n1": 0, "n2": 4})


def test_unknown_placement_is_refused():
    with pytest.raises(ValueError, match="placement 'sideways'"):
        SimPool(ManualClock(T0), placement="sideways")


def test_karpenter_consolidation_takes_the_best_savings_ratio_whose_jobs_fit_elsewhere():
    one_job = Load("a", 0.34, ((1, 500),), free_cpus=7, free_ram=30000)
    three_jobs = Load("b", 0.34, ((2, 500), (2, 500), (2, 500)), free_cpus=2, free_ram=30000)
    empty = Load("c", 0.34, (), free_cpus=8, free_ram=30000)
    # "a" saves most per job moved (0.34 / 2) and its job fits on "c" (or "b")
    assert consolidation_candidate([three_jobs, one_job, empty], [], allowed=1) == "a"
    # the jobs of nodes already leaving must fit too: 8 + 7 cores of other work leave no room
    # for "a"'s job, nor for "b"'s six cores
    assert consolidation_candidate([three_jobs, one_job, empty], [(8, 0), (7, 0)], 1) is None
    assert consolidation_candidate([three_jobs, one_job, empty], [], allowed=0) is None
    # without a third node "b"'s three 2-core jobs do not fit in "a"'s 7 free cores (they do:
    # 2+2+2 = 6), but "a" comes first
    assert consolidation_candidate([three_jobs, one_job], [], allowed=1) == "a"


def test_cobald_linear_controller_lowers_below_low_utilisation_else_raises_above_high_allocation():
    kw = dict(low=0.9, high=0.9, rate=1.0, minimum=1.0, maximum=72.0)
    assert linear_control(40.0, 0.5, 0.95, dt=30.0, **kw) == 10.0      # low utilisation first
    assert linear_control(40.0, 0.95, 0.95, dt=30.0, **kw) == 70.0
    assert linear_control(70.0, 1.0, 1.0, dt=30.0, **kw) == 72.0       # Limiter maximum
    assert linear_control(10.0, 0.0, 0.0, dt=30.0, **kw) == 1.0        # Limiter minimum 1
    assert linear_control(40.0, 0.9, 0.9, dt=30.0, **kw) == 40.0       # in the dead band


def _eight_cores():
    """The embedded defaults with the simulator's 8-core size, as ``simulate`` runs them."""
    base = loads("")
    return replace(base, core=replace(base.core, sizes=(B.default_size(8),)))


def _world(settings, steps: list[tuple[str | None, int, float]]):
    """A simulated cloud and pool of 8-core nodes: per step, boot a node (if named; it joins at
    once) and queue a job of so many cores and run time, matched at once; then 600 s pass."""
    clock = ManualClock(T0)
    pool = SimPool(clock, join_delay=0.0, negotiation_interval=0.0)
    size = settings.core.sizes[0]
    cloud = SimCloud(clock=clock, sizes=settings.core.sizes, boot_delay=0.0,
                     on_running=pool.vm_started)
    for k, (name, cores, runtime) in enumerate(steps):
        if name:
            cloud.create_node(size, name, {})
            pool.advance(T0)
        pool.submit(Job(f"j{k}", cpus=cores, ram_mb=1000, runtime=runtime, submit_time=T0))
        pool.advance(T0)
    clock.advance(600.0)
    pool.advance(T0 + 600.0)
    return clock, cloud, pool


def _snapshot(clock, cloud, pool) -> Snapshot:
    now = clock()
    polled = pool.poll()
    return Snapshot(now=now, polled_at={"cloud": now, "scheduler": now},
                    cloud_nodes=tuple(cloud.list_nodes()), workers=polled.workers,
                    demand=polled.demand)


def test_karpenter_drains_an_underused_node_whose_jobs_fit_on_the_others():
    settings = B.karpenter(_eight_cores()).settings
    # n1 runs two long jobs (5 and 1 cores) and a short 2-core one; n2 (n1 full) a long 1-core
    # job; the short job ends. n2 saves more per job moved (price / (1 + 1 job) against
    # price / (1 + 2)) and its one core fits in n1's two free ones: n2 is drained, gracefully
    day = 86400.0
    clock, cloud, pool = _world(settings, [("n1", 5, day), (None, 1, day), (None, 2, 300.0),
                                           ("n2", 1, day)])
    planner = karpenter(pool, settings.core.sizes)
    plan = planner(_snapshot(clock, cloud, pool), settings.core, B.baseline_matrix("karpenter"))
    (item,) = plan.items
    assert item.kind is ItemKind.DRAIN and item.node_name == "n2"
    assert "consolidation" in item.reason and not plan.boots
    # a job in the queue: Karpenter provisions, it does not consolidate
    pool.submit(Job("queued", cpus=8, ram_mb=1000, runtime=60.0, submit_time=clock()))
    plan = planner(_snapshot(clock, cloud, pool), settings.core, B.baseline_matrix("karpenter"))
    assert not any(i.kind is ItemKind.DRAIN for i in plan.items)


def test_cobald_winds_demand_up_with_no_drone_available_even_without_jobs():
    from nodemanager.sim.baseline_layer import cobald

    settings = B.cobald(_eight_cores()).settings
    clock, cloud, pool = _world(settings, [])
    planner = cobald(pool, settings.core.sizes[0])
    matrix = B.baseline_matrix("cobald")
    # COBalD starts at demand 0, which the Limiter raises to its minimum, 1 core: one drone
    (boot,) = planner(_snapshot(clock, cloud, pool), settings.core, matrix).boots
    assert boot.count == 1 and "COBalD demand 1 cores" in boot.reason
    clock.advance(30.0)
    # 30 s at 1 core/s with U = A = 1.0 (no drone): 31 cores of demand, four 8-core drones
    (boot,) = planner(_snapshot(clock, cloud, pool), settings.core, matrix).boots
    assert boot.count == min(4, settings.core.max_nodes) and "COBalD demand 31" in boot.reason


def test_compare_runs_karpenter_and_cobald_without_killing_a_job(tmp_path, capsys):
    doc = simulate(tmp_path, capsys, swf((1000, 600, 2), (1100, 3000, 1), (2100, 100, 1)),
                   "--cores-per-node", "4", "--compare")
    runs = {r["policy"]: r for r in doc["runs"]}
    assert {"karpenter", "cobald"} <= set(runs)
    assert all(r["jobs_killed"] == 0 and r["jobs_completed"] == 3 for r in runs.values())


def test_verdicts_compare_money_so_fewer_larger_nodes_do_not_look_cheaper():
    from nodemanager.sim.figures import Figures, verdicts

    zero = {f: 0 for f in ("cores_per_node", "paid_node_hours", "busy_node_hours",
                           "idle_paid_node_hours", "lower_bound_work_node_hours",
                           "lower_bound_nowait_node_hours", "cost_ratio", "wait_p50", "wait_p95",
                           "wait_p99", "wait_max", "wait_mean", "jobs_submitted",
                           "jobs_completed", "jobs_killed", "jobs_unfinished",
                           "badput_core_hours", "boots", "drains", "drain_cancels", "destroys",
                           "late_give_backs", "peak_nodes", "wall_seconds")}
    # ours: 100 node-hours of 2-core nodes (8.5); theirs: 50 node-hours of 16-core nodes (34)
    ours = Figures(**{**zero, "policy": "nodemanager", "trace": "", "window": "",
                      "paid_node_hours": 100.0, "money": 8.5, "wait_p95": 60.0})
    theirs = Figures(**{**zero, "policy": "x", "trace": "", "window": "",
                        "paid_node_hours": 50.0, "money": 34.0, "wait_p95": 30.0})
    (v,) = verdicts(ours, {"x": [theirs]})
    assert v.on_front
    cheaper = Figures(**{**zero, "policy": "x", "trace": "", "window": "",
                         "paid_node_hours": 200.0, "money": 8.0, "wait_p95": 30.0})
    (v,) = verdicts(ours, {"x": [cheaper]})
    assert not v.on_front and "money 8.00" in v.line()
