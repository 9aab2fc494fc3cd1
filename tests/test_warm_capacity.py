"""Warm capacity through `nodemanager plan`: a size's idle nodes kept up beyond the demand
(`[Size] warm_nodes`, `warm_cores`), booted within max_nodes and the price cap, and the warm ones
never drained by idle grace (which would boot them again: a loop)."""

import json

from nodemanager.cli import main

NOW = 1767225600
CONFIG = """[Daemon]
idle_grace = 5m
max_nodes = {max_nodes}
{daemon}

[Size small]
cores = 4
ram_mb = 16000
price = 0.20
{warm}

[Size big]
cores = 16
ram_mb = 64000
price = 0.80
"""


def _plan(tmp_path, capsys, warm="warm_nodes = 2", nodes=(), demand=(), in_flight=(), max_nodes=10, daemon="",
          now=NOW):
    (tmp_path / "nm.ini").write_text(CONFIG.format(warm=warm, max_nodes=max_nodes, daemon=daemon))
    cloud = [{"id": f"i-{n}", "name": n, "size": "small", "launched_at": now - age} for n, _, age in nodes]
    workers = [{"name": n, "scheduler": "slurm", "state": state, "last_heard": now - 5, "cpus": 4,
                "cpus_busy": 4 if state == "allocated" else 0, "ram_mb": 16000,
                "state_since": now - idle} for n, state, idle in ((n, s, min(a, 3600)) for n, s, a in nodes)]
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": now, "polled_at": {"cloud": now - 5, "scheduler": now - 5},
        "cloud_nodes": cloud, "workers": workers, "demand": list(demand), "in_flight": list(in_flight)}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config",
                 str(tmp_path / "nm.ini"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _boots(out):
    return {b["size"]: b["count"] for b in out["boots"]}


def _node(out, name):
    return next(n for n in out["nodes"] if n["name"] == name)


def test_an_empty_pool_boots_the_warm_nodes_and_without_the_option_nothing(tmp_path, capsys):
    out = _plan(tmp_path, capsys)
    assert _boots(out) == {"small": 2}
    assert "[Size small] warm 2 idle node(s) (0 idle or booting)" in out["boots"][0]["reason"]
    assert _boots(_plan(tmp_path, capsys, warm="")) == {}


def test_idle_warm_nodes_past_idle_grace_are_kept_and_the_oldest_are_the_warm_ones(tmp_path, capsys):
    # three idle nodes, all past idle grace: the two longest running stay, the third is drained
    out = _plan(tmp_path, capsys, nodes=[("a", "idle", 7200), ("b", "idle", 5000), ("c", "idle", 3000)])
    assert _boots(out) == {}
    assert {(i["kind"], i["name"]) for i in out["items"]} == {("drain", "c")}
    for n in "ab":
        assert _node(out, n)["blocked_by"] == "warm"
        assert "kept warm: [Size small] warm 2" in _node(out, n)["reason"]
    # without warm capacity all three go: the drain-then-reboot loop warm capacity prevents
    out = _plan(tmp_path, capsys, warm="", nodes=[("a", "idle", 7200), ("b", "idle", 5000), ("c", "idle", 3000)])
    assert {i["name"] for i in out["items"]} == {"a", "b", "c"}


def test_a_job_taking_a_warm_node_boots_a_replacement_and_busy_nodes_are_not_warm(tmp_path, capsys):
    out = _plan(tmp_path, capsys, nodes=[("a", "idle", 7200), ("b", "allocated", 5000)],
                demand=[{"cpus": 4, "ram_mb": 1000, "count": 1}])
    # the job goes on a; b is busy: two warm nodes to boot
    assert _boots(out) == {"small": 2}
    assert _node(out, "a")["blocked_by"] == "demand"  # the job needs it, not warm capacity


def test_boots_not_listed_yet_count_unless_demand_took_them(tmp_path, capsys):
    flight = [{"node": f"req-{k}", "action": "boot", "since": NOW - 30, "size": "small"} for k in range(2)]
    assert _boots(_plan(tmp_path, capsys, in_flight=flight)) == {}
    out = _plan(tmp_path, capsys, in_flight=flight, demand=[{"cpus": 4, "ram_mb": 1000, "count": 1}])
    assert _boots(out) == {"small": 1}


def test_warm_cores_count_in_whole_nodes_and_max_nodes_and_the_price_cap_bind(tmp_path, capsys):
    assert _boots(_plan(tmp_path, capsys, warm="warm_cores = 9")) == {"small": 3}
    out = _plan(tmp_path, capsys, warm="warm_nodes = 4", max_nodes=1)
    assert _boots(out) == {"small": 1}
    assert any("warm 4 idle node(s): 3 node(s) not booted: max_nodes 1 reached" in n for n in out["notes"])
    out = _plan(tmp_path, capsys, warm="warm_nodes = 4", daemon="max_total_price = 0.5")
    assert _boots(out) == {"small": 2}
    assert any("warm 4 idle node(s): 2 node(s) not booted: max_total_price 0.5/h" in n for n in out["notes"])


# the simulator replays warm capacity: (submit, run time, cores) jobs in SWF
_SWF_HEAD = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"


def _simulate(tmp_path, capsys, jobs, *args):
    trace = tmp_path / "t.swf"
    trace.write_text(_SWF_HEAD + "".join(f"{i} {s} 0 {r} {c} -1 -1 {c} 900 -1 1 1 1 -1 1 1 -1 -1\n"
                                         for i, (s, r, c) in enumerate(jobs, 1)))
    code = main(["simulate", "--trace", str(trace), "--boot-delay", "60", "--join-delay", "30",
                 "--cores-per-node", "4", "--max-nodes", "3", "--jobs", "1", "--json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_the_simulator_replays_warm_nodes_less_wait_more_node_hours_and_no_reboot_loop(tmp_path, capsys):
    # single 4-core jobs an hour apart: without warm capacity each waits a boot, and the node is
    # given back in between; with one warm node each starts on it and one more is booted
    jobs = [(1000 + 3600 * k, 600, 4) for k in range(6)]
    doc = _simulate(tmp_path, capsys, jobs, "--sweep", "warm_nodes=0,1")
    cold, warm = doc["sweep"]
    assert (cold["params"]["sweep"], warm["params"]["sweep"]) == ({"warm_nodes": 0}, {"warm_nodes": 1})
    assert cold["wait_p50"] >= 90 and warm["wait_p95"] < cold["wait_p50"]
    assert warm["paid_node_hours"] > cold["paid_node_hours"]
    # the warm node is never given back: each job takes it, one more node is booted meanwhile, and
    # only that one goes once both are idle (no destroy followed by a boot)
    assert warm["destroy_boot_60s"] == 0
    assert warm["boots"] == 1 + len(jobs) and warm["destroys"] == len(jobs)


def test_a_warm_schedule_keeps_warm_capacity_only_inside_its_windows(tmp_path, capsys):
    hours = ("warm_nodes = 2\nwarm_schedule = 0 8 * * 1-5\nwarm_duration = 10h\n"
             "warm_time_zone = Europe/Paris")
    # NOW is Thursday 2026-01-01 00:00 UTC, 01:00 in Paris: outside working hours, nothing kept
    idle = [("a", "idle", 7200), ("b", "idle", 5000)]
    out = _plan(tmp_path, capsys, warm=hours, nodes=idle)
    assert _boots(out) == {} and {i["name"] for i in out["items"]} == {"a", "b"}
    inside = _plan(tmp_path, capsys, warm=hours, nodes=idle, now=NOW + 8 * 3600)  # 09:00 in Paris
    assert inside["items"] == []
    assert "'0 8 * * 1-5' for 10h (Europe/Paris)" in _node(inside, "a")["reason"]


def test_a_bad_warm_schedule_is_an_error_naming_the_option(tmp_path, capsys):
    (tmp_path / "nm.ini").write_text(CONFIG.format(warm="warm_nodes = 1\nwarm_schedule = 0 25 * * *\n"
                                                        "warm_duration = 1h", max_nodes=10, daemon=""))
    assert main(["plan", "--snapshot", "-", "--config", str(tmp_path / "nm.ini")]) == 1
    err = capsys.readouterr().err
    assert "[Size small] warm_schedule" in err and "hour" in err
    (tmp_path / "nm.ini").write_text(CONFIG.format(warm="warm_nodes = 1\nwarm_schedule = 0 8 * * *",
                                                   max_nodes=10, daemon=""))
    assert main(["plan", "--snapshot", "-", "--config", str(tmp_path / "nm.ini")]) == 1
    assert "needs warm_duration" in capsys.readouterr().err


def _monday_warm_hour(tmp_path, capsys, jobs):
    """Cold and warm (one node) replays of ``jobs`` (submit, run time, cores) from Monday 2026-01-05
    00:00 UTC, the warm node kept on Mondays 02:00-03:00 only."""
    monday = 1767571200
    trace = tmp_path / "t.swf"
    trace.write_text(f"; Version: 2.2\n; UnixStartTime: {monday}\n" + "".join(
        f"{i} {s} 0 {r} {c} -1 -1 {c} 900 -1 1 1 1 -1 1 1 -1 -1\n" for i, (s, r, c) in enumerate(jobs, 1)))
    ini = tmp_path / "warm.ini"
    ini.write_text("[Daemon]\nmax_nodes = 3\n\n[Size sim4]\ncores = 4\nram_mb = 16384\nprice = 0.17\n"
                   "billing_period = 0\nmin_charge = 60\nwarm_schedule = 0 2 * * mon\nwarm_duration = 1h\n"
                   "warm_time_zone = UTC\n")
    code = main(["simulate", "--trace", str(trace), "--config", str(ini), "--boot-delay", "60",
                 "--join-delay", "30", "--jobs", "1", "--json", "--sweep", "warm_nodes=0,1"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)["sweep"]


def test_the_simulator_reads_a_warm_schedule_on_the_traces_own_clock(tmp_path, capsys):
    cold, warm = _monday_warm_hour(tmp_path, capsys, [(1000, 600, 4), (9000, 600, 4), (18000, 600, 4)])
    # the window's hour, and the job at 02:30 starts on the warm node instead of waiting a boot
    extra = warm["paid_node_hours"] - cold["paid_node_hours"]
    assert 0.5 < extra < 1.2
    assert warm["wait_mean"] < cold["wait_mean"]


def test_a_scheduled_warm_replay_skips_cycles_and_boots_at_the_windows_start(tmp_path, capsys):
    # the replay skips the quiet cycles of its 9 hours (about 1,000 on the grid) yet runs one at
    # 02:00, when no node's tuple changes, to boot the warm node the job at 02:30 then starts on
    cold, warm = _monday_warm_hour(tmp_path, capsys, [(1000, 600, 4), (9000, 600, 4), (30000, 600, 4)])
    assert warm["cycles"] < 100 and warm["cycles"] < cold["cycles"] + 10, (cold["cycles"], warm["cycles"])
    # one job of three waited the pool's negotiation only, not a boot and join (40 s against 100 s)
    assert 3 * (cold["wait_mean"] - warm["wait_mean"]) >= 50, (cold["wait_mean"], warm["wait_mean"])
    assert warm["boots"] == cold["boots"] + 1
