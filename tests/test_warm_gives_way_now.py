"""A warm node that gives way to queued jobs is drained in the same cycle, not at the end of its
idle grace, and destroyed once drained, under the disruption budgets; a node running a job is never
one. Through `nodemanager plan` on a snapshot."""

import json

from nodemanager.cli import main
from tests.test_warm_capacity import CONFIG, NOW

BIG_JOB = {"cpus": 16, "ram_mb": 1000, "count": 1}   # only [Size big] runs it
GIVES_WAY = "warm [Size small] node gives way to queued [Size big] jobs held by max_nodes"
OURS = "nodemanager: " + GIVES_WAY


def _plan(tmp_path, capsys, worker=None, daemon="", demand=(BIG_JOB,), in_flight=(), fmt="json"):
    # s1: up two hours, idle for the last minute only (well inside its 5m idle grace)
    (tmp_path / "nm.ini").write_text(CONFIG.format(warm="warm_nodes = 1", max_nodes=1, daemon=daemon))
    w = {"name": "s1", "scheduler": "slurm", "state": "idle", "last_heard": NOW - 5, "cpus": 4, "cpus_busy": 0,
         "ram_mb": 16000, "state_since": NOW - 60, **(worker or {})}
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": NOW, "polled_at": {"cloud": NOW - 5, "scheduler": NOW - 5},
        "cloud_nodes": [{"id": "i-s1", "name": "s1", "size": "small", "launched_at": NOW - 7200}],
        "workers": [w], "demand": list(demand), "in_flight": list(in_flight)}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config", str(tmp_path / "nm.ini"),
                 "--format", fmt])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out) if fmt == "json" else out


def _items(out):
    return [(i["kind"], i["name"]) for i in out["items"]]


def test_a_warm_node_inside_its_idle_grace_is_drained_in_the_cycle_it_gives_way(tmp_path, capsys):
    out = _plan(tmp_path, capsys)
    assert _items(out) == [("drain", "s1")]
    [item] = out["items"]
    assert item["reason"].startswith(GIVES_WAY)
    [unmet] = out["unmet"]
    assert "held by warm node(s) i-s1 ([Size small]), which give way" in unmet["text"]
    # the operator's line names the reason
    assert f"i-s1: {GIVES_WAY}: drained now" in _plan(tmp_path, capsys, fmt="table")
    # no queued job held back: it stays warm
    out = _plan(tmp_path, capsys, demand=())
    assert _items(out) == [] and "gives way" not in out["nodes"][0]["reason"]


def test_once_drained_it_is_destroyed(tmp_path, capsys):
    drained = {"state": "drain", "draining": True, "drain_reason": OURS, "drain_since": NOW - 20}
    out = _plan(tmp_path, capsys, worker=drained, in_flight=[{"node": "i-s1", "action": "drain", "since": NOW - 20}])
    assert _items(out) == [("destroy", "s1")]


def test_a_budget_holds_it_back_and_a_busy_node_never_gives_way(tmp_path, capsys):
    budget = "\n[Budget daytime]\nnodes = 0\nreasons = warm_gives_way\n"
    out = _plan(tmp_path, capsys, daemon=budget)
    assert _items(out) == []
    node = out["nodes"][0]
    assert node["blocked_by"] == "budget" and node["budget"] == "daytime"
    assert "held back by budget daytime (warm_gives_way" in node["reason"]
    # a node that runs a job is not warm capacity: nothing gives way, nothing is drained
    out = _plan(tmp_path, capsys, worker={"state": "allocated", "cpus_busy": 4})
    assert _items(out) == []
    assert "which give way" not in out["unmet"][0]["text"]


def test_warm_nodes_that_cannot_free_one_node_of_the_money_stay_warm(tmp_path, capsys):
    from tests.test_warm_capacity import _plan as plan_nodes
    # 3 warm small nodes (0.2/h each) under a 0.7/h cap: a big node (0.8/h) would need 0.7 freed,
    # more than all three hold; draining them would starve warm capacity for nothing
    nodes = [("s1", "idle", 7200), ("s2", "idle", 7100), ("s3", "idle", 7000)]
    out = plan_nodes(tmp_path, capsys, warm="warm_nodes = 3", nodes=nodes, demand=[BIG_JOB],
                     daemon="max_total_price = 0.7")
    assert _items(out) == []
    assert all("kept warm" in n["reason"] for n in out["nodes"])
    [unmet] = out["unmet"]
    assert unmet["reason"] == "max_total_price" and "give way" not in unmet["text"]
