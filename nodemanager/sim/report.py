"""``nodemanager simulate --report DIR``: an HTML page with PNG plots (matplotlib, Agg backend).

Plots: nodes up versus demand over time (one line per policy, means over time bins, and each
policy's window means), node-hours paid so far over time (one line per policy, ending at the
table's paid node-hours; the plots' data also in ``plots.json``), the cost / p95-wait plane with each policy's sweep points and Pareto front
(policies whose points coincide are labelled together; waits on readable duration ticks), and
where the paid node-hours went (busy, idle, booting, draining, billing rounding) per policy.
"""

from __future__ import annotations

import html
import json
import os
from typing import Mapping, Sequence

from nodemanager.sim.figures import TABLE_COLUMNS, Figures, Series, format_cell, pareto_front
from nodemanager.sim.report_data import Binned, CostLine, binned, cost_lines, plots_json, same_as

__all__ = ["write_report", "coinciding", "plot_pareto", "WASTE_PARTS"]

# The parts of paid node-hours shown in the waste breakdown, in stacking order.
WASTE_PARTS: tuple[tuple[str, str], ...] = (
    ("busy", "running jobs"),
    ("idle", "up, idle"),
    ("booting", "booting / not yet joined"),
    ("draining", "draining, nothing left to run"),
    ("billing", "billing rounding"),
)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# a line style and marker per policy, so lines that coincide still show each policy
_STYLES = ("-", "--", "-.", ":")
_MARKERS = "osD^v<>p*hX"


def _style(i: int, n_points: int, n_lines: int) -> dict[str, object]:
    """Colour, dashes, marker (staggered along the line, so equal lines show both markers) and a
    width that shrinks with ``i``, so a line drawn over an equal one leaves it visible."""
    every = max(1, n_points // 8)
    return {"color": f"C{i % 10}", "ls": _STYLES[i % len(_STYLES)], "marker": _MARKERS[i % len(_MARKERS)],
            "markevery": (min(n_points - 1, (i * every) // max(1, n_lines)) if n_points else 0, every),
            "lw": max(1.0, 3.2 - 0.3 * i), "ms": 6, "markerfacecolor": "none", "markeredgewidth": 1.3}


def _plot_series(path: str, nodes: Sequence[Binned], cores_per_node: int) -> None:
    """Nodes up per policy (means over time bins, one line each) against demand, and each
    policy's mean nodes up over the window beside the mean demand."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(13, 5.6), gridspec_kw={"width_ratios": [3, 1]})
    width = nodes[0].bin_seconds if nodes else 3600.0
    if nodes:
        first = nodes[0]
        ax.fill_between([t / 86400.0 for t in first.t], first.demand, step="post", color="0.85",
                        label=f"demand under {first.policy} (running + queued cores / node size)")
    for i, b in enumerate(nodes):
        ax.plot([(t + width / 2) / 86400.0 for t in b.t], b.up, label=f"{b.policy} nodes up",
                **_style(i, len(b.t), len(nodes)))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"days since window start ({cores_per_node} cores per node)")
    ax.set_ylabel("nodes (mean per bin)")
    ax.set_title(f"nodes up versus demand, means over {width / 3600.0:g} h bins", fontsize=9, loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    names = [b.policy for b in nodes]
    ys = range(len(nodes))
    bars.barh([y - 0.2 for y in ys], [b.mean_up for b in nodes], height=0.4, label="nodes up",
              color=[f"C{i % 10}" for i in ys])
    bars.barh([y + 0.2 for y in ys], [b.mean_demand for b in nodes], height=0.4, color="0.7",
              label="demand")
    bars.set_yticks(list(ys), names, fontsize=8)
    bars.invert_yaxis()
    bars.set_title("window means (grey: demand)", fontsize=9)
    bars.set_xlabel("nodes")
    bars.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def coinciding(points: Mapping[str, Sequence[Figures]], rel: float = 0.005) -> list[list[str]]:
    """Groups of policies whose default runs land on the same (p95 wait, paid node-hours) point,
    within ``rel`` of each value: drawn on top of each other, they need a label saying so."""
    defaults = [(policy, f) for policy, rows in points.items()
                for f in rows if not f.params.get("sweep")]
    groups: list[list[str]] = []
    used: set[str] = set()
    for i, (a, fa) in enumerate(defaults):
        if a in used:
            continue
        group = [a]
        for b, fb in defaults[i + 1:]:
            if b not in used and all(abs(x - y) <= rel * max(abs(x), abs(y), 1.0) for x, y in
                                     ((fa.wait_p95, fb.wait_p95), (fa.paid_node_hours, fb.paid_node_hours))):
                group.append(b)
        if len(group) > 1:
            used.update(group)
            groups.append(group)
    return groups


_WAIT_TICKS = ((0, "0"), (10, "10 s"), (30, "30 s"), (60, "1 min"), (120, "2 min"), (300, "5 min"),
               (600, "10 min"), (1800, "30 min"), (3600, "1 h"), (4 * 3600, "4 h"),
               (12 * 3600, "12 h"), (86400, "1 d"), (7 * 86400, "1 w"))


def _wait_axis(ax, log: bool) -> None:
    """p95 waits as durations people read (1 min, 1 h), on a log-like axis when ``log``; in
    seconds when the range is too narrow for those ticks."""
    if log:
        ax.set_xscale("symlog", linthresh=60)
        ax.set_xlim(left=-6)  # a zero wait sits inside the axes, not on its edge
    lo, hi = ax.get_xlim()
    ticks: list[tuple[int, str]] = []
    for v, text in _WAIT_TICKS:  # on a log axis, ticks at least 4x apart stay legible
        if lo <= v <= hi and (not ticks or not log or v >= max(30, 4 * ticks[-1][0])):
            ticks.append((v, text))
    if len(ticks) >= 3:
        ax.set_xticks([v for v, _ in ticks], [t for _, t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("p95 job wait")
    else:
        ax.set_xlabel("p95 job wait (s)")


NEAR = 4.0  # the closer panel keeps policies whose default p95 wait is within this factor of the best


def _near_the_best(points: Mapping[str, Sequence[Figures]]) -> tuple[dict[str, Sequence[Figures]], list[str]]:
    """The policies whose default run waits within :data:`NEAR` x the best default (at least 10
    minutes more), and the names of the others: one slow policy must not squash the rest."""
    defaults = {k: next((f for f in v if not f.params.get("sweep")), v[0]) for k, v in points.items() if v}
    best = min((f.wait_p95 for f in defaults.values()), default=0.0)
    limit = max(NEAR * best, best + 600.0)
    near = {k: v for k, v in points.items() if k in defaults and defaults[k].wait_p95 <= limit}
    return near, [k for k in points if k not in near]


def plot_pareto(path: str, points: Mapping[str, Sequence[Figures]]) -> list[tuple[str, tuple[float, float],
                                                                                 tuple[float, float]]]:
    """Draw the cost / p95-wait plane; returns each panel's (title, x limits, y limits)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    markers = "osD^v<>p*h"
    elastic = {k: v for k, v in points.items() if k != "static"}
    near, far = _near_the_best(elastic or points)
    for ax, group, zoom in ((axes[0], points, False), (axes[1], near, True)):
        drawn = set()  # what this panel shows, for a title that promises nothing more
        for i, (policy, rows) in enumerate(points.items()):
            if policy not in group:
                continue
            xy = sorted(((f.wait_p95, f.paid_node_hours, f) for f in rows), key=lambda p: p[:2])
            color = f"C{i % 10}"      # the same colour for a policy in both panels
            ax.scatter([p[0] for p in xy], [p[1] for p in xy], marker=markers[i % len(markers)],
                       label=policy, alpha=0.8, s=28, color=color, clip_on=False, zorder=3)
            front = pareto_front([(f.wait_p95, f.paid_node_hours) for f in rows])
            if len(front) > 1:
                ax.plot([p[0] for p in front], [p[1] for p in front], color=color, lw=1.0, alpha=0.8)
                drawn.add("lines: Pareto fronts of each policy's settings")
            default = next((f for f in rows if not f.params.get("sweep")), None)
            if default is not None and len(rows) > 1:  # circled among its sweep points
                ax.scatter([default.wait_p95], [default.paid_node_hours], s=140 + 60 * i,
                           facecolors="none", edgecolors=[color], linewidths=1.5, clip_on=False)
                drawn.add("circled: each policy's defaults")
            if zoom:
                for x, y, f in xy:
                    label = ",".join(f"{v:g}" for v in f.params.get("sweep", {}).values())
                    if label:
                        ax.annotate(label, (x, y), fontsize=6, alpha=0.7, xytext=(3, 3),
                                    textcoords="offset points", color=color)
                        drawn.add("labels: the swept value")
        for same in coinciding({k: v for k, v in points.items() if k in group}):
            f = next(r for r in points[same[0]] if not r.params.get("sweep"))
            ax.annotate(" = ".join(same), (f.wait_p95, f.paid_node_hours), fontsize=7,
                        xytext=(-8, -14), textcoords="offset points", ha="right",
                        arrowprops={"arrowstyle": "-", "lw": 0.5, "alpha": 0.6})
        ax.set_ylabel("paid node-hours")
        ax.grid(alpha=0.3)
        ax.margins(x=0.08, y=0.12)  # room for the markers and circles at the edges
        _wait_axis(ax, log=not zoom)
        head = "every run" if not zoom else ("elastic policies" if elastic else "every run") + (
            f" whose p95 wait is within {NEAR:g}x the best ({', '.join(far)} off this panel)" if far else "")
        ax.set_title(head + "\n" + "; ".join(sorted(drawn)), fontsize=8)
        if not zoom:
            ax.legend(fontsize=8)
    fig.suptitle("cost versus p95 wait (lower left is better)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    panels = [(ax.get_title(), ax.get_xlim(), ax.get_ylim()) for ax in axes]
    plt.close(fig)
    return panels


def _plot_cost(path: str, lines: Sequence[CostLine], cores_per_node: int) -> None:
    """Node-hours paid so far, one line per policy, each ending at its ``paid nh`` of the table."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.4))
    same = same_as(lines)
    for i, c in enumerate(lines):
        twin = f", same line as {same[c.policy]}" if c.policy in same else ""
        ax.plot([t / 86400.0 for t in c.t], c.paid, label=f"{c.policy} ({c.total:,.1f} nh{twin})",
                **_style(i, len(c.t), len(lines)))
    ax.set_xlabel(f"days since window start ({cores_per_node} cores per node)")
    ax.set_ylabel("node-hours paid so far")
    ax.set_title("cost over time (node-hours paid, billing rounding included; the totals are the "
                 "table's paid nh)", fontsize=9, loc="left")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _plot_waste(path: str, rows: Sequence[Figures]) -> None:
    plt = _pyplot()
    elastic = [r for r in rows if r.params.get("baseline") != "static"] or list(rows)
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.6 * len(rows) + 2.3), squeeze=False)
    for ax, group, parts, title in (
            (axes[0, 0], list(rows), WASTE_PARTS, "paid node-hours"),
            (axes[0, 1], elastic, WASTE_PARTS[1:], "paid beyond running jobs (elastic policies)")):
        names = [r.policy for r in group]
        left = [0.0] * len(group)
        for i, (key, label) in enumerate(WASTE_PARTS):
            if (key, label) not in parts:
                continue
            vals = [r.waste.get(key, 0.0) for r in group]
            ax.barh(names, vals, left=left, label=label, color=f"C{i}")
            left = [a + b for a, b in zip(left, vals)]
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("node-hours")
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
    nowait = rows[0].lower_bound_nowait_node_hours if rows else 0.0
    if nowait:
        axes[0, 0].axvline(nowait, color="k", ls="--", lw=1, label="no-wait lower bound")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=6, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))  # the legend below the bars, off every bar
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _table_html(rows: Sequence[Figures]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in TABLE_COLUMNS)
    body = []
    for r in rows:
        cells = "".join(f"<td>{html.escape(format_cell(r, a, fmt))}</td>" for _, a, fmt in TABLE_COLUMNS)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def write_report(directory: str, rows: Sequence[Figures], series: Mapping[str, Series],
                 sweep: Mapping[str, Sequence[Figures]] | None = None, *, title: str = "",
                 notes: Sequence[str] = ()) -> str:
    """Write ``index.html`` and its PNGs into ``directory``; returns the HTML file's path."""
    os.makedirs(directory, exist_ok=True)
    if not rows:
        raise ValueError("nothing to report")
    cpn = rows[0].cores_per_node
    nodes, cost = binned(series), cost_lines(series)
    with open(os.path.join(directory, "plots.json"), "w", encoding="utf-8") as fh:
        json.dump(plots_json(nodes, cost), fh)
    _plot_series(os.path.join(directory, "nodes.png"), nodes, cpn)
    _plot_cost(os.path.join(directory, "cost.png"), cost, cpn)
    points: dict[str, list[Figures]] = {}
    for r in rows:
        points.setdefault(r.params.get("baseline", r.policy), []).append(r)
    for policy, extra in (sweep or {}).items():
        points.setdefault(policy, []).extend(extra)
    plot_pareto(os.path.join(directory, "pareto.png"), points)
    _plot_waste(os.path.join(directory, "waste.png"), rows)
    first = rows[0]
    bounds = (f"Lower bounds: work {first.lower_bound_work_node_hours:.1f} node-hours, "
              f"no-wait {first.lower_bound_nowait_node_hours:.1f} node-hours "
              f"({cpn} cores per node).")
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    sweep_rows = [f for rows_ in (sweep or {}).values() for f in rows_]
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title or 'nodemanager simulation')}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:75em}}
table{{border-collapse:collapse;font-size:85%}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}img{{max-width:100%}}</style></head>
<body><h1>{html.escape(title or 'nodemanager simulation')}</h1>
<p>Trace <code>{html.escape(first.trace)}</code>, window {html.escape(first.window)},
{first.jobs_submitted} jobs. {html.escape(bounds)} Waits in seconds.</p>
<ul>{note_html}</ul>
<h2>Policies</h2>{_table_html(rows)}
<h2>Nodes up versus demand</h2><img src="nodes.png" alt="nodes up versus demand over time">
<h2>Cost over time</h2><img src="cost.png" alt="node-hours paid so far, per policy">
<h2>Cost versus p95 wait</h2><img src="pareto.png" alt="cost versus p95 wait per policy">
{('<h3>Sweep points</h3>' + _table_html(sweep_rows)) if sweep_rows else ''}
<h2>Where the paid node-hours went</h2><img src="waste.png" alt="waste breakdown">
<p>How every figure is computed: docs/simulator.md.</p>
</body></html>
"""
    out = os.path.join(directory, "index.html")
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(page)
    return out
