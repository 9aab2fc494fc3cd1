"""`nodemanager plan` under ``max_total_price``: the cap limits what is booted, it does not stop
booting. When the size cheapest per job no longer fits the money left, a cheaper node that does
fit is booted, and the plan says how many jobs stay queued."""

import json

from nodemanager.cli import main

NOW = 1767225600

CONFIG = """[Daemon]
max_nodes = 20
max_total_price = {cap}

[Size small]
cores = 2
ram_mb = 8000
price = 0.10

[Size big]
cores = 8
ram_mb = 32000
price = 0.35
"""


def _busy(i: int) -> tuple[dict, dict]:
    node = {"id": f"i-{i}", "name": f"small-{i}", "size": "small", "launched_at": NOW - 3600}
    worker = {"name": f"small-{i}", "scheduler": "slurm", "state": "busy", "cloud_id": f"i-{i}",
              "last_heard": NOW - 5, "registered_at": NOW - 3500, "cpus": 2, "cpus_busy": 2,
              "ram_mb": 8000, "running_jobs": 1}
    return node, worker


def _plan(tmp_path, capsys, cap: float, jobs: int) -> dict:
    (tmp_path / "nm.ini").write_text(CONFIG.format(cap=cap))
    pairs = [_busy(i) for i in (1, 2)]
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": NOW, "polled_at": {"cloud": NOW - 5, "scheduler": NOW - 5},
        "cloud_nodes": [n for n, _ in pairs], "workers": [w for _, w in pairs],
        "demand": [{"cpus": 2, "ram_mb": 1000, "count": jobs}]}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config",
                 str(tmp_path / "nm.ini"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_a_price_cap_boots_the_cheaper_nodes_that_fit_and_says_what_stays_queued(tmp_path, capsys):
    """0.2/h in use, 0.5/h allowed: no big node (0.35/h) fits the 0.3/h left, three small ones do;
    7 of the 10 jobs stay queued, and the plan says so with the cap that binds."""
    out = _plan(tmp_path, capsys, 0.5, 10)
    assert [(b["size"], b["count"]) for b in out["boots"]] == [("small", 3)]
    [unmet] = out["unmet"]
    assert unmet["reason"] == "max_total_price" and unmet["jobs"] == 7
    assert unmet["text"].startswith("7 job(s) of 2 cpus, 1000 MB stay queued")
    assert "max_total_price 0.5/h reached" in unmet["text"]


def test_money_left_after_the_dense_size_goes_to_a_cheaper_node(tmp_path, capsys):
    """0.45/h left: one big node (4 jobs, 0.35/h), then one small node with the 0.10/h left over:
    5 jobs start, where three small nodes would start 3 and one big node alone 4."""
    out = _plan(tmp_path, capsys, 0.65, 10)
    assert sorted((b["size"], b["count"]) for b in out["boots"]) == [("big", 1), ("small", 1)]
    [unmet] = out["unmet"]
    assert unmet["reason"] == "max_total_price" and unmet["jobs"] == 5


def test_under_no_cap_the_dense_size_is_booted(tmp_path, capsys):
    out = _plan(tmp_path, capsys, 0, 10)
    assert sorted((b["size"], b["count"]) for b in out["boots"]) == [("big", 2), ("small", 2)]
    assert out["unmet"] == []
