"""The status server under concurrent clients: p50/p99 latency of /metrics and /status.json.

Runs the real daemon (actors, real core, default matrix) on the embedded default world filled with
N running nodes (as bench_cycle.py does), lets it finish a few cycles, stops its actors and then
serves that last cycle with the real :class:`~nodemanager.console.status.StatusServer` on a free loopback
port. C client threads each make R requests, one new TCP connection per request (what curl, a
health checker or a scrape without keep-alive does), and the latency of each request is measured
from connect to the last byte of the reply::

    python benchmarks/bench_http.py                       # 1000 nodes, 16 clients x 25 requests
    python benchmarks/bench_http.py --nodes 1000 --clients 16 --requests 50

Prints one line per endpoint: requests, errors, p50, p99, max (milliseconds), requests per
second over the run and the process's thread count at its end (the clients' threads have ended).
"""

from __future__ import annotations

import argparse
import http.client
import logging
import pathlib
import statistics
import sys
import threading
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from bench_cycle import filled_world  # noqa: E402
from nodemanager.daemon import Daemon  # noqa: E402
from nodemanager.console.status import StatusServer  # noqa: E402


def daemon_with(n: int) -> Daemon:
    """A daemon that has run a few cycles over ``n`` nodes, its actors stopped again."""
    settings, clock, world = filled_world(n, port=0)
    daemon = Daemon(settings, clock=clock, status=False, ports=(world.cloud, world.scheduler, world))
    daemon.start()
    daemon.system.settle(600)
    for _ in range(3):
        clock.advance(settings.poll.cycle_interval)
        daemon.system.settle(600)
    daemon.stop()
    return daemon


def hammer(host: str, port: int, path: str, clients: int, requests: int) -> tuple[list[float], int]:
    """Latencies (seconds) of ``clients`` x ``requests`` GETs of ``path``, and the error count."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client() -> None:
        mine: list[float] = []
        start.wait()
        for _ in range(requests):
            t0 = time.perf_counter()
            try:
                conn = http.client.HTTPConnection(host, port, timeout=30)
                conn.request("GET", path)
                resp = conn.getresponse()
                resp.read()
                conn.close()
                ok = resp.status == 200
            except OSError:
                ok = False
            mine.append(time.perf_counter() - t0)
            if not ok:
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors[0]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=25, help="per client and endpoint")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    daemon = daemon_with(args.nodes)
    server = StatusServer(daemon.settings.manage, daemon.status_view, admin=daemon.admin,
                          registry=daemon.metrics.registry, clock=daemon.clock,
                          stale_after=1e9).start()
    host, port = server.address
    nodes = len(daemon.last_report.plan.nodes) if daemon.last_report else 0
    print(f"{nodes} nodes in the status document, {args.clients} clients x {args.requests} "
          f"requests each, a new connection per request")
    print(f"{'endpoint':<13} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8} {'req/s':>6} {'threads':>7}")
    try:
        for path in ("/metrics", "/status.json"):
            hammer(host, port, path, 2, 2)  # warm up
            t0 = time.perf_counter()
            lat, errors = hammer(host, port, path, args.clients, args.requests)
            rate = len(lat) / (time.perf_counter() - t0)
            q = statistics.quantiles(lat, n=100, method="inclusive")
            print(f"{path:<13} {len(lat):>8} {errors:>6} {q[49] * 1e3:>8.1f} {q[98] * 1e3:>8.1f} "
                  f"{max(lat) * 1e3:>8.1f} {rate:>6.0f} {threading.active_count():>7}", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
