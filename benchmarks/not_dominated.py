"""Is ``nodemanager-cost`` dominated on any window the benchmarks replay? One table row per window.

    python benchmarks/not_dominated.py [--traces ../shared/traces] [--windows lpc,hpc2n,long-wide,...]
                                       [--synthetic-days 14] [--synthetic-nodes 20] [--seed 1]
                                       [--sweep idle_grace=60,120,600,1200]

Each window is replayed with ``nodemanager simulate --compare --json --jobs 1`` (per-second billing,
one 8-core size): every baseline at its defaults, and the baselines an idle timeout moves
(:data:`SWEPT`) at each ``--sweep`` value (``cobald`` does not read it; ``static``'s own sweep, fewer
nodes, waits hours: neither can be as fast as the profile, so they are left out to halve the time).
A baseline point *dominates* the profile when it is as cheap (money) and as fast (p95 wait) as
``nodemanager-cost``, both at once (ties count against the profile). The row also gives the profile
against Slurm power saving's defaults (the target: never more than 0.5 % dearer) and the jobs
killed. Windows: LPC-EGEE days 0-30 and HPC2N days 300-330 (the default retirement), the synthetic
long/wide workload (30 days, 50 busy nodes) and the ``bursts``, ``quiet`` and ``users`` shapes of
:mod:`nodemanager.sim.workloads` (``--synthetic-days`` at ``--synthetic-nodes``), these with
``--max-retirement 72h``; the synthetic traces are written to a temporary directory with a fixed
seed. Not a timed test: the figures BENCHMARKS.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Sequence

from nodemanager.sim.workloads import shaped_workload, write_swf

SYNTHETIC = ("bursts", "quiet", "users")
WINDOWS = ("lpc", "hpc2n", "long-wide", *SYNTHETIC)
SPS = "slurm-power-save"
SWEPT = ("arvados", "cluster-autoscaler", SPS, "karpenter")
UNSWEPT = ("nodemanager-cost", "static", "cobald")
COST = "nodemanager-cost"


@dataclass(frozen=True)
class Window:
    name: str
    flags: tuple[str, ...]      # simulate's trace and window flags


@dataclass(frozen=True)
class Row:
    window: str
    cost: dict[str, Any]
    sps: dict[str, Any]
    by: tuple[dict[str, Any], ...]   # the baseline points as cheap and as fast as the profile


def point(run: dict[str, Any]) -> tuple[float, float]:
    """(money, p95 wait s): lower is better on both."""
    return run["money"], run["wait_p95"]


def as_good(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """``a`` is as cheap and as fast as ``b``."""
    return point(a)[0] <= point(b)[0] and point(a)[1] <= point(b)[1]


def judge(window: str, doc: dict[str, Any]) -> Row:
    """The profile's row from one ``simulate --compare --json`` document."""
    runs = doc["runs"] + doc["sweep"]
    [cost] = [r for r in doc["runs"] if r["policy"] == COST]
    [sps] = [r for r in doc["runs"] if r["policy"] == SPS]
    baselines = [r for r in runs if not r["params"].get("baseline", r["policy"]).startswith("nodemanager")]
    return Row(window=window, cost=cost, sps=sps, by=tuple(r for r in baselines if as_good(r, cost)))


def windows(names: Sequence[str], traces: str, tmp: str, days: float, nodes: int, seed: int) -> list[Window]:
    out = []
    for name in names:
        if name == "lpc":
            out.append(Window("LPC-EGEE days 0-30", ("--trace", os.path.join(traces, "LPC-EGEE-2004-1.2-cln.swf.gz"),
                                                     "--days", "30")))
        elif name == "hpc2n":
            out.append(Window("HPC2N days 300-330", ("--trace", os.path.join(traces, "HPC2N-2002-2.2-cln.swf.gz"),
                                                     "--skip-days", "300", "--days", "30")))
        else:
            shape_days, shape_nodes = (30.0, 50) if name == "long-wide" else (days, nodes)
            path = os.path.join(tmp, f"{name}-{seed}.swf")
            with open(path, "w", encoding="utf-8") as f:
                write_swf(f, shaped_workload(name, shape_days, shape_nodes * 8, seed))
            out.append(Window(f"{name}, seed {seed} ({shape_days:g} days, {shape_nodes} nodes)",
                              ("--trace", path, "--max-retirement", "72h")))
    return out


def replay(window: Window, sweep: str) -> dict[str, Any]:
    """The runs and sweep points of both replays, as one ``simulate --json`` document."""
    doc: dict[str, Any] = {"runs": [], "sweep": []}
    for only, swept in ((UNSWEPT, ()), (SWEPT, ("--sweep", sweep))):
        cmd = [sys.executable, "-m", "nodemanager", "simulate", *window.flags, "--compare", "--only", ",".join(only),
               *swept, "--json", "--jobs", "1", "--billing", "per-second"]
        part = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        doc["runs"] += part["runs"]
        doc["sweep"] += part["sweep"]
    return doc


def line(row: Row) -> str:
    c, s = row.cost, row.sps
    vs = 100 * (c["money"] / s["money"] - 1)
    by = "; ".join(f"{r['policy']} {r['money']:.2f} ({r['wait_p95']:.0f})" for r in row.by)
    killed = c["jobs_killed"]
    return (f"| {row.window} | {s['money']:.2f} ({s['wait_p95']:.0f}) | {c['money']:.2f} ({c['wait_p95']:.0f}) "
            f"| {vs:+.2f} % | {killed} | {'**yes**: ' + by if by else 'no'} |")


HEADER = ("| window | Slurm power saving money (p95 s) | nodemanager-cost money (p95 s) | cost vs SPS "
          "| killed (cost) | a baseline point as cheap and as fast |\n|---|---|---|---|---|---|")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default=os.path.join("..", "shared", "traces"))
    ap.add_argument("--windows", default=",".join(WINDOWS), help=f"some of {', '.join(WINDOWS)}")
    ap.add_argument("--synthetic-days", type=float, default=14.0)
    ap.add_argument("--synthetic-nodes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sweep", default="idle_grace=60,120,600,1200")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.windows.split(",") if n.strip()]
    unknown = [n for n in names if n not in WINDOWS]
    if unknown or not names:
        ap.error(f"--windows: unknown {', '.join(unknown) or '(none)'}; one of {', '.join(WINDOWS)}")
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for w in windows(names, args.traces, tmp, args.synthetic_days, args.synthetic_nodes, args.seed):
            print(line(judge(w.name, replay(w, args.sweep))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
