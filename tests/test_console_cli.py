"""``nodemanager status NODE`` and ``nodemanager why [NODE]`` against a running status server:
a node's decision, its one why-not sentence and its history, in this machine's local time."""

from __future__ import annotations

import time

import pytest

from nodemanager import cli
from nodemanager.text import local_when
from tests.fixtures.observability import T0


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_local_when_uses_the_local_zone_and_says_in_or_ago(berlin) -> None:
    assert local_when(T0 + 200, T0) == "16:16:40 (in 3m 20s)"
    assert local_when(T0 - 700, T0) == "16:01:40 (11m 40s ago)"
    assert local_when(T0 + 86400, T0) == "2026-09-22 16:13:20 (in 24h 00m)"


def test_status_node_shows_decision_why_not_and_history(status_server, berlin, monkeypatch,
                                                         capsys) -> None:
    monkeypatch.setenv("NODEMANAGER_URL", status_server.url)
    assert cli.main(["status", "nm-small-5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "node nm-small-5 (i-min, small)"
    assert "rule default.matrix:30: matrix says START_DRAIN, planned nothing, blocked by min_nodes" in out
    assert ("why not: nm-small-5 is kept: min_nodes: draining it would leave fewer than "
            "min_nodes=6 nodes (rule default.matrix:30 says START_DRAIN)") in out
    history = out[out.index("history (latest first):") + 1:]
    assert len(history) == 3
    assert history[0].startswith("  16:01:40 (11m 40s ago)  decision  (idle, open")
    assert history[2].startswith("  15:33:20 (40m 00s ago)  decision  (busy, closed")
    assert cli.main(["status", "w3"]) == 0   # by worker name; next change in local time
    assert "next change: idle grace ends 16:16:40 (in 3m 20s)" in capsys.readouterr().out
    assert cli.main(["status", "nm-small-0"]) == 0   # destroyed 23m ago: still there
    out = capsys.readouterr().out
    assert "left the cloud listing 15:50:00 (23m 20s ago)" in out and "destroy ok: destroyed" in out


def test_status_table_shows_next_change_in_local_time(status_server, berlin, monkeypatch,
                                                      capsys) -> None:
    monkeypatch.setenv("NODEMANAGER_URL", status_server.url)
    assert cli.main(["status"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("nm-large-1"))
    assert "idle grace ends 16:16:40 (in 3m 20s)" in line and "UTC" not in line


def test_why_names_the_binding_reason(status_server, monkeypatch, capsys) -> None:
    monkeypatch.setenv("NODEMANAGER_URL", status_server.url)
    assert cli.main(["why", "i-held"]) == 0
    assert capsys.readouterr().out.strip() == (
        "nm-small-4 is kept: held: held by an operator (rule default.matrix:30 says START_DRAIN)")
    assert cli.main(["why", "nm-small-2"]) == 0
    assert capsys.readouterr().out.strip() == (
        "nm-small-2 is being given back: drain (idle past its grace in an open window: drain)")
    assert cli.main(["why"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("[max_nodes] 1 job(s) of 16 cpus, 0 MB: 1 more node(s) of large not booted: "
                      "max_nodes 9 reached (9 nodes incl. booting)")
    assert "[min_nodes] nm-small-5 is kept: min_nodes: draining it would leave fewer than " \
           "min_nodes=6 nodes (rule default.matrix:30 says START_DRAIN)" in out
    assert len(out) == 6   # one demand + five kept nodes
    assert cli.main(["why", "nope"]) == 1
    assert "no node 'nope'" in capsys.readouterr().err


def test_status_counts_the_booting_vms_and_says_one_node(status_server, monkeypatch, capsys) -> None:
    from dataclasses import replace

    from nodemanager.model import Demand

    monkeypatch.setenv("NODEMANAGER_URL", status_server.url)
    assert cli.main(["status"]) == 0
    assert "8 nodes, 1 booting; queue 7 jobs, 37 cores" in capsys.readouterr().out.splitlines()
    # the same pool down to its booting VM and one queued one-core job
    view = status_server.holder["view"]
    r = view.report
    one = replace(r, snapshot=replace(r.snapshot, cloud_nodes=tuple(n for n in r.snapshot.cloud_nodes
                                                                    if n.id == "i-boot"),
                                      in_flight=(), demand=(Demand(cpus=1, count=1),)),
                  plan=replace(r.plan, nodes=tuple(e for e in r.plan.nodes if e.node_id == "i-boot"),
                               items=(), boots=(), unmet=()), outcomes=())
    status_server.holder["view"] = replace(view, report=one)
    assert cli.main(["status"]) == 0
    assert "1 node, 1 booting; queue 1 job, 1 core" in capsys.readouterr().out.splitlines()


def test_a_node_held_back_by_a_budget_names_it_in_the_status_table_json_and_page(status_server, monkeypatch,
                                                                                  capsys) -> None:
    import requests

    monkeypatch.setenv("NODEMANAGER_URL", status_server.url)
    view = status_server.holder["view"]
    r = view.report
    nodes = tuple(e._replace(blocked_by="budget", budget="working-hours",
                             reason="drain held back by budget working-hours (matrix_drain: 1 node(s) at once "
                                    "allowed, 1 going)") if e.node_id == "i-min" else e for e in r.plan.nodes)
    status_server.holder["view"] = replace_report(view, r, nodes)
    assert cli.main(["status"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("nm-small-5"))
    assert "budget working-hours" in line
    doc = requests.get(status_server.url + "/status.json", timeout=5).json()
    assert {n["node_id"]: n["budget"] for n in doc["nodes"]}["i-min"] == "working-hours"
    assert {n["budget"] for n in doc["nodes"] if n["node_id"] != "i-min"} == {None}
    page = requests.get(status_server.url + "/", timeout=5).text
    row = page[page.index("<tr class='node blocked' data-node='i-min'>"):].split("</tr>", 1)[0]
    assert ">budget working-hours<" in row


def replace_report(view, report, nodes):
    from dataclasses import replace
    return replace(view, report=replace(report, plan=replace(report.plan, nodes=nodes)))
