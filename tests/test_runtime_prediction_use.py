"""The cost profile with ``runtime_prediction = recent`` consolidates onto the node it keeps:
it drains the node whose jobs its users' history says end first, where the requested times
point at the other one (through ``nodemanager simulate``, the daemon's own controller)."""

import json

import pytest

from nodemanager.cli import main

HEAD = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"
T = 7000


@pytest.fixture
def trace(tmp_path):
    # (submit, runtime, cores, requested, user, executable)
    jobs = [(100, 6000, 1, 36000, 1, 1), (200, 6000, 1, 36000, 1, 1),   # user 1's usual job: 6000 s
            (T, 6000, 5, 36000, 1, 1),      # X: one more of them, asking for 10 hours again
            (T, 20000, 5, 21000, 2, 2)]     # Y: user 2's first job, 20000 s of the 21000 asked
    # then a one-core 800-s job every 900 s for four hours: they go where the drain leaves room
    jobs += [(t, 800, 1, 800, 3, 3) for t in range(T + 300, T + 15000, 900)]
    path = tmp_path / "predict.swf"
    path.write_text(HEAD + "".join(f"{i} {s} 0 {r} {c} -1 -1 {c} {q} -1 1 {u} 1 {x} 1 1 -1 -1\n"
                                   for i, (s, r, c, q, u, x) in enumerate(jobs, 1)))
    return path


def _cost(trace, tmp_path, capsys, prediction):
    ini = tmp_path / f"{prediction}.ini"
    ini.write_text(f"[Daemon]\nmax_nodes = 4\nconsolidate_margin = 3\nruntime_prediction = {prediction}\n")
    assert main(["simulate", "--trace", str(trace), "--config", str(ini), "--cores-per-node", "8",
                 "--compare", "--only", "nodemanager-cost,slurm-power-save", "--jobs", "1", "--json"]) == 0
    return {r["policy"]: r for r in json.loads(capsys.readouterr().out)["runs"]}


def test_predicted_ends_drain_the_node_that_empties_first(trace, tmp_path, capsys):
    on = _cost(trace, tmp_path, capsys, "recent")
    off = _cost(trace, tmp_path, capsys, "off")
    # by the requested times Y's node ends first (21000 s against 36000 s): draining it sends the
    # short jobs to X's node, which then stays up for them; by user 1's history X's node ends
    # first: it is drained and leaves at T + 6000 s, the short jobs run beside Y
    saved = off["nodemanager-cost"]["paid_node_hours"] - on["nodemanager-cost"]["paid_node_hours"]
    assert saved > 2.0
    assert on["nodemanager-cost"]["gap_closed"] > 0.8 > off["nodemanager-cost"]["gap_closed"]
    for runs in (on, off):
        cost = runs["nodemanager-cost"]
        assert cost["jobs_completed"] == 21 and cost["jobs_killed"] == 0
    assert on["slurm-power-save"]["paid_node_hours"] == off["slurm-power-save"]["paid_node_hours"]
