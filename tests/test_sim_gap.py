"""``simulate --compare`` measures every policy against the clairvoyant non-migrating packing
(``cv life``): the bound printed beside the no-wait bound, and each run's share of Slurm power
saving's gap to it."""

import json

import pytest

from nodemanager.cli import main
from nodemanager.sim.gap import gap_closed

HEAD = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"


@pytest.fixture
def trace(tmp_path):
    # at t=1000 eight one-core jobs (6000 s, 1500 s, six of 200 s), then a 1000-s job every 900 s
    jobs = [(1000, 6000), (1000, 1500)] + [(1000, 200)] * 6 + [(t, 1000) for t in range(2000, 6500, 900)]
    path = tmp_path / "gap.swf"
    path.write_text(HEAD + "".join(f"{i} {s} 0 {r} 1 -1 -1 1 {r} -1 1 1 1 -1 1 1 -1 -1\n"
                                   for i, (s, r) in enumerate(jobs, 1)))
    return path


# cv life on 4-core nodes: node A takes the 6000-s, the 1500-s and two 200-s jobs, then every
# later job (it stays up until 7000 s anyway): up 6000 s; node B the other four 200-s jobs: 200 s;
# two boots of 90 + 30 s
CLAIRVOYANT = (6000 + 200 + 2 * 120) / 3600


def _run(trace, tmp_path, *extra):
    ini = tmp_path / "site.ini"
    # the cost profile consolidating at once (no back-off): the column is what is under test
    ini.write_text("[Daemon]\nmax_nodes = 4\nconsolidate_margin = 0\nconsolidate_backoff = no\n")
    return main(["simulate", "--trace", str(trace), "--config", str(ini), "--cores-per-node", "4",
                 "--compare", "--jobs", "1", *extra])


def test_each_policy_reports_its_share_of_slurms_gap_to_the_clairvoyant_packing(trace, tmp_path, capsys):
    assert _run(trace, tmp_path, "--only", "nodemanager-cost,slurm-power-save", "--json") == 0
    runs = {r["policy"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    sps, cost = runs["slurm-power-save"], runs["nodemanager-cost"]
    assert sps["clairvoyant_node_hours"] == pytest.approx(CLAIRVOYANT, abs=1e-4)
    assert sps["gap_closed"] == 0.0
    # the cost profile drains the node the later jobs would keep up: it pays less than Slurm
    expected = (sps["paid_node_hours"] - cost["paid_node_hours"]) / (sps["paid_node_hours"] - CLAIRVOYANT)
    assert cost["gap_closed"] == pytest.approx(expected, abs=1e-3)
    assert 0.2 < cost["gap_closed"] < 1.0


def test_the_table_prints_the_bound_beside_the_no_wait_bound_and_a_gap_column(trace, tmp_path, capsys):
    assert _run(trace, tmp_path, "--only", "nodemanager-cost,slurm-power-save,static") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("lower bounds: work") and "no-wait 1.7 node-hours" in lines[1]
    assert lines[2].startswith("clairvoyant non-migrating packing") and "1.8 node-hours" in lines[2]
    head = lines[3]
    assert head.rstrip().endswith("gap closed")
    cells = {line.split()[0]: line.split()[-1] for line in lines[5:8]}
    assert cells["slurm-power-save"] == "0%"
    assert int(cells["nodemanager-cost"].rstrip("%")) > 20
    assert int(cells["static"].rstrip("%")) < 0   # dearer than Slurm power saving
    legend = [line for line in lines if line.strip().startswith("gap closed")]
    assert legend and "clairvoyant" in legend[0]


def test_without_slurm_power_saving_there_is_no_gap_to_measure(trace, tmp_path, capsys):
    assert _run(trace, tmp_path, "--only", "nodemanager-cost", "--json") == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["clairvoyant_node_hours"] == pytest.approx(CLAIRVOYANT, abs=1e-4)
    assert run["gap_closed"] is None
    assert _run(trace, tmp_path, "--only", "nodemanager-cost") == 0
    assert "gap closed" not in capsys.readouterr().out.splitlines()[3]


def test_gap_closed_by_hand():
    # LPC-EGEE days 0-30, per-second: Slurm power saving 2305.2, nodemanager-cost 2254.0, cv life 2076.8
    assert gap_closed(2254.0, 2305.2, 2076.8) == pytest.approx(0.2242, abs=1e-4)
    assert gap_closed(2400.0, 2305.2, 2076.8) < 0
    assert gap_closed(2000.0, 2000.0, 2076.8) is None
