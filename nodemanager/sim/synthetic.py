"""A synthetic SWF-like workload for replays of a big pool (benchmarks and tests).

:func:`synthetic_jobs` is seeded: the same arguments give the same jobs. Arrivals follow a daily
cycle (three times as many at the afternoon peak as at night), widths are 1, 2, 4, 8 or 16 cores
(the replay splits 16-core jobs into node-sized pieces), run times are log-normal from a minute to
a day (median 90 minutes), memory 2 GB per core, requested times 1.5 x the run time.
"""

from __future__ import annotations

import math
import random

from nodemanager.sim.swf import DAY, SwfJob

__all__ = ["synthetic_jobs"]

WIDTHS = (1, 2, 4, 8, 16)
WIDTH_WEIGHTS = (0.35, 0.2, 0.2, 0.2, 0.05)
RUNTIME_MEDIAN = 5400.0      # s; log-normal, sigma below
RUNTIME_SIGMA = 1.0
RUNTIME_MIN, RUNTIME_MAX = 60.0, DAY


def synthetic_jobs(days: float, busy_cores: int, seed: int) -> list[SwfJob]:
    """Jobs submitted over ``days`` whose work keeps about ``busy_cores`` cores busy on average."""
    rng = random.Random(seed)
    mean_cores = sum(w * p for w, p in zip(WIDTHS, WIDTH_WEIGHTS))
    # mean of the log-normal (the clipping barely moves it)
    mean_runtime = RUNTIME_MEDIAN * math.exp(RUNTIME_SIGMA ** 2 / 2)
    rate = busy_cores / (mean_cores * mean_runtime)      # jobs per second, on average
    jobs: list[SwfJob] = []
    t, end = 0.0, days * DAY
    peak = 1.5 * rate                                        # thinning: the daily cycle's top
    while True:
        t += rng.expovariate(peak)
        if t >= end:
            break
        # 0.5x at 03:00, 1.5x at 15:00
        if rng.random() * peak > rate * (1.0 - 0.5 * math.cos(2 * math.pi * (t / DAY - 0.125))):
            continue
        cores = rng.choices(WIDTHS, WIDTH_WEIGHTS)[0]
        runtime = min(RUNTIME_MAX, max(RUNTIME_MIN, rng.lognormvariate(math.log(RUNTIME_MEDIAN),
                                                                        RUNTIME_SIGMA)))
        jobs.append(SwfJob(id=len(jobs) + 1, submit=round(t), runtime=round(runtime), cores=cores,
                           mem_mb=2048 * cores, requested_time=round(runtime * 1.5)))
    return jobs
