"""Write a seeded synthetic site history as SLURM's ``sacct --parsable2`` or HTCondor's
``condor_history -json`` / ``-af`` would print it, for ``simulate --history`` and ``advise``.

    python benchmarks/site_history.py --format sacct --shape bursts --days 7 --nodes 20 --seed 1 -o /tmp/site.sacct
    nodemanager simulate --history /tmp/site.sacct --format sacct
    nodemanager advise --history /tmp/site.sacct --format sacct

The jobs are those of ``benchmarks/synthetic_workload.py`` with the same arguments (the same
seed writes the same file); ``--format condor-af`` writes ``-af`` output, read with
``--format condor``. docs/simulator.md, "Replaying your own history".
"""

from __future__ import annotations

import argparse
import sys

from nodemanager.sim.history.write import WRITERS
from nodemanager.sim.workloads import SHAPES, shaped_jobs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", choices=sorted(WRITERS), default="sacct")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="bursts")
    ap.add_argument("--days", type=float, default=7.0, help="submission window (default 7)")
    ap.add_argument("--nodes", type=int, default=20, help="average busy 8-core nodes (default 20)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", help="file to write (default: standard output)")
    args = ap.parse_args()
    jobs = shaped_jobs(args.shape, args.days, args.nodes * 8, args.seed)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            WRITERS[args.format](out, jobs)
        print(f"{len(jobs)} jobs written to {args.output}", file=sys.stderr)
    else:
        WRITERS[args.format](sys.stdout, jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
