"""Seeded synthetic workloads in shapes the policies were not tuned on, and an SWF writer for them.

:func:`shaped_jobs` builds a window of jobs whose core-hours are split between parts, each a
fixed share of the whole (:data:`SHAPES` names the mixes):

* ``long``: multi-day jobs, 1 to 5 days (uniform), 1 to 8 cores: :data:`LONG_SHARE` of the
  core-hours;
* ``wide``: jobs wider than a node, 16 to 128 cores in whole 8-core nodes, 1 to 12 hours
  (log-uniform): :data:`WIDE_SHARE` of the core-hours;
* ``bursts``: :data:`BURST_SHARE` of the core-hours arrive in bursts (each :data:`BURST_JOBS`
  short jobs within a minute, a few times a day at random hours);
* ``quiet``: no job is submitted between 20:00 and 08:00 (a long quiet night); the other parts'
  arrivals move into the day;
* ``users``: the plain mix's jobs belong to :data:`MANY_USERS` users of Zipf-like weights (the
  k-th submits 1/k as much), each submitting in batches of up to :data:`USER_BATCH` jobs within
  :data:`USER_BATCH_SPREAD` seconds of the batch's first (many users, each with a session);
* the rest is the plain mix of :func:`nodemanager.sim.synthetic.synthetic_jobs` (1-16 cores,
  log-normal run times of a minute to a day), arriving on its daily cycle.

Every part is filled job by job until it holds its share of ``busy_cores`` x the window, so the
shares hold to within one job. The same arguments give the same jobs. Requested times are 1.5 x
the run time (a user who knows the job), memory 2 GB per core; the SWF user field tells the
parts apart (:data:`USERS`). ``benchmarks/synthetic_workload.py`` writes one to a file that
``nodemanager simulate --trace`` replays (docs/simulator.md, "Synthetic workloads").
"""

from __future__ import annotations

import math
import random
from typing import Callable, Iterable, Sequence, TextIO

from nodemanager.sim.swf import DAY, SwfJob
from nodemanager.sim.synthetic import synthetic_jobs

__all__ = ["SHAPES", "PARTS", "USERS", "MANY_USERS", "USER_BATCH", "USER_BATCH_SPREAD", "LONG_SHARE", "WIDE_SHARE", "BURST_SHARE", "BURST_JOBS",
           "QUIET_FROM", "QUIET_UNTIL", "shaped_workload", "shaped_jobs", "write_swf"]

PARTS = ("long", "wide", "bursts", "quiet")
SHAPES: dict[str, frozenset[str]] = {
    "long": frozenset({"long"}),
    "wide": frozenset({"wide"}),
    "long-wide": frozenset({"long", "wide"}),
    "bursts": frozenset({"bursts"}),
    "quiet": frozenset({"quiet"}),
    "all": frozenset(PARTS),
    "users": frozenset({"users"}),
}
LONG_SHARE = 0.10
WIDE_SHARE = 0.25
BURST_SHARE = 0.15
BURST_JOBS = 200
NODE_CORES = 8
# the SWF user (field 12) of each part's jobs; the plain mix has its own
USERS = {"plain": 1, "long": 2, "wide": 3, "bursts": 4}
QUIET_FROM, QUIET_UNTIL = 20 * 3600.0, 8 * 3600.0   # seconds into the day
MANY_USERS = 100          # the users shape's users: SWF users 101 to 200
USER_BATCH = 10
USER_BATCH_SPREAD = 300.0


def _arrival(rng: random.Random, days: float, quiet: bool) -> float:
    """A submit time on the plain mix's daily cycle (0.5x at 03:00, 1.5x at 15:00), never in the
    quiet night when ``quiet``."""
    while True:
        t = rng.random() * days * DAY
        if quiet and _in_quiet_night(t):
            continue
        if rng.random() * 1.5 <= 1.0 - 0.5 * math.cos(2 * math.pi * (t / DAY - 0.125)):
            return t


def _in_quiet_night(t: float) -> bool:
    tod = t % DAY
    return tod >= QUIET_FROM or tod < QUIET_UNTIL


def _fill(budget: float, draw: Callable[[], tuple[float, int]]) -> list[tuple[float, int]]:
    """(run time, cores) pairs drawn until their core-seconds reach ``budget``; the last one is
    kept when that comes nearer the budget than stopping short."""
    out: list[tuple[float, int]] = []
    total = 0.0
    while total < budget:
        runtime, cores = draw()
        if total + runtime * cores - budget > budget - total:
            break
        out.append((runtime, cores))
        total += runtime * cores
    return out


def shaped_workload(shape: str, days: float, busy_cores: int,
                    seed: int) -> list[tuple[SwfJob, str]]:
    """Jobs submitted over ``days`` whose work keeps about ``busy_cores`` cores busy on average,
    in the parts of ``shape`` (a key of :data:`SHAPES`), each with the name of its part (``plain``
    for the plain mix); sorted by submit time, ids from 1."""
    if shape not in SHAPES:
        raise ValueError(f"unknown workload shape {shape!r}; one of: {', '.join(SHAPES)}")
    if days <= 0 or busy_cores <= 0:
        raise ValueError("days and busy cores must be positive")
    parts = SHAPES[shape]
    quiet = "quiet" in parts
    rng = random.Random(seed)
    work = busy_cores * days * DAY
    rows: list[tuple[float, float, int, str, int]] = []     # (submit, run time, cores, part, user)

    def place(pairs: Iterable[tuple[float, int]], part: str) -> None:
        for runtime, cores in pairs:
            rows.append((_arrival(rng, days, quiet), runtime, cores, part, USERS[part]))

    share = 0.0
    if "long" in parts:
        share += LONG_SHARE
        place(_fill(LONG_SHARE * work, lambda: (rng.uniform(DAY, 5 * DAY), rng.randint(1, NODE_CORES))),
              "long")
    if "wide" in parts:
        share += WIDE_SHARE
        place(_fill(WIDE_SHARE * work,
                    lambda: (math.exp(rng.uniform(math.log(3600.0), math.log(12 * 3600.0))),
                             NODE_CORES * rng.randint(2, 16))), "wide")
    if "bursts" in parts:
        share += BURST_SHARE
        burst = _fill(BURST_SHARE * work,
                      lambda: (math.exp(rng.uniform(math.log(300.0), math.log(3600.0))),
                               rng.choice((1, 2, 4))))
        for k in range(0, len(burst), BURST_JOBS):
            at = _arrival(rng, days, quiet)
            while quiet and _in_quiet_night(at + 60.0):
                at = _arrival(rng, days, quiet)
            for runtime, cores in burst[k:k + BURST_JOBS]:
                rows.append((at + rng.random() * 60.0, runtime, cores, "bursts", USERS["bursts"]))
    plain = synthetic_jobs(days, max(1, round(busy_cores * (1.0 - share))), rng.randrange(2 ** 31))
    owners = _many_users(rng, [j.submit for j in plain]) if "users" in parts else {}
    for k, j in enumerate(plain):
        t, user = owners.get(k, (j.submit if not quiet else _arrival(rng, days, quiet), USERS["plain"]))
        rows.append((t, j.runtime, j.cores, "plain", user))
    rows.sort(key=lambda r: (round(r[0]), r[3], r[4]))
    out: list[tuple[SwfJob, str]] = []
    for k, (t, runtime, cores, part, user) in enumerate(rows, 1):
        rt = max(1, round(runtime))
        out.append((SwfJob(id=k, submit=float(round(t)), runtime=float(rt), cores=cores,
                           mem_mb=2048 * cores, requested_time=float(round(rt * 1.5)),
                           user=user), part))
    return out


def _many_users(rng: random.Random, submits: Sequence[float]) -> dict[int, tuple[float, int]]:
    """Job index -> (submit time, user) for the ``users`` part: each job drawn a user by Zipf-like
    weight; each user's jobs, in order, go in batches of :data:`USER_BATCH` submitted within
    :data:`USER_BATCH_SPREAD` of the batch's first."""
    weights = [1.0 / k for k in range(1, MANY_USERS + 1)]
    by_user: dict[int, list[int]] = {}
    for i in sorted(range(len(submits)), key=lambda i: submits[i]):
        by_user.setdefault(101 + rng.choices(range(MANY_USERS), weights)[0], []).append(i)
    out: dict[int, tuple[float, int]] = {}
    for user, jobs in by_user.items():
        for b in range(0, len(jobs), USER_BATCH):
            first = submits[jobs[b]]
            for i in jobs[b:b + USER_BATCH]:
                out[i] = (first + rng.random() * USER_BATCH_SPREAD, user)
    return out


def shaped_jobs(shape: str, days: float, busy_cores: int, seed: int) -> list[SwfJob]:
    """The jobs of :func:`shaped_workload`, without their parts."""
    return [j for j, _ in shaped_workload(shape, days, busy_cores, seed)]


def write_swf(out: TextIO, jobs: Sequence[tuple[SwfJob, str]], notes: Sequence[str] = ()) -> None:
    """Write a :func:`shaped_workload` as an SWF trace (18 fields, -1 where unknown; memory per
    processor in KB; the user field numbers the part, :data:`USERS`, or the ``users`` part's user) with ``notes`` as
    ``; Note:`` header lines."""
    out.write("; Version: 2.2\n; Computer: nodemanager synthetic workload\n")
    for n in notes:
        out.write(f"; Note: {n}\n")
    for j, part in jobs:
        mem_kb = j.mem_mb * 1024 // max(1, j.cores)
        user = j.user
        out.write(f"{j.id} {j.submit:.0f} -1 {j.runtime:.0f} {j.cores} -1 -1 {j.cores} "
                  f"{j.requested_time:.0f} {mem_kb} 1 {user} -1 -1 -1 -1 -1 -1\n")
