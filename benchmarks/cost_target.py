"""Issue 18's cost target against what any policy that never moves a running job can reach.

    python benchmarks/cost_target.py [--traces ../shared/traces] [--jobs 1]

For LPC-EGEE days 0-30 and HPC2N days 300-330 (one 8-core size, per-second billing) it replays
``slurm-power-save`` and ``nodemanager-cost`` (``nodemanager simulate --compare --only``) and
prints, in node-hours: the no-wait bound (it repacks running jobs: migration), the target
(Slurm power saving minus 30 % of its gap to that bound), both policies, and the clairvoyant
packings of :mod:`nodemanager.sim.clairvoyant` (every runtime known, nodes booted ahead of each
job, no waits, no migration), with first fit and with lifetime-aware placement, the latter also
believing the users' requested times instead of the real runtimes. Then the same for money with
sizes 2, 4, 8, 16 cores on LPC-EGEE (target: 10 % below the best baseline; the clairvoyant
packing on the size that wastes least). Not a timed test: the figures BENCHMARKS.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from nodemanager.sim.clairvoyant import pack
from nodemanager.sim.swf import read_jobs

WINDOWS = (("LPC-EGEE-2004-1.2-cln.swf.gz", 0, 30), ("HPC2N-2002-2.2-cln.swf.gz", 300, 30))
PER_CORE_HOUR = 0.0425   # the simulator's price (docs/simulator.md, "Several sizes and money")


def _replay(trace: str, skip: float, days: float, jobs: int, extra: list[str]) -> dict[str, dict]:
    cmd = [sys.executable, "-m", "nodemanager", "simulate", "--trace", trace, "--skip-days",
           str(skip), "--days", str(days), "--compare", "--json", "--jobs", str(jobs),
           "--billing", "per-second", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {r["policy"]: r for r in json.loads(out)["runs"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default=os.path.join("..", "shared", "traces"))
    ap.add_argument("--jobs", type=int, default=1, help="replays in parallel (default 1)")
    args = ap.parse_args()
    only = ["--only", "slurm-power-save,nodemanager-cost"]
    print(f"{'window':<28} {'no-wait':>8} {'target':>8} {'SPS':>8} {'cost':>8} {'cv first':>9} "
          f"{'cv life':>8} {'cv life/req':>11}   (node-hours; cv = clairvoyant, no migration)")
    for name, skip, days in WINDOWS:
        trace = os.path.join(args.traces, name)
        runs = _replay(trace, skip, days, args.jobs, only)
        sps, cost = runs["slurm-power-save"], runs["nodemanager-cost"]
        nowait = sps["lower_bound_nowait_node_hours"]
        target = sps["paid_node_hours"] - 0.3 * (sps["paid_node_hours"] - nowait)
        jobs = read_jobs(trace, skip_days=skip, days=days)[0]
        first, life = pack(jobs, 8, "first"), pack(jobs, 8, "lifetime")
        asked = pack(jobs, 8, "lifetime",
                     runtime=lambda j: j.requested_time if j.requested_time > 0 else float("inf"))
        print(f"{name[:14] + f' days {skip:g}-{skip + days:g}':<28} {nowait:8.1f} {target:8.1f} "
              f"{sps['paid_node_hours']:8.1f} {cost['paid_node_hours']:8.1f} "
              f"{first.total_node_hours:9.1f} {life.total_node_hours:8.1f} "
              f"{asked.total_node_hours:11.1f}")
        print(f"{'':<28} p95 wait: SPS {sps['wait_p95']:.0f} s, cost {cost['wait_p95']:.0f} s "
              f"(target <= {1.1 * sps['wait_p95']:.0f} s); clairvoyant: 0 s; "
              f"boots cv life {life.boots}, overhead {life.overhead_node_hours:.1f} nh")
    name, skip, days = WINDOWS[0]
    trace = os.path.join(args.traces, name)
    runs = _replay(trace, skip, days, args.jobs, ["--sizes", "2,4,8,16"])
    best = min((r for k, r in runs.items() if not k.startswith("nodemanager")), key=lambda r: r["money"])
    jobs = read_jobs(trace, skip_days=skip, days=days)[0]
    widest = max(j.cores for j in jobs)
    cv = {c: pack(jobs, c, "lifetime") for c in (2, 4, 8, 16) if c >= widest}
    c, p = min(cv.items(), key=lambda kv: kv[1].total_node_hours * kv[0])
    print(f"\nsizes 2,4,8,16 on {name} days {skip:g}-{skip + days:g} (money): best baseline "
          f"{best['policy']} {best['money']:.2f} (p95 {best['wait_p95']:.0f} s), target "
          f"{0.9 * best['money']:.2f}; nodemanager-cost {runs['nodemanager-cost']['money']:.2f} "
          f"(p95 {runs['nodemanager-cost']['wait_p95']:.0f} s); clairvoyant lifetime packing on "
          f"{c}-core nodes {p.total_node_hours * c * PER_CORE_HOUR:.2f} "
          f"(work alone {sum(j.cores * j.runtime for j in jobs) / 3600 * PER_CORE_HOUR:.2f})")


if __name__ == "__main__":
    main()
