"""``nodemanager simulate --report``: the plots an admin reads at a glance. Their data
(``plots.json``) holds one aggregate line of nodes up per policy, and paid node-hours that end
at the table's figures; equal lines are said to be equal; the Pareto plot's titles promise only
what is drawn and no marker lies outside its axes."""

from __future__ import annotations

import json

import pytest

from nodemanager.cli import main
from nodemanager.sim.figures import Series
from nodemanager.sim.report_data import BINS, CostLine, binned, same_as
from tests.test_sim_replay import TRACE

pytest.importorskip("matplotlib")

# the synthetic trace repeated over two days: enough samples to see flapping nodes binned
LONG = "; UnixStartTime: 0\n" + "".join(
    f"{k + 1} {k * 1800} 0 {300 + 97 * (k % 5)} 2 -1 -1 2 900 -1 1 1 1 -1 1 1 -1 -1\n" for k in range(96))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    trace = tmp / "long.swf"
    trace.write_text(LONG)
    out = tmp / "report"
    code = main(["simulate", "--trace", str(trace), "--cores-per-node", "4", "--compare",
                 "--json", "--report", str(out)])
    assert code == 0
    return out


def test_the_cost_plots_totals_are_the_tables(report, capsys) -> None:
    plots = json.loads((report / "plots.json").read_text())
    html = (report / "index.html").read_text()
    # the table of the report page, policy -> paid nh as printed
    table = {}
    for row in html.split("<tr>")[2:]:
        cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
        if cells:
            table.setdefault(cells[0], float(cells[1]))
    lines = {c["policy"]: c for c in plots["cost"]}
    assert set(lines) >= {"nodemanager", "static", "karpenter", "slurm-power-save"}
    for policy, c in lines.items():
        assert c["paid"][-1] == pytest.approx(c["total"], abs=1e-3)
        assert f"{c['total']:.1f}" == f"{table[policy]:.1f}", policy
        assert c["paid"] == sorted(c["paid"])   # paid so far never goes down


def test_nodes_up_is_one_aggregate_line_per_policy(report) -> None:
    plots = json.loads((report / "plots.json").read_text())
    nodes = plots["nodes"]
    assert len({b["policy"] for b in nodes}) == len(nodes) == len(plots["cost"])
    widths = {b["bin_seconds"] for b in nodes}
    assert len(widths) == 1                   # one time axis for every policy
    for b in nodes:
        assert 1 <= len(b["t"]) <= BINS + 1
        assert all(0.0 <= v <= max(b["up"]) for v in b["up"])
    # the elastic policies' nodes come and go within a bin: their bins are means, not 0/1 steps
    assert any(0 < v < 1 for b in nodes for v in b["up"])


def test_a_flapping_node_is_drawn_as_its_mean() -> None:
    s = Series()
    for k in range(2 * 86400 // 60):
        s.add(k * 60.0, k % 2, k % 2, 0.5)   # up one minute, gone the next, for two days
    (b,) = binned({"flappy": s})
    assert len(b.t) <= BINS + 1
    assert all(v == pytest.approx(0.5, abs=0.01) for v in b.up)
    assert b.mean_up == pytest.approx(0.5, abs=0.01) and b.mean_demand == pytest.approx(0.5)


def test_equal_cost_lines_are_named_in_the_legend() -> None:
    a = CostLine("nodemanager", (0.0, 100.0, 200.0), (0.0, 1.0, 2.0), 2.0)
    b = CostLine("slurm-power-save", (0.0, 50.0, 100.0, 200.0), (0.0, 0.0, 1.0, 2.0), 2.0)  # other sample times
    c = CostLine("karpenter", (0.0, 100.0, 200.0), (0.0, 0.5, 1.5), 1.5)
    assert same_as([a, b, c]) == {"slurm-power-save": "nodemanager"}


@pytest.mark.parametrize("sweep", [False, True])
def test_the_pareto_titles_promise_only_what_is_drawn_and_every_marker_is_inside(report, tmp_path,
                                                                                sweep) -> None:
    from dataclasses import replace

    from nodemanager.sim.figures import Figures
    from nodemanager.sim.report import plot_pareto

    base = dict(trace="t", window="w", cores_per_node=4, busy_node_hours=1.0, idle_paid_node_hours=1.0,
                lower_bound_work_node_hours=1.0, lower_bound_nowait_node_hours=1.0, cost_ratio=1.0,
                wait_p50=0.0, wait_p99=0.0, wait_max=0.0, wait_mean=0.0, jobs_submitted=1,
                jobs_completed=1, jobs_killed=0, jobs_unfinished=0, badput_core_hours=0.0, boots=1,
                drains=1, drain_cancels=0, destroys=1, late_give_backs=0, peak_nodes=1, wall_seconds=1.0)
    points = {"nodemanager": [Figures(policy="nodemanager", paid_node_hours=20.0, wait_p95=0.0, **base)],
              "static": [Figures(policy="static", paid_node_hours=70.0, wait_p95=57.0, **base)],
              "arvados": [Figures(policy="arvados", paid_node_hours=67.0, wait_p95=202.0, **base)]}
    if sweep:
        points["nodemanager"] += [replace(points["nodemanager"][0], paid_node_hours=h, wait_p95=w,
                                          params={"sweep": {"idle_grace": g}})
                                  for h, w, g in ((18.0, 300.0, 60), (25.0, 30.0, 900))]
    panels = plot_pareto(str(tmp_path / "pareto.png"), points)
    titles = " ".join(t for t, _, _ in panels)
    assert ("labels: the swept value" in titles) == sweep
    assert ("Pareto fronts" in titles) == sweep
    assert ("circled" in titles) == sweep
    for _, (x0, x1), (y0, y1) in panels[1:]:
        for policy, rows in points.items():
            for f in rows if policy != "static" else ():
                assert x0 < f.wait_p95 < x1 and y0 < f.paid_node_hours < y1
    x0, x1 = panels[0][1]
    assert x0 < 0.0 and x1 > 202.0             # a zero wait sits inside the axes, not on its edge


def test_a_slow_policy_is_named_off_the_closer_panel(tmp_path) -> None:
    from types import SimpleNamespace

    from nodemanager.sim.report import plot_pareto

    def fig(policy, wait, cost):  # the fields the plot reads
        return SimpleNamespace(policy=policy, params={}, wait_p95=wait, paid_node_hours=cost)

    points = {"nodemanager": [fig("nodemanager", 120.0, 500.0)], "static": [fig("static", 60.0, 1300.0)],
              "karpenter": [fig("karpenter", 150.0, 660.0)], "cobald": [fig("cobald", 7 * 86400.0, 4400.0)]}
    (_, _, _), (title, (x0, x1), _) = plot_pareto(str(tmp_path / "p.png"), points)
    assert "cobald off this panel" in title and x1 < 86400.0
