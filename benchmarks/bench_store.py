"""The store at a year of a busy cloud-burst site, beside the JSON ledger of the release before it.

Seeds a SQLite store with a year of 500,000 closed node lives (about 1,400 a day), three (user,
group) shares each (1.5 million) and four events each (2 million), then measures:

- the store's CPU per cycle at 1,000 live nodes: the ledger's and history's work on the controller
  thread plus the writer thread's transaction for that cycle (median and max of 240 cycles of
  30 s; about half a node closes and one opens a cycle, 10 events a cycle);
- start-up: opening the store and resuming the ledger's live nodes and the history;
- ``nodemanager cost --by group`` over the year (the query, and the command as a process);
- the RSS of a process holding the ledger and history over that store vs over an empty one;
- the same for the JSON ledger (``--json``, the base release's class from git): its save, load,
  per-cycle work and ``cost``.

    python benchmarks/bench_store.py                 # the full year (seeding takes minutes)
    python benchmarks/bench_store.py --scale 0.05    # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nodemanager.commands.bench import _rss_mb as rss_mb  # noqa: E402
from nodemanager.core.attribution import NodeUse, attribute  # noqa: E402
from nodemanager.model import JobOwner, Size  # noqa: E402
from nodemanager.store import Changes, Life  # noqa: E402
from nodemanager.store.sqlite import SqliteStore  # noqa: E402

YEAR = 365 * 86400.0
NOW = 1_800_000_000.0
SIZES = (Size("small", cores=4, ram_mb=8192, price=0.2), Size("big", cores=16, ram_mb=65536, price=0.8))
USERS = [(f"user{i:03d}", f"group{i % 40:02d}") for i in range(400)]
LIVE = 1000


def year_of_lives(n: int, rnd: random.Random):
    """``n`` closed lives over the year before NOW, short VMs (10 min to 6 h), three shares each."""
    for i in range(n):
        start = NOW - YEAR + YEAR * i / n
        size = SIZES[i % 2]
        end = start + rnd.uniform(600, 6 * 3600)
        shares = {USERS[rnd.randrange(len(USERS))]: rnd.uniform(1e3, 1e5) for _ in range(3)}
        while len(shares) < 3:
            shares[USERS[rnd.randrange(len(USERS))]] = rnd.uniform(1e3, 1e5)
        yield NodeUse(node_id=f"i-{i:08x}", size=size.name, price=size.price, start=start, end=end, shares=shares)


def seed(path: str, n: int) -> float:
    store = SqliteStore(path)
    store.ready()
    rnd = random.Random(1)
    t = time.perf_counter()
    batch = Changes()
    for u in year_of_lives(n, rnd):
        batch.lives[u.node_id] = Life(use=u, closed=True)
        batch.events += [(u.node_id, u.start, "decision", "boot small for 3 queued jobs (row 12)"),
                         (u.node_id, u.start + 90, "state", "unpaired -> busy"),
                         (u.node_id, u.end - 120, "decision", "START_DRAIN idle 300 s (row 31)"),
                         (u.node_id, u.end, "outcome", "destroy ok: drained")]
        if len(batch.lives) >= 20000:
            store.apply(batch)
            batch = Changes()
    store.apply(batch)
    store.close()
    return time.perf_counter() - t


def fleet(k: int):
    """One cycle's report at ``k`` (the cycle number): LIVE nodes, the oldest one replaced every
    other cycle, each running three jobs of three users."""
    first = k // 2
    nodes, workers, entries = [], [], []
    for j in range(first, first + LIVE):
        nid = f"live-{j:07d}"
        nodes.append(SimpleNamespace(id=nid, size="small", launched_at=NOW + 15 * j, state="running"))
        jobs = tuple(JobOwner(*USERS[(j + m) % len(USERS)], 1) for m in range(3))
        workers.append(SimpleNamespace(name=f"w{j}", jobs_by=jobs))
        entries.append(SimpleNamespace(node_id=nid, worker=f"w{j}"))
    return SimpleNamespace(snapshot=SimpleNamespace(cloud_nodes=nodes, workers=workers),
                           plan=SimpleNamespace(nodes=entries))


class TimedStore(SqliteStore):
    """The store, with the writer thread's CPU for each transaction recorded."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.cpu: list[float] = []

    def apply(self, changes: Changes) -> None:
        t = time.thread_time()
        super().apply(changes)
        self.cpu.append(time.thread_time() - t)


def cycles(path: str, n_cycles: int = 240, null: bool = False) -> dict:
    """The store's CPU per cycle (see the module doc) and the start-up, over the store at ``path``;
    ``null``: the ledger's and history's own work only, nothing handed to the store."""
    import nodemanager.console.spend_ledger as spend_ledger
    from nodemanager.console.history import NodeHistory
    from nodemanager.store.writer import StoreWriter

    rss0 = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    store = TimedStore(path)
    store.ready()
    writer = StoreWriter(store, retention={}).start()
    submit = (lambda changes: None) if null else writer.submit
    ledger = spend_ledger.SpendLedger(SIZES, store, submit)
    history = NodeHistory(store, submit, started=NOW)
    history.recent(NOW)
    startup = (time.perf_counter() - t0, time.process_time() - c0)
    per_cycle = []
    rnd = random.Random(2)
    for k in range(n_cycles):
        report = fleet(k)
        now = NOW + 30 * k
        writer.flush(10.0)
        before = len(store.cpu)
        t = time.thread_time()
        ledger.cycle(report, now)
        for _ in range(10):
            history.add(f"live-{k // 2 + rnd.randrange(LIVE):07d}", now, "decision", "keep: busy (row 4)")
        history.flush()
        mine = time.thread_time() - t
        writer.flush(10.0)
        per_cycle.append(mine + sum(store.cpu[before:]))
    writer.stop(10.0)
    return {"startup_s": startup[0], "startup_cpu_s": startup[1], "median_ms": 1000 * statistics.median(per_cycle),
            "max_ms": 1000 * max(per_cycle), "rss_mb": rss_mb() - rss0, "rss_total_mb": rss_mb()}


def cost_by_group(path: str, cfg: str) -> dict:
    store = SqliteStore(path, read_only=True)
    store.ready()
    t = time.perf_counter()
    rows = store.spend(NOW - YEAR - 86400, NOW, "group")
    query = time.perf_counter() - t
    t = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "nodemanager", "cost", "--config", cfg, "--since", "400d",
                          "--by", "group"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    command = time.perf_counter() - t
    assert run.returncode == 0, run.stderr
    return {"query_s": query, "command_s": command, "groups": len(rows)}


def json_ledger(n: int, workdir: pathlib.Path) -> dict:
    """The base release's JSON ledger at the same size: save, load, per-cycle work, cost."""
    from tests.fixtures.base_release import base_module
    old = base_module("nodemanager/console/spend_ledger.py")
    path = str(workdir / "pool.spend.json")
    ledger = old.SpendLedger(SIZES, None)
    ledger._closed = list(year_of_lives(n, random.Random(1)))
    ledger.path = path
    t, c = time.perf_counter(), time.process_time()
    ledger.save()
    save = (time.perf_counter() - t, time.process_time() - c)
    size_mb = os.path.getsize(path) / 1e6
    t = time.perf_counter()
    again = old.SpendLedger(SIZES, path)
    load = time.perf_counter() - t
    per_cycle = []
    for k in range(20):
        t = time.thread_time()
        again.observe(fleet(k), NOW + 30 * k)
        per_cycle.append(time.thread_time() - t)
    t = time.perf_counter()
    rows = attribute(old.read_uses(path), NOW - YEAR - 86400, NOW, "group")
    cost = time.perf_counter() - t
    return {"save_s": save[0], "save_cpu_s": save[1], "size_mb": size_mb, "load_s": load,
            "observe_median_ms": 1000 * statistics.median(per_cycle), "cost_s": cost, "groups": len(rows),
            "rss_mb": rss_mb()}


def child(mode: str, path: str) -> None:
    print(json.dumps(cycles(path, null=mode == "null")))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0, help="share of the year's 500,000 lives")
    ap.add_argument("--json", action="store_true", help="measure the base release's JSON ledger too")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "DB"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    n = int(500_000 * args.scale)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="nm-bench-store-"))
    state = workdir / "state"
    state.mkdir()
    db = str(state / "pool.db")
    cfg = workdir / "nm.ini"
    cfg.write_text((REPO / "config.example.ini").read_text().replace("\nstate_dir =\n", f"\nstate_dir = {state}\n")
                   .replace("cluster = demo", "cluster = pool").replace("spend_ledger = false", "spend_ledger = true"))
    seeded = seed(db, n)
    store = SqliteStore(db)
    counts = store.counts()
    store.close()
    print(f"seeded {counts} in {seeded:.0f} s; store {sum(os.path.getsize(p) for p in state.glob('pool.db*')) / 1e6:.0f} MB")
    print("cost --by group over the year:", json.dumps(cost_by_group(db, str(cfg))))
    empty = str(workdir / "empty.db")
    for what, mode, path in (("year", "cycles", db), ("empty", "cycles", empty), ("no store (accounting only)", "null", empty)):
        out = subprocess.run([sys.executable, __file__, "--child", mode, path], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        print(f"{what} store: cycles and start-up:", out.stdout.strip())
    if args.json:
        print("JSON ledger:", json.dumps(json_ledger(n, workdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
