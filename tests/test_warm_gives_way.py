"""Warm capacity never starves queued work: a warm idle node holding the last ``max_nodes`` slot (or
the money under ``max_total_price``) that a queued job of another size needs gives way: it is no
longer kept warm, goes as any idle node, and the job's note names it. Through `nodemanager plan`
on a snapshot and a short simulated replay."""

import json

from nodemanager.cli import main
from tests.test_warm_capacity import _boots, _node, _plan

BIG_JOB = {"cpus": 16, "ram_mb": 1000, "count": 1}   # only [Size big] runs it


def test_a_warm_node_holding_the_last_slot_gives_way_to_a_job_of_another_size(tmp_path, capsys):
    out = _plan(tmp_path, capsys, warm="warm_nodes = 1", nodes=[("s1", "idle", 7200)], demand=[BIG_JOB],
                max_nodes=1)
    s1 = _node(out, "s1")
    assert s1["action"] == "drain" and "kept warm" not in s1["reason"]
    [unmet] = [u for u in out["unmet"] if u["reason"] == "max_nodes" and u["jobs"] == 1]
    assert "max_nodes 1 reached" in unmet["text"]
    assert "held by warm node(s) i-s1 ([Size small]), which give way" in unmet["text"]
    # without the job the warm node stays
    out = _plan(tmp_path, capsys, warm="warm_nodes = 1", nodes=[("s1", "idle", 7200)], max_nodes=1)
    assert _node(out, "s1")["action"] is None and "kept warm" in _node(out, "s1")["reason"]


def test_warm_nodes_give_way_under_the_price_cap_as_many_as_free_the_money(tmp_path, capsys):
    # 3 warm small nodes (0.2/h each) of a 1.2/h cap: a big node (0.8/h) needs one of them to go
    nodes = [("s1", "idle", 7200), ("s2", "idle", 7100), ("s3", "idle", 7000)]
    out = _plan(tmp_path, capsys, warm="warm_nodes = 3", nodes=nodes, demand=[BIG_JOB],
                daemon="max_total_price = 1.2")
    assert _boots(out) == {}
    going = sorted(n["name"] for n in out["nodes"] if n["action"] == "drain")
    assert going == ["s3"]                            # the youngest; the longest-running stay warm
    assert "kept warm" in _node(out, "s1")["reason"] and "kept warm" in _node(out, "s2")["reason"]
    [unmet] = [u for u in out["unmet"] if u["reason"] == "max_total_price"]
    assert "held by warm node(s) i-s3 ([Size small]), which give way" in unmet["text"]


_SWF = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"


def test_a_replay_runs_the_big_job_a_warm_node_would_have_starved(tmp_path, capsys):
    trace = tmp_path / "t.swf"
    trace.write_text(_SWF + "1 3000 0 600 16 -1 -1 16 900 -1 1 1 1 -1 1 1 -1 -1\n")
    ini = tmp_path / "warm.ini"
    # a long idle grace: the warm node must not wait for it to end before making room
    ini.write_text("[Daemon]\nmax_nodes = 1\nidle_grace = 30m\n\n"
                   "[Size small]\ncores = 4\nram_mb = 16384\nprice = 0.2\nwarm_nodes = 1\n\n"
                   "[Size big]\ncores = 16\nram_mb = 65536\nprice = 0.8\n")
    code = main(["simulate", "--trace", str(trace), "--config", str(ini), "--boot-delay", "60",
                 "--join-delay", "30", "--jobs", "1", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    [run] = json.loads(out.out)["runs"]
    assert (run["jobs_completed"], run["jobs_unfinished"]) == (1, 0), run
    # drained in the job's first cycle, destroyed at the next cloud listing (60s), then the big
    # node's boot (60s) and join (30s): two 10s cycles of slack, far from the 30m idle grace
    assert run["wait_max"] <= 60 + 60 + 30 + 2 * 10, run
    assert run["peak_nodes"] == 1 and run["boots"] == 2
