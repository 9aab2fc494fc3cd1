"""``nodemanager simulate --report DIR``: an HTML page with PNG plots (matplotlib, Agg backend).

Plots: nodes up versus demand over time (one panel per policy), node-hours paid so far over time
(one line per policy), the cost / p95-wait plane with each policy's sweep points and Pareto front
(policies whose points coincide are labelled together; waits on readable duration ticks), and
where the paid node-hours went (busy, idle, booting, draining, billing rounding) per policy.
"""

from __future__ import annotations

import html
import os
from typing import Mapping, Sequence

from nodemanager.sim.figures import TABLE_COLUMNS, Figures, Series, format_cell, pareto_front

__all__ = ["write_report", "coinciding", "WASTE_PARTS"]

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


def _plot_series(path: str, series: Mapping[str, Series], cores_per_node: int) -> None:
    plt = _pyplot()
    n = max(1, len(series))
    fig, axes = plt.subplots(n, 1, figsize=(11, 2.6 * n), sharex=True, squeeze=False)
    for ax, (name, s) in zip(axes[:, 0], series.items()):
        days = [t / 86400.0 for t in s.t]
        ax.plot(days, s.demand, color="tab:red", lw=0.8, label="demand (running+queued cores / node size)")
        ax.step(days, s.up, where="post", color="tab:blue", lw=1.0, label="nodes up (paid)")
        ax.step(days, s.busy, where="post", color="tab:green", lw=0.6, label="nodes running jobs")
        ax.set_ylabel("nodes")
        ax.set_title(name, fontsize=10, loc="left")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel(f"days since window start ({cores_per_node} cores per node)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
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
        ax.set_xlim(left=0)
    lo, hi = ax.get_xlim()
    ticks: list[tuple[int, str]] = []
    for v, text in _WAIT_TICKS:  # on a log axis, ticks at least 3x apart stay legible
        if lo <= v <= hi and (not ticks or not log or v >= max(30, 3 * ticks[-1][0])):
            ticks.append((v, text))
    if len(ticks) >= 3:
        ax.set_xticks([v for v, _ in ticks], [t for _, t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("p95 job wait")
    else:
        ax.set_xlabel("p95 job wait (s)")


def _plot_pareto(path: str, points: Mapping[str, Sequence[Figures]]) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    markers = "osD^v<>p*h"
    elastic = {k: v for k, v in points.items() if k != "static"}
    for ax, group, zoom in ((axes[0], points, False), (axes[1], elastic or points, True)):
        for i, (policy, rows) in enumerate(points.items()):
            if policy not in group:
                continue
            xy = sorted(((f.wait_p95, f.paid_node_hours, f) for f in rows), key=lambda p: p[:2])
            color = f"C{i % 10}"      # the same colour for a policy in both panels
            ax.scatter([p[0] for p in xy], [p[1] for p in xy], marker=markers[i % len(markers)],
                       label=policy, alpha=0.8, s=28, color=color)
            front = pareto_front([(f.wait_p95, f.paid_node_hours) for f in rows])
            if len(front) > 1:
                ax.plot([p[0] for p in front], [p[1] for p in front], color=color, lw=1.0, alpha=0.8)
            default = next((f for f in rows if not f.params.get("sweep")), None)
            if default is not None:  # a policy later in the list circles wider: all stay visible
                ax.scatter([default.wait_p95], [default.paid_node_hours], s=140 + 90 * i,
                           facecolors="none", edgecolors=[color], linewidths=1.5)
            if zoom:
                for x, y, f in xy:
                    label = ",".join(f"{v:g}" for v in f.params.get("sweep", {}).values())
                    if label:
                        ax.annotate(label, (x, y), fontsize=6, alpha=0.7, xytext=(3, 3),
                                    textcoords="offset points", color=color)
        for same in coinciding({k: v for k, v in points.items() if k in group}):
            f = next(r for r in points[same[0]] if not r.params.get("sweep"))
            ax.annotate(" = ".join(same), (f.wait_p95, f.paid_node_hours), fontsize=7,
                        xytext=(8, -14), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "lw": 0.5, "alpha": 0.6})
        ax.set_ylabel("paid node-hours")
        ax.grid(alpha=0.3)
        _wait_axis(ax, log=not zoom)
        if not zoom:
            ax.set_title("every run (circled: each policy's defaults)", fontsize=9)
            ax.legend(fontsize=8)
        else:
            ax.set_title("elastic policies only; labels: the swept value; lines: Pareto fronts",
                         fontsize=9)
    fig.suptitle("cost versus p95 wait (lower left is better)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_cost(path: str, series: Mapping[str, Series], cores_per_node: int) -> None:
    """Node-hours paid so far, over the window, one line per policy (who spends when)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 4))
    for i, (name, s) in enumerate(series.items()):
        total, cumulative = 0.0, []
        for k, t in enumerate(s.t):
            if k:
                total += s.up[k - 1] * (t - s.t[k - 1]) / 3600.0
            cumulative.append(total)
        ax.plot([t / 86400.0 for t in s.t], cumulative, lw=1.2, color=f"C{i % 10}",
                ls=("-", "--", ":", "-.")[i // 10 % 4], label=f"{name} ({total:,.0f} nh)")
    ax.set_xlabel(f"days since window start ({cores_per_node} cores per node)")
    ax.set_ylabel("node-hours up so far")
    ax.set_title("cost over time (node-hours up, before billing rounding)", fontsize=9, loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _plot_waste(path: str, rows: Sequence[Figures]) -> None:
    plt = _pyplot()
    elastic = [r for r in rows if r.params.get("baseline") != "static"] or list(rows)
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.6 * len(rows) + 1.8), squeeze=False)
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
    axes[0, 0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
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
    _plot_series(os.path.join(directory, "nodes.png"), series, cpn)
    _plot_cost(os.path.join(directory, "cost.png"), series, cpn)
    points: dict[str, list[Figures]] = {}
    for r in rows:
        points.setdefault(r.params.get("baseline", r.policy), []).append(r)
    for policy, extra in (sweep or {}).items():
        points.setdefault(policy, []).extend(extra)
    _plot_pareto(os.path.join(directory, "pareto.png"), points)
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
