"""The daemon's cycle at 1,000 nodes against a store holding a year of a busy site, paired with the
same daemon over an empty store.

Seeds a SQLite store as ``bench_store.py`` does (500,000 closed node lives, 1.5 million shares,
2 million events), then, in a fresh process per run, starts the real :class:`Daemon` (actors,
actuator pool, controller, the store's writer thread, the spend ledger and node history on) on the
simulated cloud and HTCondor pool filled with 1,000 running nodes (``bench_cycle.filled_world``),
over a copy of the seeded store or over an empty one, and measures:

- start-up: building the daemon (opening the store, resuming the ledger's live nodes and the
  history, reading the memories and the admin state) and its first cycle, wall and CPU;
- per cycle (``--cycles`` of ``cycle_interval``, 5 s; every other cycle the oldest node is given
  back outside the daemon and a new one launched, so lives close and open as at a busy site): the
  CPU of the controller's thread (the cycle, then the ledger, history and metrics on its report)
  plus the store writer thread's CPU for that cycle's transaction; median and max; also the whole
  process's CPU per cycle;
- the process's RSS after the cycles;
- ``nodemanager cost --by group`` over the year: the query in-process, the command as a process,
  and the bare interpreter start (``python -c pass``) beside it.

Runs alternate seeded / empty ``--repeat`` times; the table gives each run and the medians.

    python benchmarks/bench_store_daemon.py                 # the full year (seeding takes minutes)
    python benchmarks/bench_store_daemon.py --scale 0.05 --repeat 1 --cycles 20   # a quick look
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

NODES = 1000
CLUSTER = "demo"       # config.example.ini's: the store is <state_dir>/demo.db


def thread_cpu(ident: int | None) -> float:
    """CPU seconds of the thread ``ident`` so far (0 before it exists)."""
    if ident is None:
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(ident))


def run_daemon(state_dir: str, cycles: int) -> dict[str, float]:
    """One daemon over the store in ``state_dir`` (see the module doc)."""
    import logging

    from bench_cycle import filled_world, rss_mb
    from nodemanager.actors.gc_tuning import tune_gc
    from nodemanager.daemon import Daemon

    logging.basicConfig(level=logging.WARNING)
    settings, clock, world = filled_world(NODES)
    settings = dataclasses.replace(settings, manage=dataclasses.replace(
        settings.manage, state_dir=state_dir, spend_ledger=True))
    rss0 = rss_mb()
    tune_gc()
    t0, c0 = time.perf_counter(), time.process_time()
    daemon = Daemon(settings, clock=clock, status=False, ports=(world.cloud, world.scheduler, world))
    built = (time.perf_counter() - t0, time.process_time() - c0)
    idents: dict[str, int] = {}
    on_report = daemon._on_report

    def seen(report):        # the controller's thread: the cycle, then this (ledger, history, metrics)
        idents["controller"] = threading.get_ident()
        on_report(report)

    daemon._on_report = seen  # type: ignore[method-assign]
    daemon.start()
    idents["writer"] = daemon.store_writer._thread.ident
    assert daemon.system.settle(600)
    daemon.store_writer.flush(60)
    first = (time.perf_counter() - t0, time.process_time() - c0)
    per_cycle, process, controller_only = [], [], []
    size = settings.core.sizes[0]
    for k in range(cycles):
        if k % 2:     # churn: a life closes in the ledger, another opens
            world.sim_cloud.destroy_node(world.sim_cloud.node(f"sim-{k // 2 + 1:06d}"))
            world.sim_cloud.create_node(size, f"churn-{k}", {"nodemanager-request": f"churn{k}"})
        ctl, wr, proc = thread_cpu(idents.get("controller")), thread_cpu(idents["writer"]), time.process_time()
        clock.advance(settings.poll.cycle_interval)
        assert daemon.system.settle(600)
        assert daemon.store_writer.flush(60)
        c = thread_cpu(idents.get("controller")) - ctl
        per_cycle.append(c + thread_cpu(idents["writer"]) - wr)
        controller_only.append(daemon.last_report.cpu_seconds if daemon.last_report else float("nan"))
        process.append(time.process_time() - proc)
    rss = rss_mb()
    health = daemon.store_writer.health()
    live = len(world.cloud.list_nodes())
    daemon.stop()
    import sqlite3
    with sqlite3.connect(os.path.join(state_dir, f"{CLUSTER}.db")) as db:   # the lives the churn closed
        closed = db.execute("SELECT COUNT(*) FROM node_life WHERE closed = 1 AND node_id LIKE 'sim-%'").fetchone()[0]
    return {"nodes": live, "closed": closed, "build_s": built[0], "build_cpu_s": built[1], "startup_s": first[0],
            "startup_cpu_s": first[1], "cycle_ms": 1000 * statistics.median(per_cycle),
            "cycle_max_ms": 1000 * max(per_cycle), "controller_ms": 1000 * statistics.median(controller_only),
            "process_ms": 1000 * statistics.median(process), "process_max_ms": 1000 * max(process),
            "rss_mb": rss, "rss_added_mb": rss - rss0, "written": health.written, "store_ok": health.ok}


def cost(db: str, cfg: str, year: float, now: float) -> dict[str, float]:
    from nodemanager.store.sqlite import SqliteStore
    store = SqliteStore(db, read_only=True)
    store.ready()
    t = time.perf_counter()
    rows = store.spend(now - year - 86400, now, "group")
    query = time.perf_counter() - t
    store.close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    times = []
    for _ in range(3):
        t = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "nodemanager", "cost", "--config", cfg, "--since", "400d",
                              "--by", "group"], capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t)
        assert run.returncode == 0, run.stderr
    bare = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t)
    return {"query_s": query, "command_s": statistics.median(times), "python_start_s": statistics.median(bare),
            "groups": len(rows)}


def child(state_dir: str, cycles: int) -> None:
    print(json.dumps(run_daemon(state_dir, cycles)))


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0, help="share of the year's 500,000 lives")
    ap.add_argument("--repeat", type=int, default=3, help="paired runs (seeded, empty) to take medians of")
    ap.add_argument("--cycles", type=int, default=60, help="cycles measured per run")
    ap.add_argument("--seeded", help="a store bench_store.py seeded already (copied, never written)")
    ap.add_argument("--child", nargs=2, metavar=("STATE_DIR", "CYCLES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    import bench_store
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="nm-bench-store-daemon-"))
    seeded = args.seeded or str(workdir / "seeded.db")
    if not args.seeded:
        took = bench_store.seed(seeded, int(500_000 * args.scale))
        print(f"seeded {seeded} in {took:.0f} s", flush=True)
    from nodemanager.store.sqlite import SqliteStore
    store = SqliteStore(seeded)
    store.ready()           # at this release's schema (a store seeded by an older one is upgraded)
    print(f"store: {dict(store.counts())}; {os.path.getsize(seeded) / 1e6:.0f} MB", flush=True)
    store.close()
    state = workdir / "state"
    state.mkdir()
    cfg = workdir / "nm.ini"
    cfg.write_text((REPO / "config.example.ini").read_text().replace("\nstate_dir =\n", f"\nstate_dir = {state}\n"))
    shutil.copyfile(seeded, state / f"{CLUSTER}.db")
    print("cost --by group over the year:", json.dumps(cost(str(state / f"{CLUSTER}.db"), str(cfg),
                                                           bench_store.YEAR, bench_store.NOW)), flush=True)
    runs: dict[str, list[dict[str, float]]] = {"year": [], "empty": []}
    for i in range(args.repeat):
        for what in ("year", "empty"):
            run_dir = workdir / f"{what}-{i}"
            run_dir.mkdir()
            if what == "year":
                shutil.copyfile(seeded, run_dir / f"{CLUSTER}.db")
            before = load_avg()
            out = subprocess.run([sys.executable, __file__, "--child", str(run_dir), str(args.cycles)],
                                 capture_output=True, text=True)
            assert out.returncode == 0, out.stderr[-3000:]
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs[what].append(r)
            print(f"{what:5} run {i + 1}: load {before}: {json.dumps({k: round(v, 3) for k, v in r.items()})}",
                  flush=True)
            shutil.rmtree(run_dir)
    keys = ("build_s", "startup_s", "startup_cpu_s", "cycle_ms", "cycle_max_ms", "controller_ms", "process_ms",
            "process_max_ms", "rss_mb")
    print(f"\nmedians of {args.repeat} paired run(s), {args.cycles} cycles each, {NODES} nodes:")
    print(f"{'':16}{'year':>10}{'empty':>10}{'added':>10}")
    for k in keys:
        y, e = (statistics.median(r[k] for r in runs[w]) for w in ("year", "empty"))
        print(f"{k:16}{y:>10.3f}{e:>10.3f}{y - e:>+10.3f}")
    worst = max(r["cycle_max_ms"] for r in runs["year"])
    print(f"slowest cycle over the year's runs: {worst:.1f} ms (controller thread + writer)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
