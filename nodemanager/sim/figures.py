"""The figures a replay reports, the lower bounds it is measured against, and their printing.

Every figure is documented in ``docs/simulator.md``; in short:

* ``lower_bound_work_node_hours`` = Σ cores × runtime / cores_per_node (perfect packing, no
  boot, no idle: the work itself);
* ``lower_bound_nowait_node_hours`` = ∫ ceil(running cores(t) / cores_per_node) dt with every job
  started at its submit time (the least a pool can pay if no job ever waits);
* ``cost_ratio`` = paid_node_hours / lower_bound_nowait_node_hours;
* waits are per trace job (a job split over several nodes waits until its last piece starts),
  percentiles by the nearest-rank method.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from nodemanager.sim.swf import SwfJob

__all__ = ["Bounds", "Figures", "Series", "lower_bounds", "percentile", "format_table",
           "figures_json", "format_cell", "TABLE_COLUMNS", "COLUMN_MEANINGS", "format_legend", "destroy_boot_pairs", "dominates", "pareto_front", "cost_wait", "Verdict", "verdicts"]

HOUR = 3600.0


@dataclass(frozen=True)
class Bounds:
    """Lower bounds on node-hours for a set of jobs and one node size.

    ``nowait_peak_nodes`` is the largest ceil(running cores / cores_per_node) over time with every
    job started at submit: the node count a static pool needs so that no job waits (on perfect
    packing). ``first_submit``/``last_end`` delimit that no-wait schedule.
    """

    cores_per_node: int
    work_core_hours: float
    work_node_hours: float
    nowait_node_hours: float
    nowait_peak_nodes: int
    first_submit: float
    last_end: float


def lower_bounds(jobs: Iterable[SwfJob], cores_per_node: int) -> Bounds:
    """The work and no-wait lower bounds (see the module docstring) for ``jobs``."""
    if cores_per_node <= 0:
        raise ValueError("cores_per_node must be positive")
    events: list[tuple[float, int]] = []
    work = 0.0
    first, last = math.inf, -math.inf
    for j in jobs:
        work += j.cores * j.runtime
        first = min(first, j.submit)
        end = j.submit + j.runtime
        last = max(last, end)
        if j.runtime > 0:
            events.append((j.submit, j.cores))
            events.append((end, -j.cores))
    # Ends sort before starts at the same instant: a job ending frees its cores for one starting.
    events.sort(key=lambda e: (e[0], e[1]))
    running = 0
    nowait = 0.0
    peak = 0
    prev_t = events[0][0] if events else 0.0
    nodes = 0
    for t, delta in events:
        if t > prev_t:
            nowait += nodes * (t - prev_t)
            prev_t = t
        running += delta
        nodes = -(-running // cores_per_node)
        peak = max(peak, nodes)
    if first == math.inf:
        first = last = 0.0
    return Bounds(
        cores_per_node=cores_per_node,
        work_core_hours=work / HOUR,
        work_node_hours=work / cores_per_node / HOUR,
        nowait_node_hours=nowait / HOUR,
        nowait_peak_nodes=peak,
        first_submit=first,
        last_end=last,
    )


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values (0 for an empty sequence)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


@dataclass(frozen=True)
class Figures:
    """What one replay of one policy cost and how long jobs waited. Hours are node-hours."""

    policy: str
    trace: str
    window: str
    cores_per_node: int
    paid_node_hours: float
    busy_node_hours: float
    idle_paid_node_hours: float
    lower_bound_work_node_hours: float
    lower_bound_nowait_node_hours: float
    cost_ratio: float
    wait_p50: float
    wait_p95: float
    wait_p99: float
    wait_max: float
    wait_mean: float
    jobs_submitted: int
    jobs_completed: int
    jobs_killed: int
    jobs_unfinished: int
    badput_core_hours: float
    boots: int
    drains: int
    drain_cancels: int
    destroys: int
    late_give_backs: int
    peak_nodes: int
    wall_seconds: float
    wide_jobs_split: int = 0
    pieces: int = 0
    cycles: int = 0
    cycles_skipped: int = 0
    escalations: int = 0
    waste: dict[str, float] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    skipped_jobs: dict[str, int] = field(default_factory=dict)
    money: float = 0.0               # Σ each VM's paid seconds x its size's hourly price / 3600
    destroy_boot_60s: int = 0        # destroys followed within 60 s by a boot
    placement: str = "breadth"       # how the simulated pool placed jobs (breadth | depth)
    # spot capacity: spot VMs the cloud took back, kills split by cause
    reclaims: int = 0
    jobs_killed_by: dict[str, int] = field(default_factory=dict)
    # pieces killed because a graceful drain's retirement ran out while they ran (in jobs_killed)
    jobs_evicted: int = 0
    badput_core_hours_by: dict[str, float] = field(default_factory=dict)
    # completion minus submit of each trace job (its last piece; re-runs included), seconds
    turnaround_p50: float = 0.0
    turnaround_p95: float = 0.0
    # who spent what (SimParams.spend_by): rows of node-hours and money per user, group or size
    spend: list[dict[str, Any]] = field(default_factory=list)
    # the clairvoyant non-migrating packing's node-hours, and the share of Slurm power saving's
    # gap to it this run closed (nodemanager.sim.gap; 0 / None: not measured)
    clairvoyant_node_hours: float = 0.0
    gap_closed: float | None = None
    # runtime prediction on: predicted and requested / actual runtime (nodemanager.sim.prediction_figures)
    runtime_accuracy: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, float):
                d[k] = round(v, 4)
        return d


# (column header, attribute, format)
TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("policy", "policy", "{}"),
    ("paid nh", "paid_node_hours", "{:.1f}"),
    ("busy nh", "busy_node_hours", "{:.1f}"),
    ("idle nh", "idle_paid_node_hours", "{:.1f}"),
    ("cost/nowait", "cost_ratio", "{:.3f}"),
    ("wait p50", "wait_p50", "{:.0f}"),
    ("p95", "wait_p95", "{:.0f}"),
    ("p99", "wait_p99", "{:.0f}"),
    ("max", "wait_max", "{:.0f}"),
    ("done", "jobs_completed", "{}"),
    ("killed", "jobs_killed", "{}"),
    ("evicted", "jobs_evicted", "{}"),
    ("badput ch", "badput_core_hours", "{:.1f}"),
    ("boots", "boots", "{}"),
    ("drains", "drains", "{}"),
    ("cancels", "drain_cancels", "{}"),
    ("destroys", "destroys", "{}"),
    ("peak", "peak_nodes", "{}"),
    ("wall s", "wall_seconds", "{:.1f}"),
    ("money", "money", "{:.2f}"),
    ("d->b 60s", "destroy_boot_60s", "{}"),
    ("gap closed", "gap_closed", "{:.0%}"),
)

# what each column of the table means, printed under it (a test checks every column has one)
COLUMN_MEANINGS: dict[str, str] = {
    "policy": "the policy replayed (ours, or a baseline modelled on its project's documentation)",
    "paid nh": "node-hours paid, billing rounding and minimum charges included",
    "busy nh": "node-hours with at least one job running",
    "idle nh": "node-hours paid with no job running (booting, idle, draining)",
    "cost/nowait": "paid nh / the no-wait lower bound (1.000 = as cheap as a perfect no-wait packing)",
    "wait p50": "job wait from submit to start, in seconds: median, 95th and 99th percentile, max",
    "p95": "", "p99": "", "max": "",
    "done": "jobs completed",
    "killed": "job pieces killed, for any cause (0 unless a policy escalates or a drain evicts)",
    "evicted": "of those, pieces evicted when a graceful drain's retirement time ran out",
    "badput ch": "core-hours of work lost to killed or reclaimed jobs",
    "boots": "VMs booted",
    "drains": "drains started",
    "cancels": "drains cancelled because demand came back",
    "destroys": "VMs destroyed",
    "peak": "most VMs up at once",
    "wall s": "seconds this replay took on this machine",
    "money": "each VM's paid hours x its size's price per hour (the price's currency, as configured)",
    "d->b 60s": "destroys followed within 60 s by a boot (thrash)",
    "gap closed": "share of Slurm power saving's gap to the clairvoyant packing this run closes "
                  "(0% pays as Slurm, 100% as clairvoyance, negative: dearer than Slurm)",
}


def format_legend() -> str:
    """The meaning of every table column, one line each, for under the table."""
    lines = ["columns:"]
    for header, _, _ in TABLE_COLUMNS:
        if COLUMN_MEANINGS[header]:  # an empty meaning: the column before says it
            lines.append(f"  {header:<12} {COLUMN_MEANINGS[header]}")
    return "\n".join(lines)


def format_cell(row: Figures, attr: str, fmt: str) -> str:
    """One table cell: ``row``'s ``attr`` in ``fmt``, or ``-`` when not measured."""
    value = getattr(row, attr)
    return "-" if value is None else fmt.format(value)


def format_table(rows: Sequence[Figures]) -> str:
    """One line per policy, plus a header naming the trace, window, node size and bounds."""
    if not rows:
        return "(no results)"
    first = rows[0]
    head = (f"trace {first.trace}  window {first.window}  {first.jobs_submitted} jobs"
            f"  cores_per_node {first.cores_per_node}  placement {first.placement}-first\n"
            f"lower bounds: work {first.lower_bound_work_node_hours:.1f} node-hours, "
            f"no-wait {first.lower_bound_nowait_node_hours:.1f} node-hours"
            f"  (waits in seconds; nh = node-hours, ch = core-hours)")
    if first.clairvoyant_node_hours:
        head += (f"\nclairvoyant non-migrating packing (cv life: every runtime known, no waits, "
                 f"no job moved): {first.clairvoyant_node_hours:.1f} node-hours")
    if first.wide_jobs_split:
        head += (f"\n{first.wide_jobs_split} jobs wider than a node were split into "
                 f"{first.pieces} node-sized pieces")
    # a column no row measured (None everywhere) is left out
    columns = [c for c in TABLE_COLUMNS if any(getattr(r, c[1]) is not None for r in rows)]
    cells = [[h for h, _, _ in columns]]
    for r in rows:
        cells.append([format_cell(r, attr, fmt) for _, attr, fmt in columns])
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return head + "\n" + "\n".join(lines)


def destroy_boot_pairs(destroys: Sequence[float], boots: Sequence[float],
                       within: float = 60.0) -> int:
    """How many destroys were followed within ``within`` seconds by a boot (each boot pairs with
    at most one destroy, the earliest still unpaired; a boot at the destroy's instant counts)."""
    events = sorted([(t, 0) for t in destroys] + [(t, 1) for t in boots])
    waiting: list[float] = []
    pairs = 0
    for t, is_boot in events:
        if not is_boot:
            waiting.append(t)
            continue
        waiting = [d for d in waiting if t - d <= within]
        if waiting:
            waiting.pop(0)
            pairs += 1
    return pairs


def figures_json(rows: Sequence[Figures]) -> str:
    return json.dumps([r.as_dict() for r in rows], indent=2, sort_keys=False)



@dataclass
class Series:
    """A policy's pool over time, sampled by the replay: nodes up (launched, not destroyed),
    nodes running at least one job, demand in nodes (cores of running plus queued jobs divided
    by cores_per_node) and node-hours paid so far (billing rounding included: the last sample's
    is the table's ``paid nh``)."""

    t: list[float] = field(default_factory=list)
    up: list[int] = field(default_factory=list)
    busy: list[int] = field(default_factory=list)
    demand: list[float] = field(default_factory=list)
    paid: list[float] = field(default_factory=list)

    def add(self, t: float, up: int, busy: int, demand: float, paid: float = 0.0) -> None:
        self.t.append(t)
        self.up.append(up)
        self.busy.append(busy)
        self.demand.append(demand)
        self.paid.append(paid)


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """``a`` is at least as good as ``b`` on both axes (lower is better) and better on one."""
    return a[0] <= b[0] and a[1] <= b[1] and (a[0] < b[0] or a[1] < b[1])


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point dominates, sorted by the first axis."""
    front = [p for p in points if not any(dominates(q, p) for q in points)]
    return sorted(set(front))


def cost_wait(f: Figures) -> tuple[float, float]:
    """The point a result occupies on the cost/wait plane: (money, p95 wait seconds); money is
    paid node-hours priced per size, so with one size it orders runs as paid node-hours do."""
    return (f.money or f.paid_node_hours, f.wait_p95)


@dataclass(frozen=True)
class Verdict:
    """Is ``ours`` on or beyond ``baseline``'s Pareto front (cost, p95 wait)? ``by`` are the
    baseline's points that dominate it (cheaper and no longer p95 wait, better in one)."""

    ours: str
    baseline: str
    on_front: bool
    by: tuple[Figures, ...] = ()

    def line(self) -> str:
        if self.on_front:
            return (f"{self.ours} is on or beyond the cost/p95-wait front of {self.baseline} "
                    f"(no {self.baseline} setting is both cheaper and faster)")
        worst = min(self.by, key=cost_wait)
        knobs = ", ".join(f"{k}={v}" for k, v in worst.params.get("sweep", {}).items()) or "defaults"
        return (f"{self.ours} is DOMINATED by {self.baseline} ({knobs}): "
                f"{worst.paid_node_hours:.1f} node-hours, money {worst.money:.2f}, "
                f"p95 wait {worst.wait_p95:.0f}s")


def verdicts(ours: Figures, groups: dict[str, Sequence[Figures]]) -> list[Verdict]:
    """One :class:`Verdict` of ``ours`` against each group of baseline points."""
    me = cost_wait(ours)
    out = []
    for name, points in groups.items():
        by = tuple(f for f in points if dominates(cost_wait(f), me))
        out.append(Verdict(ours.policy, name, not by, by))
    return out
