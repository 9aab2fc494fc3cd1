"""``nodemanager simulate --compare`` also runs ``nodemanager-cost``: the default policy under the
cost profile, in the table and in ``--json`` ``runs``."""

import json

import pytest

from nodemanager.cli import main

HEAD = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"


def swf(jobs):
    """SWF lines for one-core jobs given as (submit, runtime = requested time)."""
    return HEAD + "".join(f"{i} {s} 0 {r} 1 -1 -1 1 {r} -1 1 1 1 -1 1 1 -1 -1\n"
                          for i, (s, r) in enumerate(jobs, 1))


@pytest.fixture
def trace(tmp_path):
    # two 4-core nodes at t=1000: one long job (6000 s), one of 1500 s and six short ones; then
    # a 1000-s job every 900 s that either node could take
    jobs = [(1000, 6000), (1000, 1500)] + [(1000, 200)] * 6 + [(t, 1000) for t in range(2000, 6500, 900)]
    path = tmp_path / "consolidate.swf"
    path.write_text(swf(jobs))
    return path


def test_compare_runs_the_cost_profile_as_nodemanager_cost(trace, tmp_path, capsys):
    ini = tmp_path / "site.ini"
    # consolidation's drains alone: on 13 jobs the back-off would judge most of the trace's bets
    ini.write_text("[Daemon]\nmax_nodes = 4\nconsolidate_margin = 0\nconsolidate_backoff = no\n")
    code = main(["simulate", "--trace", str(trace), "--config", str(ini), "--cores-per-node", "4",
                 "--compare", "--jobs", "1", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    runs = {r["policy"]: r for r in json.loads(out)["runs"]}
    assert {"nodemanager", "nodemanager-cost", "slurm-power-save"} <= set(runs)
    cost, default = runs["nodemanager-cost"], runs["nodemanager"]
    assert cost["jobs_killed"] == 0 and cost["jobs_completed"] == default["jobs_completed"] == 13
    # the node with the 1500-s job is drained once nothing queues: the later jobs go to the
    # node that stays up anyway for its long job, and it leaves early
    assert cost["drains"] > default["drains"]
    assert cost["paid_node_hours"] < default["paid_node_hours"]
    assert cost["wait_p95"] <= default["wait_p95"]


def test_the_table_has_a_nodemanager_cost_row(trace, capsys):
    assert main(["simulate", "--trace", str(trace), "--cores-per-node", "4", "--compare",
                 "--jobs", "1"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert "nodemanager-cost" in names and "nodemanager" in names


def test_only_runs_the_named_policies_and_refuses_an_unknown_name(trace, capsys):
    assert main(["simulate", "--trace", str(trace), "--cores-per-node", "4", "--compare",
                 "--only", "slurm-power-save,nodemanager-cost", "--jobs", "1", "--json"]) == 0
    runs = [r["policy"] for r in json.loads(capsys.readouterr().out)["runs"]]
    assert sorted(runs) == ["nodemanager-cost", "slurm-power-save"]
    # with a sweep, and without the static baseline whose smaller pools a sweep adds
    assert main(["simulate", "--trace", str(trace), "--cores-per-node", "4", "--compare",
                 "--only", "nodemanager-cost", "--sweep", "idle_grace=60", "--jobs", "1",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in doc["runs"] + doc["sweep"]] == ["nodemanager-cost", "nodemanager-cost idle_grace=60"]
    assert main(["simulate", "--trace", str(trace), "--compare", "--only", "slurm"]) == 1
    err = capsys.readouterr().err
    assert "unknown policy slurm" in err and "slurm-power-save" in err
