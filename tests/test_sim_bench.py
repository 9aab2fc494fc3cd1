"""`nodemanager bench` on small pools: one listing and one poll per cycle, whatever the size."""

import json

from nodemanager.cli import main


def test_bench_reports_cpu_rss_and_calls_per_cycle(capsys):
    assert main(["bench", "--nodes", "200,400", "--repeat", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["nodes"] for r in rows] == [200, 400]
    for r in rows:
        assert r["cloud_call_detail"]["list_nodes"] == 1
        assert r["scheduler_call_detail"]["poll"] == 1
        assert r["actions"] > 0                       # drained nodes destroyed, idle ones drained
        assert 0 < r["cycle_cpu_s"] < 5 and r["rss_mb"] > 0
        # new drains are capped by max_concurrent_drains (10, with 3 % of the nodes draining)
        assert r["scheduler_call_detail"].get("drain", 0) == max(0, 10 - r["nodes"] * 3 // 100)


def test_bench_rejects_bad_sizes(capsys):
    assert main(["bench", "--nodes", "ten"]) == 1
    assert "--nodes 'ten'" in capsys.readouterr().err


def test_bench_progress_steps_add_up_to_its_bar():
    """`nodemanager bench` sizes its bar at one step per repeat: measure ticks exactly that often."""
    from nodemanager.commands.bench import measure

    ticks = []
    measure(100, repeat=3, tick=lambda: ticks.append(1))
    assert len(ticks) == 3


def test_bench_builds_fresh_records_by_default_and_the_same_records_plan_alike(capsys):
    """Fresh records (what real adapters hand the controller every poll) are the default; with
    ``--same-records`` the cycle decides the same actions."""
    assert main(["bench", "--nodes", "200", "--repeat", "2", "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)["rows"][0]
    assert main(["bench", "--nodes", "200", "--repeat", "2", "--json", "--same-records"]) == 0
    same = json.loads(capsys.readouterr().out)["rows"][0]
    assert fresh["fresh_records"] is True and same["fresh_records"] is False
    assert (fresh["actions"], fresh["boots"]) == (same["actions"], same["boots"])


def test_bench_plans_like_the_daemon_by_default_and_every_node_afresh_on_request(capsys):
    """The bench's controller reuses last cycle's work for unchanged records as the daemon's
    does; ``--no-reuse`` plans every node afresh, and the cycle decides the same actions with
    the same calls."""
    assert main(["bench", "--nodes", "300", "--repeat", "3", "--json"]) == 0
    reuse = json.loads(capsys.readouterr().out)["rows"][0]
    assert main(["bench", "--nodes", "300", "--repeat", "3", "--json", "--no-reuse"]) == 0
    plain = json.loads(capsys.readouterr().out)["rows"][0]
    assert reuse["reuse"] is True and plain["reuse"] is False
    assert 0 < reuse["world_rss_mb"] <= reuse["rss_mb"]
    assert [reuse[k] for k in ("actions", "boots", "cloud_call_detail", "scheduler_call_detail")] == [
        plain[k] for k in ("actions", "boots", "cloud_call_detail", "scheduler_call_detail")]


def test_bench_reads_fresh_ads_through_the_adapter_which_hands_back_unchanged_workers(capsys):
    """On fresh ads every cycle, the HTCondor adapter hands back last poll's very worker for an
    unchanged startd and a new one for each node ``--churn`` changed; a steady cycle still makes
    one listing and one poll."""
    got = {}
    for churn in ("0", "0.2"):
        assert main(["bench", "--nodes", "500", "--repeat", "3", "--json", "--churn", churn]) == 0
        got[churn] = json.loads(capsys.readouterr().out)["rows"][0]
    assert got["0"]["steady_same_workers"] > 0.97            # nothing but the odd ad sent again
    assert 0.7 < got["0.2"]["steady_same_workers"] < 0.82    # a fifth of the nodes changed
    for r in got.values():
        assert r["steady_cloud_call_detail"]["list_nodes"] == 1 == r["steady_scheduler_call_detail"]["poll"]
