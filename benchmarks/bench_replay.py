"""How long one replay of a big pool takes: a synthetic 30-day window of about 400 busy 8-core nodes.

    python benchmarks/bench_replay.py [--days 30] [--nodes 400] [--seed 18] [--no-skip]
                                      [--policy nodemanager|nodemanager-cost] [--profile FILE]

The job list is :func:`nodemanager.sim.synthetic.synthetic_jobs` (SWF-like, seeded, a daily
cycle, mixed widths and lengths), its arrival rate set so the work averages ``--nodes`` x 8 busy
cores.

One replay under the default policy (shipped matrix, embedded defaults, one 8-core size billed
per second, ``max_nodes`` = the no-wait peak, as ``nodemanager simulate`` sets it), or with
``--policy nodemanager-cost`` under the cost profile (its matrix, consolidation); prints its
wall time and CPU time (this process; the machine may be shared), cycles run and skipped, and
the figures row. ``--no-skip`` runs every cycle of the
grid; ``--profile FILE`` writes a cProfile of the replay (read it with ``python -m pstats``).
Not a timed test: a figure to watch (BENCHMARKS.md, "Replay speed").
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from nodemanager.sim.synthetic import synthetic_jobs

CORES = 8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=float, default=30.0, help="window length (default 30)")
    ap.add_argument("--nodes", type=int, default=400, help="average busy 8-core nodes (default 400)")
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--no-skip", action="store_true", help="run every cycle (skip_cycles=False)")
    ap.add_argument("--policy", choices=("nodemanager", "nodemanager-cost"), default="nodemanager",
                    help="the default policy, or the default under the cost profile")
    ap.add_argument("--profile", metavar="FILE", help="write a cProfile of the replay to FILE")
    args = ap.parse_args()

    from nodemanager.configuration.config import loads
    from nodemanager.sim import baselines as B
    from nodemanager.sim.figures import format_table, lower_bounds
    from nodemanager.sim.replay import replay

    jobs = synthetic_jobs(args.days, args.nodes * CORES, args.seed)
    bounds = lower_bounds(jobs, CORES)
    cost = args.policy == "nodemanager-cost"
    settings = loads("", "<embedded defaults>", profile="cost" if cost else None)
    settings = replace(settings, core=replace(settings.core, sizes=(B.default_size(CORES),),
                                              max_nodes=max(1, bounds.nowait_peak_nodes)))
    if cost:
        import policy_matrix

        policy = B.ours(settings, policy_matrix.load(settings.matrix_file), args.policy)
    else:
        policy = B.ours(settings)
    print(f"{len(jobs)} jobs over {args.days:g} days (seed {args.seed}); work "
          f"{bounds.work_node_hours / (args.days * 24):.0f} busy nodes on average, no-wait peak "
          f"{bounds.nowait_peak_nodes} nodes", flush=True)
    window = f"days 0-{args.days:g}"
    t0, cpu0 = time.perf_counter(), time.process_time()
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        res = prof.runcall(replay, jobs, policy, B.SimParams(), bounds, trace="synthetic",
                           window=window, record_series=False, skip_cycles=not args.no_skip)
        prof.dump_stats(args.profile)
    else:
        res = replay(jobs, policy, B.SimParams(), bounds, trace="synthetic", window=window,
                     record_series=False, skip_cycles=not args.no_skip)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    f = res.figures
    print(f"wall {wall:.1f} s  cpu {cpu:.1f} s  cycles run {f.cycles}  skipped {f.cycles_skipped}  "
          f"({cpu / max(1, f.cycles) * 1000:.1f} ms cpu per cycle run)")
    print(format_table([f]))


if __name__ == "__main__":
    main()
