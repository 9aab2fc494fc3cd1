"""How long the core takes to plan when demand has requirements: 500 demand signatures (GPUs,
scheduler-matched sizes, plain) against 20 sizes, on pools of 1,000 and 10,000 nodes.

    python benchmarks/bench_placement.py [--repeat 5] [--nodes 1000,10000]

Prints the median wall and CPU milliseconds per plan and what it booted. Not a timed test.
"""

from __future__ import annotations

import argparse
import dataclasses
import random

import policy_matrix
from bench_plan import SETTINGS, pool, timed
from nodemanager.model import Demand, Size

# 2..64 cores at a near-linear price, and GPU sizes of 1..8 GPUs
SIZES = tuple(Size(f"c{c}-{k}", c, 4000 * c, round(0.05 * c * (1 - 0.01 * k), 4))
              for c in (2, 4, 8, 16, 32, 64) for k in range(2)) + tuple(
    Size(f"g{g}", 8 * g, 32000 * g, 1.0 * g, gpus=g) for g in (1, 2, 4, 8)) + tuple(
    Size(f"old{c}", c, 2000 * c, 0.06 * c) for c in (4, 8, 16, 32))


def demand(rng: random.Random, n: int) -> tuple[Demand, ...]:
    names = [s.name for s in SIZES]
    out = []
    for _ in range(n):
        kind = rng.random()
        d = Demand(cpus=rng.choice([1, 1, 2, 4, 8]), ram_mb=rng.choice([1000, 2000, 8000]),
                   count=rng.randint(1, 200))
        if kind < 0.1:
            d = dataclasses.replace(d, gpus=rng.choice([1, 2]))
        elif kind < 0.4:
            d = dataclasses.replace(d, sizes=frozenset(rng.sample(names, rng.randint(1, 6))))
        elif kind < 0.42:
            d = dataclasses.replace(d, sizes=frozenset(), unmatched="no size offers it")
        out.append(d)
    return tuple(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--nodes", default="1000,10000")
    args = ap.parse_args()
    matrix = policy_matrix.load_default()
    settings = dataclasses.replace(SETTINGS, sizes=SIZES + SETTINGS.sizes)
    for n in (int(x) for x in args.nodes.split(",")):
        snap = dataclasses.replace(pool(n), demand=demand(random.Random(n), 500))
        p, took = timed(snap, settings, matrix, args.repeat)
        booted = {b.size: b.count for b in p.boots}
        print(f"{n:>6} nodes, 500 demand signatures, {len(settings.sizes)} sizes: {took}  "
              f"({sum(booted.values())} boots of {len(booted)} sizes, {len(p.unmet)} unmet)")


if __name__ == "__main__":
    main()
