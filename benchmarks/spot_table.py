"""Spot capacity's table: a workload on on-demand only against a spot copy of the size at 0.3 of
its price, at several reclaim rates; with ``--told R0`` the spot sizes are configured with R0
reclaims per VM-day while the market has each rate of ``--rates`` (the controller must learn it);
with ``--spot-config INI`` the spot runs read that configuration (e.g. ``[Daemon]
runtime_prediction = recent``) under the on-demand run's node cap. Prints one markdown row per run.

    python benchmarks/spot_table.py [--trace PATH] [--days 30] [--factor 0.3]
                                    [--rates 0,0.0017,0.0073,0.05,0.2] [--told R0] [--spot-config INI]
                                    [-- more simulate flags]

Badput is the core-hours of work the reclaims threw away, as a share of the work bound (the
jobs' own core-hours); turnaround is completion minus submit of each trace job, re-runs included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def replay(trace: str, days: str, *flags: str) -> tuple[dict, int]:
    """The run's figures and its node cap."""
    cmd = [sys.executable, "-m", "nodemanager", "simulate", "--trace", trace, "--jobs", "1", "--json",
           *(("--days", days) if days else ()), *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    doc = json.loads(done.stdout)
    [run] = doc["runs"]
    return run, doc["max_nodes"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default=os.path.join("..", "shared", "traces", "LPC-EGEE-2004-1.2-cln.swf.gz"))
    p.add_argument("--days", default="30", help="the window's days ('' for the whole trace)")
    p.add_argument("--factor", default="0.3")
    p.add_argument("--rates", default="0,0.0017,0.0073,0.05,0.2")
    p.add_argument("--told", help="the reclaims per VM-day the spot sizes are configured with")
    p.add_argument("--spot-config", help="the configuration the spot runs read (with the on-demand run's node cap)")
    p.add_argument("more", nargs="*", help="more simulate flags (after --)")
    args = p.parse_args()
    base, cap = replay(args.trace, args.days, *args.more)
    config = ("--config", args.spot_config, "--max-nodes", str(cap)) if args.spot_config else ()
    print("| run | money | / on-demand | paid nh | reclaims | killed by reclaim | killed by us "
          "| reclaim badput ch | % of work | p95 wait s | p95 turnaround h | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    told = ("--spot-configured-rate", args.told) if args.told else ()
    runs = [("on-demand only", base)] + [
        (f"spot x{args.factor}, {rate}/VM-day" + (f" (configured {args.told})" if args.told else ""),
         replay(args.trace, args.days, "--spot-price-factor", args.factor, "--spot-interruptions-per-day", rate,
                *told, *config, *args.more)[0])
        for rate in args.rates.split(",")]
    for name, r in runs:
        work = r["lower_bound_work_node_hours"] * r["cores_per_node"]  # the jobs' own core-hours
        by = r["jobs_killed_by"]
        bad = r["badput_core_hours_by"]["by_reclaim"]
        print(f"| {name} | {r['money']:.2f} | {r['money'] / base['money']:.3f} | {r['paid_node_hours']:.1f} "
              f"| {r['reclaims']} | {by['by_reclaim']} | {by['by_us'] + by['by_eviction']} | {bad:.1f} "
              f"| {100 * bad / work:.3f} | {r['wait_p95']:.0f} | {r['turnaround_p95'] / 3600:.2f} "
              f"| {r['wall_seconds']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
