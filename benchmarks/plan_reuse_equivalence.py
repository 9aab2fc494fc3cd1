"""The plan with reuse across cycles against the plan made afresh, at full strength: random worlds
(tests/test_plan_reuse.py: nodes and workers that come, change and go, time jumps, the clock
stepped back, holds, forced drains, reclaim notices, reloads; and the cost profile's world with
consolidation and max_lifetime), each cycle's two plans compared. The property tests run a slice
of it; this runs the seeds and cycles the reuse was held to. Exit status 1 on the first difference,
naming the world and seed.

    PYTHONPATH=. python benchmarks/plan_reuse_equivalence.py [--seeds 350] [--cycles 40] [--first 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from tests.test_plan_reuse import FULL_CYCLES, FULL_SEEDS, CostWorld, World, plans_agree


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=FULL_SEEDS, help="random worlds per kind (default %(default)s)")
    p.add_argument("--cycles", type=int, default=FULL_CYCLES, help="cycles per world (default %(default)s)")
    p.add_argument("--first", type=int, default=0, help="the first seed (default %(default)s)")
    args = p.parse_args(argv)
    start = time.monotonic()
    reused = 0
    for kind in (World, CostWorld):
        for seed in range(args.first, args.first + args.seeds):
            try:
                reused += plans_agree(kind(random.Random(seed)), cycles=args.cycles).reused
            except AssertionError:
                print(f"{kind.__name__} seed {seed}: the plan with reuse differs from the plan made afresh",
                      file=sys.stderr)
                raise
    print(f"{2 * args.seeds} worlds x {args.cycles} cycles: every plan with reuse equals the plan made "
          f"afresh ({reused} node facts reused) in {time.monotonic() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
