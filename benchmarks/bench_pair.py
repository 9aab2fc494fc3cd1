"""How long pairing cloud nodes with workers takes, afresh and from the last cycle's pairing.

    python benchmarks/bench_pair.py [--repeat 20] [--sizes 500,10000]

The pool is :func:`bench_plan.pool`'s (paired by name, by cloud id and not at all). ``afresh``
is :func:`nodemanager.core.pair.pair`; ``memo`` is :class:`nodemanager.core.pair.PairMemo` given
the same listing and new records of the same workers (last_heard moved on: the pairing fields
unchanged), as most cycles of a busy pool are. Prints median CPU microseconds per pairing. Not a
timed test: a figure to watch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_plan import pool  # noqa: E402

from nodemanager.core.pair import PairMemo, pair  # noqa: E402


def _median_us(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        times.append(time.thread_time() - t)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--sizes", default="500,10000")
    args = ap.parse_args()
    print(f"{'nodes':>6}  {'workers':>7}  {'afresh us':>9}  {'memo us':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        snap = pool(n)
        nodes, workers = snap.cloud_nodes, snap.workers
        heard = [replace(w, last_heard=w.last_heard + 60) for w in workers]
        memo = PairMemo()
        memo.pair(nodes, workers)
        assert memo.pair(nodes, heard) == pair(nodes, heard)
        afresh = _median_us(lambda: pair(nodes, heard), args.repeat)
        reused = _median_us(lambda: memo.pair(nodes, heard), args.repeat)
        print(f"{n:>6}  {len(workers):>7}  {afresh:>9.0f}  {reused:>8.0f}")


if __name__ == "__main__":
    main()
