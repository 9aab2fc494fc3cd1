"""End to end: a tiny synthetic SWF trace replayed through the real core, actuator, simulated
cloud and simulated pool, with every figure checked against values computed by hand."""

import json

import pytest

from nodemanager.cli import main

# 18 SWF fields: id submit wait run alloc avgcpu usedmem reqprocs reqtime reqmem status user ...
TRACE = """\
; Version: 2.2
; Computer: synthetic
; Acknowledge: the test suite
; UnixStartTime: 0
1 1000 0 600  2 -1 -1 2 900 -1 1 1 1 -1 1 1 -1 -1
2 1000 0 300 -1 -1 -1 2 900 -1 1 1 1 -1 1 1 -1 -1
3 5000 0 100  6 -1 -1 6 900 -1 1 1 1 -1 1 1 -1 -1
"""
# Job 2 has no allocated count (-1): its requested 2 processors are used. Job 3 (6 cores) is
# wider than a 4-core node: it becomes a 4-core and a 2-core piece.


def run(args, capsys):
    code = main(["simulate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "synthetic.swf"
    path.write_text(TRACE)
    return path


def test_synthetic_trace_figures_match_hand_computation(trace, tmp_path, capsys):
    ini = tmp_path / "30s.ini"
    ini.write_text("[Polling]\ncycle_interval = 30s\n")
    code, out, err = run(["--trace", str(trace), "--config", str(ini), "--cores-per-node", "4",
                          "--boot-delay", "60", "--join-delay", "30", "--jobs", "1", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    f = doc["runs"][0]
    # Cycles every 30 s (the config above) on the grid t0 + 30k with t0 = 1000 - (60 + 30 + 2*30) = 850;
    # the pool negotiates at multiples of 60 s; idle_grace 300 s; per-second billing.
    # Jobs 1+2 (2 cores each) queue at 1000: one node booted at 1000, running 1060, joined 1090,
    # both jobs start at the next negotiation, 1140 (waits 140). Job 2 ends 1440, job 1 1740.
    # Idle grace ends 2040, next cycle 2050 drains it, 2080 destroys it: paid 1080 s.
    # Job 3 queues at 5000; the cycle at 5020 boots two nodes (a 4-core and a 2-core piece),
    # joined 5110, both start at 5160 (wait 160), end 5260; drained at 5560, destroyed 5590:
    # 570 s each. Paid 1080 + 2 * 570 = 2220 s.
    assert f["paid_node_hours"] == pytest.approx(2220 / 3600, abs=1e-4)
    # busy: node 1 1140-1740, nodes 2 and 3 5160-5260 each
    assert f["busy_node_hours"] == pytest.approx(800 / 3600, abs=1e-4)
    assert f["idle_paid_node_hours"] == pytest.approx(1420 / 3600, abs=1e-4)
    # work: (2*600 + 2*300 + 6*100) core-s / 4 cores; no-wait: 600 s of one node + 100 s of two
    assert f["lower_bound_work_node_hours"] == pytest.approx(600 / 3600, abs=1e-4)
    assert f["lower_bound_nowait_node_hours"] == pytest.approx(800 / 3600, abs=1e-4)
    assert f["cost_ratio"] == pytest.approx(2220 / 800, abs=1e-3)
    # waits 140, 140, 160 (job 3's wait is its last piece's): nearest-rank percentiles
    assert (f["wait_p50"], f["wait_p95"], f["wait_p99"], f["wait_max"]) == (140, 160, 160, 160)
    assert f["jobs_completed"] == 3 and f["jobs_killed"] == 0 and f["badput_core_hours"] == 0
    assert (f["boots"], f["drains"], f["drain_cancels"], f["destroys"]) == (3, 3, 0, 3)
    assert f["peak_nodes"] == 2 and f["cores_per_node"] == 4
    assert (f["wide_jobs_split"], f["pieces"]) == (1, 4)
    # where the 2220 paid seconds went: 800 busy, 3 x 90 s booting (launch to join),
    # 3 x 30 s drained and waiting for the destroy, the rest idle; no billing rounding
    w = f["waste"]
    assert w["busy"] * 3600 == pytest.approx(800, abs=1)
    assert w["booting"] * 3600 == pytest.approx(270, abs=1)
    assert w["draining"] * 3600 == pytest.approx(90, abs=1)
    assert w["idle"] * 3600 == pytest.approx(1060, abs=1)
    assert w["billing"] == pytest.approx(0, abs=1e-4)


def test_hourly_billing_charges_whole_hours_and_drains_at_the_end_of_the_hour(trace, capsys):
    code, out, err = run(["--trace", str(trace), "--cores-per-node", "4", "--boot-delay", "60",
                          "--join-delay", "30", "--billing", "hourly", "--jobs", "1", "--json"], capsys)
    assert code == 0, err
    f = json.loads(out)["runs"][0]
    # three nodes, each drained in the last 5 minutes of its first hour: three paid hours
    assert f["paid_node_hours"] == pytest.approx(3.0)
    assert f["destroys"] == 3 and f["jobs_killed"] == 0


def test_compare_runs_every_baseline_on_the_same_trace(trace, capsys, tmp_path):
    report = tmp_path / "report"
    code, out, err = run(["--trace", str(trace), "--cores-per-node", "4", "--compare", "--jobs", "2",
                          "--sweep", "idle_grace=60,900", "--report", str(report)], capsys)
    assert code == 0, err
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    for policy in ("nodemanager", "static", "arvados", "cluster-autoscaler", "slurm-power-save"):
        assert policy in names
    assert "nodemanager is on or beyond the cost/p95-wait front of arvados" in out or \
        "nodemanager is DOMINATED by arvados" in out
    html = (report / "index.html").read_text()
    for png in ("nodes.png", "cost.png", "pareto.png", "waste.png"):
        assert (report / png).stat().st_size > 1000
        assert png in html


def test_two_matrices_are_compared_on_the_same_trace(trace, capsys, tmp_path):
    never = tmp_path / "never.matrix"
    never.write_text("unpaired | * | boot exceeded | * -> START_SHUTDOWN\n* | * | * | * -> None\n")
    code, out, err = run(["--trace", str(trace), "--cores-per-node", "4", "--jobs", "1", "--json",
                          "--matrix", str(never), "--matrix",
                          str(__import__("policy_matrix").default_path())], capsys)
    assert code == 0, err
    runs = {r["policy"]: r for r in json.loads(out)["runs"]}
    kept = runs["nodemanager[never.matrix]"]
    default = runs["nodemanager[default.matrix]"]
    # a matrix that never gives a node back keeps both job-3 nodes until the end of the replay
    assert kept["destroys"] == 0 and default["destroys"] == 3
    assert kept["paid_node_hours"] > default["paid_node_hours"]


@pytest.mark.parametrize("args, message", [
    (["--sweep", "idel_grace=60"], "unknown setting 'idel_grace'"),
    (["--sweep", "idle_grace"], "expected KEY=V1,V2"),
    (["--boot-delay", "soon"], "--boot-delay 'soon'"),
    (["--cores-per-node", "0"], "--cores-per-node must be at least 1"),
])
def test_bad_options_are_named(trace, capsys, args, message):
    code, out, err = run(["--trace", str(trace), *args], capsys)
    assert code == 1
    assert message in err


def test_a_bad_trace_line_is_skipped_and_named_with_its_line(tmp_path, capsys):
    bad = tmp_path / "bad.swf"
    bad.write_text(TRACE + "4 6000 0 10 1 -1\n")
    code, out, err = run(["--trace", str(bad)], capsys)
    assert code == 0
    assert "1 jobs skipped: not 18 fields (first at line 8)" in out


def test_a_file_that_is_not_a_trace_says_what_it_skipped(tmp_path, capsys):
    bad = tmp_path / "bad.swf"
    bad.write_text("name,submit,run\njob,1,2\n")
    code, out, err = run(["--trace", str(bad)], capsys)
    assert code == 1
    assert "no usable jobs in the chosen window (2 skipped: not 18 fields (first at line 1))" in err


def test_bad_matrix_is_reported_with_file_and_line(trace, tmp_path, capsys):
    bad = tmp_path / "bad.matrix"
    bad.write_text("idle | open | * | idle exceeded -> START_DRIAN\n")
    code, out, err = run(["--trace", str(trace), "--matrix", str(bad)], capsys)
    assert code == 1
    assert f"{bad}:1" in err


@pytest.mark.parametrize("processes", [1, 2])
def test_progress_counts_replays_and_ends_full(trace, processes):
    """The progress bar of `simulate` counts replays (moving with each one's job pieces) and ends
    full, whether the replays run here or in workers."""
    from nodemanager.sim.progress import Quiet
    from nodemanager.sim.baselines import SimParams, default_size, ours
    from nodemanager.sim.figures import lower_bounds
    from nodemanager.sim.replay_many import run_many
    from nodemanager.sim.swf import read_jobs
    from nodemanager.configuration.settings import CoreSettings, Settings

    jobs, _ = read_jobs(str(trace))
    policy = ours(Settings(core=CoreSettings(sizes=(default_size(4),))))
    bar = Quiet()
    results = run_many(jobs, [(policy, False), (policy, False)], SimParams(),
                       lower_bounds(jobs, 4), processes=processes, progress=bar)
    assert len(results) == 2
    assert bar.total == 2  # two replays
    assert bar.n == pytest.approx(bar.total)


def test_no_progress_bar_without_a_terminal_or_with_json(trace, capsys):
    code, out, err = run(["--trace", str(trace), "--cores-per-node", "4", "--jobs", "1"], capsys)
    assert code == 0 and "replaying:" not in err and "\r" not in err


def test_coinciding_default_points_are_found_for_labelling():
    """Two policies with the same cost and wait would hide each other on the plot: the report
    labels them together ("nodemanager = slurm-power-save"); a sweep point is not a default."""
    from types import SimpleNamespace

    from nodemanager.sim.report import coinciding

    def fig(policy, wait, cost, **params):  # the three fields of Figures that placement reads
        return SimpleNamespace(policy=policy, params=params, wait_p95=wait, paid_node_hours=cost)

    points = {"nodemanager": [fig("nodemanager", 129, 2305.2),
                              fig("nodemanager", 57, 2400.0, sweep={"idle_grace": 60})],
              "slurm-power-save": [fig("slurm-power-save", 129, 2305.2)],
              "static": [fig("static", 57, 6479.3)],
              "arvados": [fig("arvados", 146, 2450.8)]}
    assert coinciding(points) == [["nodemanager", "slurm-power-save"]]


def test_a_sweep_reads_each_value_as_its_config_option_does(trace, capsys):
    code, out, err = run(["--trace", str(trace), "--cores-per-node", "4", "--jobs", "1", "--json",
                          "--sweep", "arrival_chance=15%,0.2", "--sweep", "idle_grace=5m"], capsys)
    assert code == 0, err
    swept = [r["policy"] for r in json.loads(out)["sweep"]]
    assert swept == ["nodemanager arrival_chance=0.15", "nodemanager arrival_chance=0.2",
                     "nodemanager idle_grace=300"]
    code, out, err = run(["--trace", str(trace), "--jobs", "1", "--sweep", "arrival_chance=150%"], capsys)
    assert code == 1 and "--sweep arrival_chance '150%': expected a share from 0 to 100%" in err
