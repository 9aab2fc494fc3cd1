"""Budgets where an operator reads the matrix: ``nodemanager plan`` names the ``[Budget NAME]``
holding a node back beside the rule that matched it, and ``nodemanager matrix explain --config``
names the budgets that limit what a rule gives back (none for a node that is no capacity)."""

import json
import pathlib

from nodemanager.cli import main
from tests.test_disruption_budgets import SIZES, WORKDAY, WORKING_HOURS, _idle


def _plan(tmp_path, capsys, fmt):
    (tmp_path / "nm.ini").write_text(SIZES + WORKING_HOURS)
    pairs = [_idle(i, WORKDAY) for i in range(1, 4)]
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": WORKDAY, "polled_at": {"cloud": WORKDAY - 5, "scheduler": WORKDAY - 5},
        "cloud_nodes": [n for n, _ in pairs], "workers": [w for _, w in pairs], "demand": []}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config", str(tmp_path / "nm.ini"),
                 "--format", fmt])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_plan_names_the_budget_beside_the_matched_rule(tmp_path, capsys):
    doc = json.loads(_plan(tmp_path, capsys, "json"))
    held = [n for n in doc["nodes"] if n["blocked_by"] == "budget"]
    assert len(held) == 2 and {n["budget"] for n in held} == {"working-hours"}
    assert [n["budget"] for n in doc["nodes"] if n["action"] == "drain"] == [None]
    rows = [line.split() for line in _plan(tmp_path, capsys, "table").splitlines()
            if line.startswith("i-")]
    held_rows = [r for r in rows if r[-2:] == ["budget", "working-hours"]]
    assert len(held_rows) == 2
    assert all("default.matrix:34" in r and "START_DRAIN" in r for r in held_rows)


def _explain(tmp_path, capsys, *words, fmt="text", matrix=()):
    (tmp_path / "nm.ini").write_text(SIZES + WORKING_HOURS)
    code = main(["matrix", "explain", "--config", str(tmp_path / "nm.ini"), "--format", fmt, *matrix, *words])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_explain_names_the_budgets_that_limit_the_rules_action(tmp_path, capsys):
    out = _explain(tmp_path, capsys, "idle", "open", "boot", "exceeded", "idle", "exceeded").splitlines()
    assert out[3:] == [
        "START_DRAIN gives the node back as matrix_drain, limited by:",
        "  budget working-hours: 1 node(s) at once for matrix_drain, matrix_shutdown, "
        "during '0 8 * * mon-fri' for 10h (Europe/Paris)",
        "  budget quarter: 25% at once for every budgeted reason"]
    # docs/configuration.md shows these lines for the same sections
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    sample = doc.split("$ nodemanager matrix explain --config", 1)[1].split("```", 1)[0].splitlines()
    assert sample[4:7] == out[3:]
    # a down node is no capacity: no budget holds its shutdown back; a busy node's rule gives nothing back
    assert _explain(tmp_path, capsys, "down", "open", "boot_exceeded", "not_idle").splitlines()[-1] == \
        "budgets: none apply (a down node is no capacity)"
    assert _explain(tmp_path, capsys, "busy", "open", "boot_exceeded", "not_idle").splitlines()[-1] == \
        "budgets: none apply (it gives nothing back)"
    # consolidation's drains (the cost matrix) count against the budgets naming consolidate
    doc = json.loads(_explain(tmp_path, capsys, "underused", "open", "boot_exceeded", "not_idle", fmt="json",
                              matrix=("--matrix", "policy_matrix/cost.matrix")))
    assert doc["action"] == "START_DRAIN"
    assert doc["budgets"] == [{"reason": "consolidate", "limited_by": ["quarter", "no-consolidation"]}]


def test_explain_without_a_configuration_says_nothing_of_budgets(capsys):
    assert main(["matrix", "explain", "idle", "open", "boot", "exceeded", "idle", "exceeded"]) == 0
    out = capsys.readouterr().out
    assert "budget" not in out and out.count("\n") == 3, out
