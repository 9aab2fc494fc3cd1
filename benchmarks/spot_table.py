"""Issue 15's Done-when table: LPC-EGEE's first 30 days, on-demand only against a spot copy of the
size at 0.3 of its price, at several reclaim rates. Prints one markdown row per run.

    python benchmarks/spot_table.py [--traces DIR] [--factor 0.3] [--rates 0,0.0017,0.0073,0.05,0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def replay(trace: str, *flags: str) -> dict:
    cmd = [sys.executable, "-m", "nodemanager", "simulate", "--trace", trace, "--days", "30",
           "--jobs", "1", "--json", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    [run] = json.loads(done.stdout)["runs"]
    return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", default=os.path.join("..", "shared", "traces"))
    p.add_argument("--factor", default="0.3")
    p.add_argument("--rates", default="0,0.0017,0.0073,0.05,0.2")
    args = p.parse_args()
    trace = os.path.join(args.traces, "LPC-EGEE-2004-1.2-cln.swf.gz")
    base = replay(trace)
    print("| run | money | / on-demand | paid nh | reclaims | killed by reclaim | killed by us "
          "| reclaim badput ch | % of delivered ch | p95 wait s | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    runs = [("on-demand only", base)] + [
        (f"spot x{args.factor}, {rate}/VM-day", replay(trace, "--spot-price-factor", args.factor,
                                                       "--spot-interruptions-per-day", rate))
        for rate in args.rates.split(",")]
    for name, r in runs:
        delivered = r["lower_bound_work_node_hours"] * r["cores_per_node"]  # the jobs' own core-hours
        by = r["jobs_killed_by"]
        bad = r["badput_core_hours_by"]["by_reclaim"]
        print(f"| {name} | {r['money']:.2f} | {r['money'] / base['money']:.3f} | {r['paid_node_hours']:.1f} "
              f"| {r['reclaims']} | {by['by_reclaim']} | {by['by_us']} | {bad:.1f} "
              f"| {100 * bad / delivered:.3f} | {r['wait_p95']:.0f} | {r['wall_seconds']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
