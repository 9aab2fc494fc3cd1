"""Soak runs: weeks of virtual time on a development trace with faults on, the embedded default
daemon in real time for N minutes, and the crash-restart sweep over many seeds. Memory (RSS) and
thread count are sampled and printed; the safety invariants (:mod:`nodemanager.sim.invariants`)
are checked throughout.

    python benchmarks/soak.py trace --days 14 --seed 1          # the longer seeded run
    python benchmarks/soak.py realtime --minutes 10              # the embedded default, real clock
    python benchmarks/soak.py crash --seeds 1-15,2024 --crashes 120   # the crash-restart sweep
    python benchmarks/soak.py crash --seeds 1-8 --faults 1          # crashes with every fault class on
    python benchmarks/soak.py trace --days 0.5 --json            # figures as JSON
    python benchmarks/soak.py trace --without partial_listing,missing_ad   # some fault classes off

Traces are read from ``../shared/traces`` relative to the repository (``--trace`` or
``NODEMANAGER_TRACES`` to change it), never copied. Exit status 1 if an invariant broke (or, for
``crash``, any check of ``tests/test_crash_restart.py`` failed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import sys
import threading
import time
from typing import Any

REPO = pathlib.Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from nodemanager.sim.progress import progress_bar  # noqa: E402 (after the path above)

DEFAULT_TRACE = "LPC-EGEE-2004-1.2-cln.swf.gz"
DAY = 86400.0


def rss_mb() -> float:
    """This process's resident memory in MB (Linux /proc)."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def threads() -> int:
    return threading.active_count()


def trace_settings(max_nodes: int = 40):
    from nodemanager.model import Size
    from nodemanager.configuration.settings import CloudSettings, CoreSettings, SchedulerSettings, Settings
    size = Size("c8", cores=8, ram_mb=32000, price=0.34, billing_period=0, min_charge=60)
    options = {"boot_delay": "90s", "join_delay": "30s", "burst_every": "0s", "burst_size": "0", "seed": "1"}
    return Settings(core=CoreSettings(sizes=(size,), max_nodes=max_nodes, boot_grace=900.0, idle_grace=300.0,
                                      poll_stale_after=180.0, node_stale_after=600.0, max_concurrent_drains=8),
                    cloud=CloudSettings(cluster="soak"),
                    scheduler=SchedulerSettings(kind="simulated", options=options))


def soak_faults(scale: float = 1.0, without: frozenset[str] = frozenset()):
    """The fault mix of the soak: every class on, at rates a bad week might show; ``without``
    names fault fields (of CloudFaults or SchedulerFaults) to switch off."""
    from dataclasses import fields, replace

    from nodemanager.sim.faults import CloudFaults, SchedulerFaults
    cloud, sched = _mix(scale)
    known = {f.name for f in fields(CloudFaults)} | {f.name for f in fields(SchedulerFaults)}
    if without - known:
        raise ValueError(f"unknown fault(s): {', '.join(sorted(without - known))} (known: {', '.join(sorted(known))})")
    off = lambda obj: replace(obj, **{f.name: 0.0 for f in fields(obj) if f.name in without})  # noqa: E731
    return off(cloud), off(sched)


def _mix(scale: float):
    from nodemanager.sim.faults import CloudFaults, SchedulerFaults
    return (CloudFaults(error_rate=0.03 * scale, create_but_fails=0.05 * scale, destroy_but_fails=0.05 * scale,
                        partial_listing=0.02 * scale, reorder_listing=0.2 * scale,
                        keep_terminated=3600.0 if scale else 0.0, listing_lag=20.0 * scale),
            SchedulerFaults(outage_rate=0.001 * scale, outage_length=600.0, call_error_rate=0.03 * scale,
                            stale_poll=0.02 * scale, lagging_ads=0.02 * scale, missing_ad=0.02 * scale,
                            flapping=0.01 * scale))


def soak_trace(trace: str, *, days: float = 14.0, seed: int = 1, step: float | None = None, faults: float = 1.0,
               restarts_per_day: float = 2.0, max_nodes: int = 40, sample_every: float = DAY / 4,
               without: frozenset[str] = frozenset(), progress: bool = False) -> dict[str, Any]:
    """Replay ``days`` of ``trace`` through the real controller with faults and random restarts,
    one cycle every ``step`` virtual seconds (default: the daemon's ``cycle_interval``); return
    the figures (and every invariant violation)."""
    import random

    from nodemanager.configuration.settings import PollSettings

    from nodemanager.sim.invariants import CheckedRun
    from nodemanager.sim.pool import Job
    from nodemanager.sim.swf import read_jobs

    settings = trace_settings(max_nodes)
    step = PollSettings().cycle_interval if step is None else step
    size = settings.core.sizes[0]
    jobs, reader = read_jobs(trace, days=days)
    cloud_faults, scheduler_faults = soak_faults(faults, without)
    run = CheckedRun(settings, seed=seed, cloud_faults=cloud_faults, scheduler_faults=scheduler_faults, step=step,
                     keep_reports=50)
    run.world.jobs = None
    t0 = run.clock()
    usable_ram = int(size.ram_mb * settings.core.node_mem_scaling)
    queue = sorted(jobs, key=lambda j: j.submit)
    base = queue[0].submit if queue else 0.0        # the window may start late in the trace
    rng = random.Random(seed + 1)
    samples: list[tuple[float, float, int]] = []
    wall0 = time.perf_counter()
    next_sample = t0
    i = 0
    end = t0 + days * DAY
    bar = progress_bar(days, "soak", enabled=progress, unit=" days")
    while run.clock() < end:
        now = run.clock()
        while i < len(queue) and t0 + queue[i].submit - base <= now:
            j = queue[i]
            i += 1
            cpus = max(1, min(j.cores, size.cores))
            ram = min(max(j.mem_mb, 256), usable_ram)
            run.world.pool.submit(Job(id=str(j.id), cpus=cpus, ram_mb=ram, runtime=max(1.0, j.runtime),
                                      submit_time=t0 + j.submit - base,
                                      walltime=j.requested_time if j.requested_time > 0 else None))
        if rng.random() < restarts_per_day * step / DAY:
            run.restart()
        run.cycle()
        if now >= next_sample:
            samples.append(((now - t0) / DAY, rss_mb(), threads()))
            next_sample += sample_every
            bar.set_postfix_str(f"rss {samples[-1][1]:.0f} MB, threads {samples[-1][2]}, "
                                f"violations {len(run.inv.violations)}")
        run.clock.advance(step)
        bar.update(step / DAY)
    bar.close()
    stats = run.world.pool.stats
    return {
        "trace": os.path.basename(trace), "days": days, "seed": seed, "step_seconds": step, "jobs_in_window": len(jobs),
        "jobs_submitted": stats.submitted, "jobs_completed": stats.completed, "jobs_killed": stats.killed,
        "cycles": run.inv.counts["checks"], "restarts": run.restarts,
        "faults_injected": sum(run.injected.values()), "fault_kinds": len(run.injected),
        "faults_by_kind": dict(sorted(run.injected.items())), "faults_off": sorted(without),
        "boots": run.world.sim_cloud.calls["create_node"], "destroys": run.inv.counts["destroys"],
        "drains": run.inv.counts["drains"], "invariants_broken": len(run.inv.violations),
        "violations": run.inv.violations[:20], "wall_seconds": round(time.perf_counter() - wall0, 1),
        "rss_mb": [round(s[1], 1) for s in samples], "threads": [s[2] for s in samples],
    }


def soak_realtime(minutes: float = 10.0, *, sample_every: float = 10.0, progress: bool = False) -> dict[str, Any]:
    """Run the embedded default daemon (in this process, real clock, shipped demo config) for
    ``minutes``; sample RSS and threads; check the invariants against its simulated world."""
    from nodemanager.configuration import config
    from nodemanager.daemon import Daemon
    from nodemanager.sim.invariants import Invariants
    from nodemanager.sim.world import SimWorld

    settings = config.load(str(REPO / "config.example.ini"))
    clock = time.time
    world = SimWorld(settings, clock)
    inv = Invariants(world, settings)
    daemon = Daemon(settings, ports=(inv.audit(world.cloud), inv.audit_scheduler(world.scheduler), world),
                    status=False)
    samples: list[tuple[float, float, int]] = []
    start = time.monotonic()
    daemon.start()
    bar = progress_bar(minutes * 60, "soak", enabled=progress, unit=" s")
    try:
        while time.monotonic() - start < minutes * 60:
            time.sleep(min(sample_every, max(0.1, minutes * 60 - (time.monotonic() - start))))
            inv.check(daemon.last_report)
            samples.append((round(time.monotonic() - start), rss_mb(), threads()))
            bar.update(samples[-1][0] - bar.n)
            bar.set_postfix_str(f"rss {samples[-1][1]:.0f} MB, threads {samples[-1][2]}, "
                                f"cycles {daemon.counters['cycles']:.0f}")
    finally:
        bar.close()
        daemon.stop()
    stats = world.pool.stats
    return {
        "minutes": minutes, "cycles": int(daemon.counters["cycles"]),
        "actor_restarts": int(daemon.counters["actor_restarts"]),
        "jobs_submitted": stats.submitted, "jobs_completed": stats.completed, "jobs_killed": stats.killed,
        "boots": world.sim_cloud.calls["create_node"], "destroys": inv.counts["destroys"],
        "invariants_broken": len(inv.violations), "violations": inv.violations[:20],
        "rss_mb": [round(s[1], 1) for s in samples], "threads": [s[2] for s in samples],
    }


def parse_seeds(text: str) -> list[int]:
    """``"1-15,2024"`` -> [1, 2, ..., 15, 2024]."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        low, _, high = part.partition("-")
        seeds.extend(range(int(low), int(high or low) + 1))
    return seeds


def soak_crashes(seeds: list[int], crashes: int = 120, *, faults: float = 0.0,
                 progress: bool = False) -> dict[str, Any]:
    """The crash-restart sweep: for each seed, ``crashes`` SIGKILL-like crashes at random points
    (``tests/test_crash_restart.py``: crash_run), then the same checks as that test. ``faults``
    > 0 also turns the soak's fault mix on (scaled), during the crashes."""
    from tests.test_crash_restart import crash_problems, crash_run

    mix = soak_faults(faults) if faults else None
    wall0 = time.perf_counter()
    per_seed, problems, by_point = [], [], {}
    bar = progress_bar(len(seeds), "crash sweep", enabled=progress, unit=" seeds")
    for seed in seeds:
        run, points = crash_run(seed=seed, crashes_wanted=crashes, faults=mix)
        found, figures = crash_problems(run, points, seed, faults=mix is not None)
        per_seed.append(figures)
        problems.extend(f"seed {seed}: {p}" for p in found)
        for k, v in points.items():
            by_point[k] = by_point.get(k, 0) + v
        bar.update(1)
        bar.set_postfix_str(f"seed {seed}: {figures['restarts']} restarts, {len(problems)} problems so far")
    bar.close()
    total = lambda key: sum(f[key] for f in per_seed)   # noqa: E731
    return {
        "seeds": seeds, "crashes_per_seed": crashes, "faults": faults, "restarts": total("restarts"),
        "faults_injected": total("faults_injected"), "of_which_terminated_listed": total("terminated_listed"),
        "restarts_by_point": dict(sorted(by_point.items())),
        "jobs_submitted": total("jobs_submitted"), "jobs_completed": total("jobs_completed"),
        "jobs_killed": total("jobs_killed"), "creates": total("creates"),
        "creates_without_crashes": total("creates_without_crashes"),
        "seeds_with_extra_creates": sum(1 for f in per_seed if f["creates"] > f["creates_without_crashes"]),
        "drains": total("drains"), "drains_forgotten": total("drains_forgotten"), "leaked": total("leaked"),
        "invariants_broken": total("invariants_broken"), "problems": len(problems),
        "violations": problems[:20], "wall_seconds": round(time.perf_counter() - wall0, 1),
    }


def _print(result: dict[str, Any]) -> None:
    for key, value in result.items():
        if key in ("rss_mb", "threads") and value:
            print(f"{key:>18}: first {value[0]}, last {value[-1]}, max {max(value)} ({len(value)} samples)")
        elif key == "violations":
            for v in value:
                print(f"{'violation':>18}: {v}")
        else:
            print(f"{key:>18}: {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    t = sub.add_parser("trace", help="weeks of virtual time on a trace, faults and restarts on")
    t.add_argument("--trace", default=None, help=f"SWF file (default ../shared/traces/{DEFAULT_TRACE})")
    t.add_argument("--days", type=float, default=14.0)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--faults", type=float, default=1.0, help="scale every fault rate (0: none)")
    t.add_argument("--restarts-per-day", type=float, default=2.0)
    t.add_argument("--step", type=float, default=None,
                   help="virtual seconds between cycles (default: the daemon's cycle_interval, 10)")
    t.add_argument("--without", default="", metavar="FAULT,...",
                   help="switch these fault classes off (field names of CloudFaults/SchedulerFaults)")
    t.add_argument("--json", action="store_true")
    r = sub.add_parser("realtime", help="the embedded default daemon on the real clock")
    r.add_argument("--minutes", type=float, default=10.0)
    r.add_argument("--json", action="store_true")
    c = sub.add_parser("crash", help="crash-restart sweep over the simulator")
    c.add_argument("--seeds", default="1-15,2024", help="seeds, e.g. 1-15,2024")
    c.add_argument("--crashes", type=int, default=120, help="crashes (restarts) per seed")
    c.add_argument("--faults", type=float, default=0.0, help="also inject the soak's fault mix, scaled (0: none)")
    c.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)    # the daemon's decision lines would drown the figures
    if args.mode == "trace":
        traces = pathlib.Path(os.environ.get("NODEMANAGER_TRACES", REPO.parent / "shared" / "traces"))
        path = args.trace or str(traces / DEFAULT_TRACE)
        result = soak_trace(path, days=args.days, seed=args.seed, faults=args.faults,
                            restarts_per_day=args.restarts_per_day, step=args.step, progress=not args.json,
                            without=frozenset(w.strip() for w in args.without.split(",") if w.strip()))
    elif args.mode == "crash":
        result = soak_crashes(parse_seeds(args.seeds), args.crashes, faults=args.faults, progress=not args.json)
    else:
        result = soak_realtime(args.minutes, progress=not args.json)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        _print(result)
    return 1 if result["invariants_broken"] or result.get("problems") else 0


if __name__ == "__main__":
    sys.exit(main())
