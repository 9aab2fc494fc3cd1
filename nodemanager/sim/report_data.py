"""What the report's plots draw, as data (pure; the drawing is :mod:`nodemanager.sim.report`):
nodes up and demand per policy as means over time bins (one line each, not a 0/1 step per
node), and node-hours paid so far per policy, ending at the table's ``paid nh``. Written next to
the PNGs as ``plots.json`` so a reader can check a plot against the table."""

from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from nodemanager.sim.figures import Series

__all__ = ["Binned", "CostLine", "bin_seconds", "binned", "cost_lines", "plots_json", "same_as"]

DAY = 86400.0
BINS = 40  # about this many points per line over the window: a trend, not every boot


@dataclass(frozen=True)
class Binned:
    """One policy's pool over time: per bin (start ``t``, seconds) the mean nodes up, nodes
    running jobs and demand in nodes, and ``mean_up``/``mean_demand`` over the whole window."""

    policy: str
    bin_seconds: float
    t: tuple[float, ...]
    up: tuple[float, ...]
    busy: tuple[float, ...]
    demand: tuple[float, ...]
    mean_up: float
    mean_demand: float


@dataclass(frozen=True)
class CostLine:
    """Node-hours paid so far over time for one policy; ``total`` is the table's ``paid nh``."""

    policy: str
    t: tuple[float, ...]
    paid: tuple[float, ...]
    total: float


def bin_seconds(span: float) -> float:
    """A round bin width giving about :data:`BINS` bins over ``span`` seconds (5 min at least)."""
    for width in (300.0, 900.0, 1800.0, 3600.0, 2 * 3600.0, 3 * 3600.0, 6 * 3600.0, 12 * 3600.0, DAY):
        if span / width <= BINS:
            return width
    return DAY * max(1, round(span / DAY / BINS))


def _weighted_bins(s: Series, width: float) -> tuple[list[float], list[list[float]]]:
    """Time-weighted means per bin of the step series up, busy, demand (each sample holds until
    the next one)."""
    end = s.t[-1] if s.t else 0.0
    n = max(1, int(end // width) + 1)
    sums = [[0.0] * n for _ in range(3)]
    weight = [0.0] * n
    for k in range(len(s.t) - 1):
        a, b = s.t[k], s.t[k + 1]
        values = (s.up[k], s.busy[k], s.demand[k])
        while a < b:
            i = min(n - 1, int(a // width))
            cut = min(b, (i + 1) * width)
            for row, v in zip(sums, values):
                row[i] += v * (cut - a)
            weight[i] += cut - a
            a = cut
    keep = [i for i in range(n) if weight[i] > 0]
    return [i * width for i in keep], [[row[i] / weight[i] for i in keep] for row in sums]


def binned(series: Mapping[str, Series]) -> list[Binned]:
    """Every policy's pool as means over bins of one common width."""
    span = max((s.t[-1] for s in series.values() if s.t), default=0.0)
    width = bin_seconds(span)
    out = []
    for policy, s in series.items():
        t, (up, busy, demand) = _weighted_bins(s, width)
        total = s.t[-1] - s.t[0] if len(s.t) > 1 else 0.0

        def mean(values: Sequence[float]) -> float:
            if total <= 0:
                return float(values[0]) if values else 0.0
            return sum(values[k] * (s.t[k + 1] - s.t[k]) for k in range(len(s.t) - 1)) / total
        out.append(Binned(policy=policy, bin_seconds=width, t=tuple(t), up=tuple(up),
                          busy=tuple(busy), demand=tuple(demand), mean_up=mean(s.up),
                          mean_demand=mean(s.demand)))
    return out


def cost_lines(series: Mapping[str, Series]) -> list[CostLine]:
    """Paid node-hours so far per policy, as the replay sampled the cloud's billing; the last
    sample is taken at the replay's end, so ``total`` is the table's ``paid nh``."""
    return [CostLine(policy=p, t=tuple(s.t), paid=tuple(s.paid), total=s.paid[-1] if s.paid else 0.0)
            for p, s in series.items()]


def same_as(lines: Sequence[CostLine], rel: float = 0.005) -> dict[str, str]:
    """Policy -> the earlier policy whose paid line it equals within ``rel`` of its total at every
    sample (drawn on top of each other, the legend must say so)."""
    out: dict[str, str] = {}
    for i, a in enumerate(lines):
        for b in lines[:i]:
            if b.policy not in out and b.t and _close(a, b, rel * max(1.0, a.total)):
                out[a.policy] = b.policy
                break
    return out


def _close(a: CostLine, b: CostLine, tol: float) -> bool:
    """Every sample of ``a`` within ``tol`` of ``b`` at that time (``b`` read as a step line)."""
    if abs(a.total - b.total) > tol:
        return False
    for t, v in zip(a.t, a.paid):
        k = max(0, bisect.bisect_right(b.t, t) - 1)
        if abs(v - b.paid[k]) > tol:
            return False
    return True


def plots_json(nodes: Sequence[Binned], cost: Sequence[CostLine]) -> dict[str, Any]:
    """The plots' data as ``plots.json`` holds it."""
    return {"nodes": [asdict(b) for b in nodes],
            "cost": [{**asdict(c), "t": list(c.t), "paid": [round(v, 4) for v in c.paid]} for c in cost]}
