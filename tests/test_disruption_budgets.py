"""``[Budget NAME]`` sections through ``nodemanager plan`` on a snapshot: a budget limits how many
nodes are given back at once for the reasons it names, only inside its schedule's windows (in its
time zone); the most restrictive one binds and the plan names it; nodes that are no capacity are
not budgeted. And a size's own ``min_nodes`` holds its drains back as the global one does."""

import json
from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from nodemanager.cli import main
from nodemanager.configuration import ConfigError, loads

# Thursday 2026-01-08 10:00 in Paris (09:00 UTC): inside the working-hours window
WORKDAY = datetime(2026, 1, 8, 10, 0, tzinfo=ZoneInfo("Europe/Paris")).timestamp()
NIGHT = datetime(2026, 1, 8, 20, 0, tzinfo=ZoneInfo("Europe/Paris")).timestamp()

SIZES = """[Size small]
cores = 2
ram_mb = 8000
price = 0.10
"""

WORKING_HOURS = """
[Budget working-hours]
reasons = matrix_drain, matrix_shutdown
nodes = 1
schedule = 0 8 * * mon-fri
duration = 10h
time_zone = Europe/Paris

[Budget quarter]
nodes = 25%

[Budget no-consolidation]
reasons = consolidate
nodes = 0
"""


def _idle(i, now, state="idle"):
    node = {"id": f"i-{i}", "name": f"small-{i}", "size": "small", "launched_at": now - 7200}
    worker = {"name": f"small-{i}", "scheduler": "slurm", "state": state, "cloud_id": f"i-{i}",
              "last_heard": now - 5, "registered_at": now - 7100, "state_since": now - 6000, "cpus": 2,
              "cpus_busy": 0, "ram_mb": 8000, "running_jobs": 0}
    return node, worker


def _plan(tmp_path, capsys, config, now, pairs):
    (tmp_path / "nm.ini").write_text(config)
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": now, "polled_at": {"cloud": now - 5, "scheduler": now - 5},
        "cloud_nodes": [n for n, _ in pairs], "workers": [w for _, w in pairs], "demand": []}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config",
                 str(tmp_path / "nm.ini"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _acts(out):
    return {n["id"]: (n["action"] or "-", n["blocked_by"] or "-") for n in out["nodes"]}


def test_a_budget_limits_give_backs_inside_its_window_only(tmp_path, capsys):
    idle = [_idle(i, WORKDAY) for i in range(1, 9)]
    out = _plan(tmp_path, capsys, SIZES + WORKING_HOURS, WORKDAY, idle)
    acts = _acts(out)
    assert Counter(acts.values()) == {("drain", "-"): 1, ("-", "budget"): 7}
    held = next(n for n in out["nodes"] if n["blocked_by"] == "budget")
    assert "held back by budget working-hours (matrix_drain: 1 node(s) at once allowed, 1 going)" in held["reason"]
    uses = {b["name"]: b for b in out["budgets"]}
    assert (uses["working-hours"]["active"], uses["working-hours"]["allowed"], uses["working-hours"]["held"]) == (True, 1, 7)
    assert uses["quarter"]["allowed"] == 2 and uses["quarter"]["held"] == 0
    # at night the window is closed: the 25% budget binds (2 of 8)
    idle = [_idle(i, NIGHT) for i in range(1, 9)]
    out = _plan(tmp_path, capsys, SIZES + WORKING_HOURS, NIGHT, idle)
    assert Counter(_acts(out).values()) == {("drain", "-"): 2, ("-", "budget"): 6}
    assert {b["name"]: b["active"] for b in out["budgets"]}["working-hours"] is False
    held = next(n for n in out["nodes"] if n["blocked_by"] == "budget")
    assert "held back by budget quarter" in held["reason"]


def test_without_budgets_every_idle_node_goes_and_down_nodes_are_not_budgeted(tmp_path, capsys):
    idle = [_idle(i, WORKDAY) for i in range(1, 5)]
    out = _plan(tmp_path, capsys, SIZES, WORKDAY, idle)
    assert set(_acts(out).values()) == {("drain", "-")} and out["budgets"] == []
    # a budget that allows nothing still lets a down node go: it is no capacity
    pairs = idle + [_idle(9, WORKDAY, state="down")]
    pairs[-1][1]["last_heard"] = WORKDAY - 5000
    out = _plan(tmp_path, capsys, SIZES + "\n[Budget none]\nnodes = 0\n", WORKDAY, pairs)
    acts = _acts(out)
    assert acts["i-9"] == ("destroy", "-")
    assert [acts[f"i-{i}"] for i in range(1, 5)] == [("-", "budget")] * 4


def test_a_sizes_own_min_nodes_holds_its_drains_back(tmp_path, capsys):
    """Drains used to check only the global min_nodes while boots honoured [Size] min_nodes: the
    idle nodes were drained, then booted again the next cycle."""
    idle = [_idle(i, WORKDAY) for i in range(1, 4)]
    out = _plan(tmp_path, capsys, SIZES + "min_nodes = 2\n", WORKDAY, idle)
    acts = _acts(out)
    assert Counter(acts.values()) == {("drain", "-"): 1, ("-", "min_nodes"): 2}
    held = next(n for n in out["nodes"] if n["blocked_by"] == "min_nodes")
    assert "held back: [Size small] min_nodes 2" in held["reason"]
    assert out["boots"] == []


@pytest.mark.parametrize("section, words", [
    ("[Budget a]\nreasons = idel\nnodes = 1\n", "nm.ini:7: [Budget a] reasons: unknown reason idel"),
    ("[Budget a]\nnodes = lots\n", "nm.ini:7: [Budget a] nodes: expected a node count like 2 or a percentage like 10%"),
    ("[Budget a]\nnodes = 1\nschedule = 0 25 * * *\nduration = 1h\n", "nm.ini:8: [Budget a] schedule: hour: 25 is outside 0-23"),
    ("[Budget a]\nnodes = 1\nschedule = 0 8 * * *\n", "nm.ini:8: [Budget a] schedule: schedule and duration go together"),
    ("[Budget a]\nnodes = 1\nschedule = 0 8 * * *\nduration = 1h\ntime_zone = Europe/Pariss\n",
     "[Budget a] schedule: unknown time zone 'Europe/Pariss'"),
    ("[Budget a]\nreasons = drift\n", "[Budget a]: missing required option nodes"),
])
def test_bad_budgets_name_file_and_line(section, words):
    with pytest.raises(ConfigError) as err:
        loads(SIZES + "\n" + section, "nm.ini")
    assert words in str(err.value)
