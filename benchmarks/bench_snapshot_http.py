"""How long ``plan --live`` takes to get the daemon's snapshot: ``GET /snapshot.json`` (serialised
on every request, secrets redacted) and ``/status.json`` from the real status server, parsed by
the CLI, for pools of 1,000 / 10,000 / 50,000 nodes (the pool of bench_plan.py)::

    python benchmarks/bench_snapshot_http.py [--repeat 3] [--sizes 1000,10000,50000]

Prints the snapshot's size, the median milliseconds of one fetch of both documents with parsing
(what ``plan --live`` waits for) and of the local plan. Not a timed test: a figure to watch.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import policy_matrix  # noqa: E402
import requests  # noqa: E402
from bench_plan import NOW, SETTINGS, pool  # noqa: E402
from nodemanager.console.admin import AdminState  # noqa: E402
from nodemanager.commands.plan_live import _fetch  # noqa: E402
from nodemanager.core import plan  # noqa: E402
from nodemanager.model import CycleReport  # noqa: E402
from nodemanager.configuration.settings import ManageSettings  # noqa: E402
from nodemanager.console.status import StatusServer  # noqa: E402
from nodemanager.console.status_document import StatusView  # noqa: E402

TOKEN = "bench-token"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1000,10000,50000")
    args = ap.parse_args()
    matrix, settings = policy_matrix.load_default(), SETTINGS
    for n in (int(x) for x in args.sizes.split(",")):
        snap = pool(n)
        view = StatusView(report=CycleReport(snapshot=snap, plan=plan(snap, settings, matrix)),
                          last_cycle_at=NOW)
        server = StatusServer(ManageSettings(address="127.0.0.1", port=0, token=TOKEN),
                              source=lambda: view, admin=AdminState(), clock=lambda: NOW).start()
        try:
            size = len(requests.get(server.url + "/snapshot.json", timeout=300,
                                    headers={"Authorization": f"Bearer {TOKEN}"}).content)
            fetches, plans = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                got, _status = _fetch(server.url, TOKEN, 300.0)
                t1 = time.perf_counter()
                plan(got, settings, matrix)
                fetches.append(t1 - t0)
                plans.append(time.perf_counter() - t1)
        finally:
            server.stop()
        print(f"{n:>6} nodes: snapshot {size / 1e6:6.1f} MB, fetch+parse median "
              f"{statistics.median(fetches) * 1000:7.0f} ms, local plan {statistics.median(plans) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
