"""Write a seeded synthetic workload in a shape the policies were not tuned on, as an SWF trace
or as a site's history.

    python benchmarks/synthetic_workload.py [--shape long-wide] [--days 30] [--nodes 50]
                                            [--seed 1] [-o /tmp/long-wide.swf]
    nodemanager simulate --trace /tmp/long-wide.swf --compare
    python benchmarks/synthetic_workload.py --format sacct --shape bursts --days 7 --nodes 20 -o /tmp/site.sacct
    nodemanager advise --history /tmp/site.sacct --format sacct --config nodemanager.ini

``--format sacct`` writes ``sacct --parsable2`` lines (each job with its ``.batch`` step),
``condor`` ``condor_history -json`` output, ``condor-af`` ``condor_history -af`` output (read with
``--format condor``); the same jobs as the SWF trace, each submitted on 2026-11-01 plus its
submit time.

Shapes (:data:`nodemanager.sim.workloads.SHAPES`): ``long`` (10 % of the core-hours in jobs of
1-5 days), ``wide`` (25 % in jobs of 16-128 cores, wider than an 8-core node), ``long-wide``
(both), ``bursts`` (15 % in bursts of 200 short jobs within a minute), ``quiet`` (nothing
submitted from 20:00 to 08:00), ``all`` (all of those), ``users`` (the plain mix owned by 100 users
of Zipf-like weights, each submitting in batches); the rest is the plain mix of the replay benchmark. The
work averages ``--nodes`` busy 8-core nodes. The same arguments write the same file.
docs/simulator.md, "Synthetic workloads".
"""

from __future__ import annotations

import argparse
import sys

from nodemanager.sim.history.write import WRITERS
from nodemanager.sim.workloads import SHAPES, shaped_workload, write_swf


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="long-wide")
    ap.add_argument("--format", choices=("swf", *sorted(WRITERS)), default="swf",
                    help="swf (default), or a site's history: sacct, condor (-json), condor-af")
    ap.add_argument("--days", type=float, default=30.0, help="submission window (default 30)")
    ap.add_argument("--nodes", type=int, default=50, help="average busy 8-core nodes (default 50)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", help="SWF file to write (default: standard output)")
    args = ap.parse_args()
    jobs = shaped_workload(args.shape, args.days, args.nodes * 8, args.seed)
    notes = [f"shape {args.shape}, {args.days:g} days, {args.nodes} busy 8-core nodes on average, "
             f"seed {args.seed} (benchmarks/synthetic_workload.py)"]
    def write(out):
        if args.format == "swf":
            write_swf(out, jobs, notes)
        else:
            WRITERS[args.format](out, [j for j, _ in jobs])

    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            write(out)
        print(f"{len(jobs)} jobs written to {args.output}", file=sys.stderr)
    else:
        write(sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
