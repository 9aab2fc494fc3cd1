"""How long the decision core takes to plan a pool of 1,000 / 10,000 / 50,000 nodes.

    python benchmarks/bench_plan.py [--repeat 5] [--sizes 1000,10000,50000]

Prints the median wall and CPU milliseconds per plan. The pool mixes SLURM and HTCondor
workers in every state, paired by name, by cloud id and not at all, with drains under way,
queued demand and budgets that force victim selection. Not a timed test: a figure to watch.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import policy_matrix
from nodemanager.core import plan
from nodemanager.daemon import tune_gc
from nodemanager.model import CloudNode, Demand, InFlight, Plan, Size, Snapshot, Worker
from nodemanager.scheduler import classified
from nodemanager.configuration.settings import CoreSettings

NOW = 1_800_000_000.0
SIZES = (Size("small", 4, 16000, 0.17), Size("large", 16, 64000, 0.68, billing_period=3600,
                                             shutdown_window=300),
         Size("arv", 8, 32000, 0.4, shutdown_windows=(54, 5, 1)))
SLURM = ["idle", "alloc", "mix", "drng", "drain", "down*", "idle~", "comp"]
SETTINGS = CoreSettings(sizes=SIZES, min_nodes=10, max_nodes=10**6, max_concurrent_drains=50,
                        max_destroys_per_hour=500, down_freeze_count=10**6)
"""Limits that make the planner choose victims and boot, as a busy pool's would."""
HTC = [("Unclaimed", "Idle", 0), ("Unclaimed", "Idle", 3), ("Drained", "Idle", 0),
       ("Drained", "Retiring", 2), ("Owner", "Idle", 0)]


def pool(n: int, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    nodes, workers, flights = [], [], []
    for i in range(n):
        nid, name = f"i-{i:08x}", f"cn-{i}"
        size = SIZES[i % len(SIZES)]
        age = rng.choice([60, 900, 3500, 7200, 86400])
        nodes.append(CloudNode(id=nid, name=name, size=size.name, launched_at=NOW - age,
                               private_ip=f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"))
        r = rng.random()
        if r < 0.05:
            continue  # unpaired
        heard = NOW - rng.choice([10, 30, 900])
        since = NOW - rng.choice([30, 200, 400, 5000])
        if r < 0.55:
            workers.append(Worker(name=name, scheduler="slurm", state=rng.choice(SLURM),
                                  last_heard=heard, state_since=since, registered_at=NOW - age + 30,
                                  cpus=size.cores, cpus_busy=rng.randint(0, size.cores)))
        else:
            st, act, d = rng.choice(HTC)
            workers.append(Worker(name=f"slot1@{name}", scheduler="htcondor", cloud_id=nid,
                                  last_heard=heard, cpus=size.cores, running_jobs=d, ad={
                                      "State": st, "Activity": act, "NumDynamicSlots": d,
                                      "EnteredCurrentState": since,
                                      "ExpectedMachineGracefulDrainingCompletion": NOW + rng.randint(-900, 9000),
                                      "ExpectedMachineGracefulDrainingBadput": rng.randint(0, 10**5),
                                      "ExpectedMachineQuickDrainingBadput": rng.randint(0, 10**6)}))
        if rng.random() < 0.02:
            flights.append(InFlight(node=nid, action="drain", since=NOW - 600))
    demand = tuple(Demand(cpus=rng.choice([1, 2, 4, 8, 12]), ram_mb=rng.choice([1000, 4000, 20000]),
                          count=rng.randint(1, max(2, n // 50))) for _ in range(20))
    return Snapshot(now=NOW, polled_at={"cloud": NOW - 5, "scheduler": NOW - 5},
                    cloud_nodes=tuple(nodes), workers=tuple(classified(w) for w in workers), demand=demand,
                    in_flight=tuple(flights), recent_destroys=(NOW - 100,) * 3)


def timed(snap: Snapshot, settings: CoreSettings, matrix: object, repeat: int) -> tuple[Plan, str]:
    """The plan of ``snap`` and its median wall and CPU time over ``repeat`` runs, in words."""
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        p = plan(snap, settings, matrix)  # type: ignore[arg-type]
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return p, (f"median {statistics.median(walls) * 1000:7.1f} ms wall, "
               f"{statistics.median(cpus) * 1000:7.1f} ms cpu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="1000,10000,50000")
    args = ap.parse_args()
    matrix = policy_matrix.load_default()
    for n in (int(x) for x in args.sizes.split(",")):
        snap = pool(n)
        tune_gc()  # as `nodemanager run` does once started (and `nodemanager bench` once the pool is built)
        p, took = timed(snap, SETTINGS, matrix, args.repeat)
        print(f"{n:>6} nodes: {took}  ({len(p.items)} items, "
              f"{sum(b.count for b in p.boots)} boots)")


if __name__ == "__main__":
    main()
