"""One controller cycle at scale, in the running daemon: CPU time, process RSS and thread count.

Runs the real daemon (actors, actuator pool, real core, default matrix) on the embedded default
world — simulated cloud and simulated HTCondor pool — with an injected clock, after filling the
world with N running nodes, about 60% of them busy (a long idle grace keeps N constant while
measuring). Prints a table::

    python benchmarks/bench_cycle.py            # 1000 and 10000 nodes
    python benchmarks/bench_cycle.py 1000 50000

``cycle CPU`` is the controller's own measurement of one cycle (snapshot, plan, decision log: the
CPU time of its thread), the median of 10 cycles, with their mean, their maximum and the first
cycle after start; ``poll`` columns are one cloud listing and one scheduler poll of
the simulated backends; ``threads`` is the process's thread count with the daemon running.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nodemanager.actors.clock import ManualClock  # noqa: E402
from nodemanager.configuration.config import load  # noqa: E402
from nodemanager.actors.gc_tuning import tune_gc  # noqa: E402
from nodemanager.daemon import Daemon  # noqa: E402
from nodemanager.configuration.settings import Settings  # noqa: E402
from nodemanager.sim.pool import Job  # noqa: E402
from nodemanager.sim.world import SimWorld, world_options  # noqa: E402


def rss_mb() -> float:
    """Resident set size of this process now, in MB (from /proc)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def filled_world(n: int, port: int = -1) -> tuple[Settings, ManualClock, SimWorld]:
    """(settings, clock, world): the default world with ``n`` running nodes, 60% busy."""
    settings = load(str(REPO / "config.example.ini"))
    settings = dataclasses.replace(
        settings, core=dataclasses.replace(settings.core, max_nodes=2 * n, idle_grace=86400.0),
        manage=dataclasses.replace(settings.manage, port=port,
                                   state_dir=tempfile.mkdtemp(prefix="nm-bench-cycle-")))   # never the real one
    clock = ManualClock(1_000_000.0)
    opts = world_options(settings)
    opts.burst_size = 0
    opts.boot_delay = 0.0
    world = SimWorld(settings, clock, options=opts)
    size = settings.core.sizes[0]
    for i in range(n):
        world.sim_cloud.create_node(size, f"bench-{i}", {"nodemanager-request": f"bench{i}"})
    for i in range(int(n * 0.6) * size.cores):
        world.pool.submit(Job(id=f"j{i}", cpus=1, ram_mb=1000, runtime=86400.0, submit_time=clock()))
    clock.advance(60)
    world.advance()
    return settings, clock, world


def measure(n: int, cycles: int = 10) -> dict[str, float]:
    settings, clock, world = filled_world(n)
    threads_before = threading.active_count()
    daemon = Daemon(settings, clock=clock, status=False, ports=(world.cloud, world.scheduler, world))
    tune_gc()  # as `nodemanager run` does before it starts the actors
    daemon.start()
    daemon.system.settle(600)
    first = daemon.last_report.cpu_seconds if daemon.last_report is not None else float("nan")
    cpu: list[float] = []
    for _ in range(cycles):
        clock.advance(settings.poll.cycle_interval)
        daemon.system.settle(600)
        if daemon.last_report is not None:
            cpu.append(daemon.last_report.cpu_seconds)
    report = daemon.last_report
    t0 = time.process_time()
    nodes = world.cloud.list_nodes()
    t1 = time.process_time()
    poll = world.scheduler.poll()
    t2 = time.process_time()
    threads = threading.active_count()
    daemon.stop()
    return {"nodes": len(nodes), "workers": len(poll.workers), "cycle_cpu": statistics.median(cpu),
            "first_cpu": first, "mean_cpu": statistics.fmean(cpu), "max_cpu": max(cpu),
            "list_cpu": t1 - t0, "poll_cpu": t2 - t1, "rss": rss_mb(), "threads": threads,
            "threads_before": threads_before, "explained": len(report.plan.nodes) if report else 0}


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING)
    if argv[:1] == ["--one"]:
        print(json.dumps(measure(int(argv[1]))))
        return 0
    sizes = [int(a) for a in argv] or [1000, 10000]
    print(f"{'nodes':>7} {'workers':>7} {'cycle CPU s':>11} {'mean s':>7} {'max s':>6} {'first s':>7} "
          f"{'list CPU s':>10} {'poll CPU s':>10} {'RSS MB':>7} {'threads':>7}")
    for n in sizes:
        # a fresh process per size, so the RSS is that size's alone
        out = subprocess.run([sys.executable, __file__, "--one", str(n)], check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{r['nodes']:>7} {r['workers']:>7} {r['cycle_cpu']:>11.3f} {r['mean_cpu']:>7.3f} "
              f"{r['max_cpu']:>6.3f} {r['first_cpu']:>7.3f} {r['list_cpu']:>10.3f} "
              f"{r['poll_cpu']:>10.3f} {r['rss']:>7.0f} {r['threads']:>7}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
