"""The vocabulary is data: a worker state added in a vocabulary file, rules for it in a matrix file
and one classifier that emits it are all it takes for plan() to act on it."""

from __future__ import annotations

import importlib
import logging
import pathlib
import re

import pytest
import requests

import policy_matrix
from nodemanager import cli
from nodemanager.configuration.settings import ManageSettings
from nodemanager.console import render_html
from nodemanager.console.status import StatusServer
from nodemanager.core import Classification, classify_worker, plan
from nodemanager.model import ItemKind
from policy_matrix import Action, MatrixError, StateTuple
from policy_matrix.vocabulary import default_vocabulary_path, load_vocabulary
from tests.core_world import NOW, node, settings, snap, worker
from tests.test_status_world import Run

SHIPPED = pathlib.Path(default_vocabulary_path()).read_text()
WORKER_LINE = next(line for line in SHIPPED.splitlines() if line.startswith("worker_state:"))


def with_state(word: str) -> str:
    """The shipped vocabulary with ``word`` appended to its worker_state line."""
    return SHIPPED.replace(WORKER_LINE + "\n", f"{WORKER_LINE}, {word}\n")
FAIL_RULES = """\
# a node whose health check fails: give it a chance while it boots, then replace it
fail | * | boot wait     | * -> None
fail | * | boot exceeded | * -> START_SHUTDOWN
"""


@pytest.fixture
def vocabulary(tmp_path):
    path = tmp_path / "site.vocabulary"
    path.write_text(with_state("fail (like down)"))
    return load_vocabulary(str(path))


@pytest.fixture
def matrix(tmp_path, vocabulary):
    path = tmp_path / "site.matrix"
    path.write_text(pathlib.Path(policy_matrix.default_path()).read_text() + FAIL_RULES)
    return policy_matrix.load(path, vocabulary=vocabulary)


@pytest.fixture
def health_adapter(monkeypatch):
    """A scripted scheduler adapter whose classifier emits ``fail`` for a failed health check,
    installed where the core takes a worker's classification."""

    def classify(w, now, stale_after):
        if w is not None and w.scheduler == "health" and w.state == "failed check":
            return Classification("fail", "health check failed")
        return classify_worker(w, now, stale_after)

    # the facts stage classifies listed nodes' workers (the core's one place for it)
    monkeypatch.setattr(importlib.import_module("nodemanager.core.facts"), "classify_worker", classify)


def test_plan_acts_on_a_worker_state_added_by_a_vocabulary_file(matrix, health_adapter):
    failing = dict(scheduler="health", state="failed check")
    nodes = [node("kept"), node("old-fail", age=7200), node("new-fail", age=60)]
    workers = [worker("kept", idle_for=10), worker("old-fail", **failing),
               worker("new-fail", registered_at=NOW - 30, **failing)]
    # min_nodes 1 with one idle node up: a `fail` node is like `down`, so not counted up and
    # destroyed without a drain whatever min_nodes says
    p = plan(snap(nodes, workers), settings(min_nodes=1), matrix)
    assert {i.node_id: (i.kind, i.cancellable) for i in p.items} == {
        "old-fail": (ItemKind.DESTROY, False)}
    why = {e.node_id: e for e in p.nodes}
    assert why["old-fail"].tuple.worker_state == "fail"
    assert why["old-fail"].reason == "matrix says START_SHUTDOWN: health check failed"
    rules = len(pathlib.Path(policy_matrix.default_path()).read_text().splitlines())
    assert why["old-fail"].rule.endswith(f"site.matrix:{rules + 3}")
    assert why["new-fail"].rule.endswith(f"site.matrix:{rules + 2}")
    assert why["new-fail"].action is None and not p.boots


def test_the_default_vocabulary_refuses_the_added_state(tmp_path, matrix):
    path = tmp_path / "site.matrix"
    with pytest.raises(MatrixError, match=r"site.matrix:\d+:1: .*unknown worker_state 'fail'"):
        policy_matrix.load(path)


def test_an_added_worker_state_must_say_which_core_state_it_is_like(tmp_path):
    path = tmp_path / "site.vocabulary"
    path.write_text(with_state("fail"))
    line = SHIPPED.splitlines().index(WORKER_LINE) + 1
    with pytest.raises(MatrixError, match=rf"site.vocabulary:{line}:14: worker_state: say which "
                                          r"of unpaired, busy, idle, down .*'fail \(like down\)'"):
        load_vocabulary(str(path))
    path.write_text(SHIPPED.replace("open, closed", "open, closed, ajar (like open)"))
    with pytest.raises(MatrixError, match="only worker_state may grow"):
        load_vocabulary(str(path))


def test_an_added_state_like_idle_counts_its_idle_grace(tmp_path, monkeypatch):
    """A state declared ``like idle`` reaches ``idle exceeded`` after the idle grace, as idle does
    (the core compared the raw state with ``idle`` and never started the grace for it)."""
    path = tmp_path / "site.vocabulary"
    path.write_text(with_state("backfill (like idle)"))
    site = tmp_path / "site.matrix"
    site.write_text("backfill | * | * | idle exceeded -> START_DRAIN\nbackfill | * | * | * -> None\n"
                    + pathlib.Path(policy_matrix.default_path()).read_text())
    matrix = policy_matrix.load(site, vocabulary=load_vocabulary(str(path)))

    def classify(w, now, stale_after):
        if w is not None and w.state == "backfill":
            return Classification("backfill", "backfill work only", now - 3600)
        return classify_worker(w, now, stale_after)

    monkeypatch.setattr(importlib.import_module("nodemanager.core.facts"), "classify_worker", classify)
    p = plan(snap([node("bf", age=7200)], [worker("bf", state="backfill")]), settings(), matrix)
    [e] = p.nodes
    assert e.tuple.worker_state == "backfill" and e.tuple.idle_grace == "idle exceeded"
    assert [i.kind for i in p.items] == [ItemKind.DRAIN]


def test_a_site_matrix_older_than_an_added_state_still_loads_and_acts_as_the_default_does(tmp_path):
    """A site matrix written for the Arvados policy matrix's words, with no rule for the states added since
    (``underused``, ``expired``: like busy; ``reclaimed``: like down), loads under the shipped
    vocabulary and takes those states' rules from the default matrix: underused and expired
    nodes are left alone, a reclaimed one is drained."""
    site = tmp_path / "site.matrix"
    site.write_text("busy | * | * | * -> None\nidle | * | * | * -> START_DRAIN\n"
                    "unpaired | * | * | * -> None\ndown | * | * | * -> START_SHUTDOWN\n")
    matrix = policy_matrix.load(site)
    for state, action in (("underused", Action.NONE), ("expired", Action.NONE),
                          ("reclaimed", Action.START_DRAIN)):
        match = matrix.lookup(StateTuple(state, "open", "boot wait", "not idle"))
        assert match.action is action and match.rule.file.endswith("default.matrix"), state


# -- one vocabulary on every surface an operator reads ------------------------------------------


def _nodes_metric(run) -> set[tuple[str, str, str, str]]:
    return {(s.labels["worker_state"], s.labels["window"], s.labels["boot_grace"], s.labels["idle_grace"])
            for f in run.metrics.registry.collect() if f.name == "nodemanager_nodes"
            for s in f.samples if s.value > 0}


def test_page_status_log_metrics_and_matrix_explain_say_one_tuple(caplog, capsys, monkeypatch):
    """A joined idle node in its boot wait and a node destroyed after our drain, over a run of the
    embedded default: the page, ``status``, ``status NODE``, the decision log and the metrics all
    show the matrix's own tuple (``joined``, ``drained by us`` beside it, never in its place);
    the tuple as the page shows it, pasted into ``matrix explain``, gives the rule the page names;
    and the give-back after our drain logs as ``drained`` while naming the rule it uses."""
    caplog.set_level(logging.INFO, "nodemanager.decisions")
    run = Run()
    server = StatusServer(ManageSettings(port=0), lambda: run.view, run.admin, run.metrics.registry,
                          clock=run.time).start()
    monkeypatch.setenv("NODEMANAGER_URL", server.url)
    joined = drained = None
    try:
        for _ in range(200):
            report = run.cycle()
            for e in report.plan.nodes:
                if joined is None and e.worker and e.tuple.as_tuple()[2] == "boot wait" \
                        and e.tuple.worker_state == "idle":
                    joined = e
                    doc = requests.get(server.url + "/status.json", timeout=5).json()
                    row = next(n for n in doc["nodes"] if n["node_id"] == e.node_id)
                    shown = str(e.tuple)
                    # the page and /status.json: the matrix's tuple first, what else is known beside
                    assert row["tuple_text"] == f"{shown} joined" and row["beside"] == ["joined"]
                    assert f"<td class='tuple'>{shown} <span class='beside'>joined</span>" in render_html(doc)
                    assert e.tuple.as_tuple() in _nodes_metric(run)
                    # `status` and `status NODE`
                    assert cli.main(["status"]) == 0
                    table = capsys.readouterr().out
                    assert re.search(rf"{re.escape(e.name)}\s.*{re.escape(shown)} joined", table)
                    assert cli.main(["status", e.name]) == 0
                    assert f"tuple {shown} joined" in capsys.readouterr().out
                    # pasted into `matrix explain`: the rule the page names
                    assert cli.main(["matrix", "explain", row["tuple_text"]]) == 0
                    out = capsys.readouterr().out
                    assert out.startswith(f"{shown} -> None") and row["rule_short"] in out
                if drained is None and e.drained and e.action is not None:
                    drained = e
            if joined and drained:
                break
            run.time.advance(5.0)
    finally:
        server.stop()
    assert joined is not None and drained is not None
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"node {joined.name} ")]
    assert any(f"; {joined.tuple} joined, rule " in m for m in lines), lines
    [give_back] = [r.getMessage() for r in caplog.records
                   if r.getMessage().startswith(f"node {drained.name} drained -> destroy: ")]
    assert give_back.endswith(f"; {drained.tuple} joined, drained by us, "
                              f"rule {drained.rule.rsplit('/', 1)[-1]} says START_SHUTDOWN")

