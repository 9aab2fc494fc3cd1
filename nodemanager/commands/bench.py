"""``nodemanager bench``: one controller cycle at 1,000 / 10,000 / 50,000 nodes (CPU, RSS, calls).

Each pool size is measured in its own forked process (so RSS is that size's alone). The pool is
the simulated cloud and the simulated HTCondor pool, with a realistic mix of nodes:

* 70 % busy (1 to 8 of 8 cores used by jobs with walltimes), 3 % of them draining (ours);
* 20 % idle: half of them past the idle grace (the matrix wants them drained), half not;
* 5 % booting (listed by the cloud, no startd yet), 2 % drained (ours, ready to destroy);
* a queue of idle jobs (some fit on free cores, some need new nodes).

Timed, with ``time.process_time``: the scheduler poll (the HTCondor adapter reading the collector's
reply into workers), the cloud listing's records, then the controller cycle (snapshot, pairing,
classification, matrix, planning, decision logging), the actuator carrying the plan out against
the simulated ports, then the metrics update (and one Prometheus exposition).

Each cycle, by default (``--fresh-records``), the adapters get new source data, as a real poll
does: the collector's reply is new ad dicts (the simulated collector's copies) read by the real
HTCondor adapter, and the cloud listing is new node records passed through the libcloud adapter's
own check; each adapter hands back last poll's very record for a node whose source is equal
(copying the source data is not timed, reading it is). Between cycles ``--churn`` of the nodes
change (a job starts on a busy node: its ad changes), and ads are sent again every
UPDATE_INTERVAL as the collector has them. ``--same-records`` hands the simulated pool's own
records to the controller instead, as a replay does. Calls are counted at the ports: what one
cycle asks of the cloud and the scheduler.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

__all__ = ["register", "measure"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench", help="time one controller cycle on large simulated pools",
        description="Build simulated pools of N nodes with realistic HTCondor startd ads and run "
                    "one controller cycle (pairing, classification, planning, metrics update) on "
                    "each; prints CPU time, process RSS, and cloud and scheduler calls per cycle.")
    p.add_argument("--nodes", default="1000,10000,50000", metavar="N,N,...",
                   help="pool sizes (default 1000,10000,50000)")
    p.add_argument("--repeat", type=int, default=3, metavar="K",
                   help="cycles run per size: the first is reported, and the median of the rest "
                        "(default 3)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    records = p.add_mutually_exclusive_group()
    records.add_argument("--fresh-records", dest="fresh", action="store_true", default=True,
                         help="each cycle's nodes and workers are new equal objects, as real "
                              "adapters build them every poll (the default)")
    records.add_argument("--same-records", dest="fresh", action="store_false",
                         help="hand back the very same node and worker objects while unchanged, "
                              "as the simulated pool does in a replay")
    p.add_argument("--no-reuse", dest="reuse", action="store_false",
                   help="plan every node afresh each cycle (default: the controller reuses last "
                        "cycle's work for nodes whose records are unchanged, as the daemon does)")
    p.add_argument("--churn", type=float, default=0.05, metavar="SHARE",
                   help="share of the nodes that change between two cycles: a job starts on a "
                        "busy node, so its ad and worker change (default 0.05: 5 %%; ads also "
                        "change when the startd sends them again, every UPDATE_INTERVAL)")
    p.set_defaults(func=_run)


class _Counting:
    """Forwards to ``target`` and counts the calls made through the named methods."""

    def __init__(self, target, names: tuple[str, ...]) -> None:
        self._target = target
        self.calls: dict[str, int] = {}
        for n in names:
            setattr(self, n, self._wrap(n, getattr(target, n)))

    def _wrap(self, name, fn):
        def call(*a, **kw):
            self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*a, **kw)
        return call

    def __getattr__(self, name):
        return getattr(self._target, name)

    def total(self) -> int:
        return sum(self.calls.values())


_PHASES = ("poll_cpu_s", "plan_cpu_s", "act_cpu_s", "metrics_cpu_s", "exposition_cpu_s")
_SCHEDULER_CALLS = ("poll", "drain", "cancel_drain", "confirm_drained", "escalate", "node_destroyed")
_CLOUD_CALLS = ("list_nodes", "create_node", "destroy_node", "set_tags")


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def measure(n: int, repeat: int = 3, tick: Callable[[], None] = lambda: None, fresh: bool = True,
            reuse: bool = True, churn: float = 0.05) -> dict:
    """Build a pool of ``n`` nodes and time its controller cycles (see the module docstring).
    ``tick`` is called once the pool is built and after each cycle (progress); ``fresh``: each
    cycle's source data is new and read by the adapters (else the simulated pool's own records);
    ``reuse``: the controller reuses last cycle's work (else plans every node afresh); ``churn``:
    the share of nodes changed between two cycles."""
    import statistics
    import time
    from dataclasses import replace

    import policy_matrix
    from nodemanager.cycle.actuate import Actuator
    from nodemanager.cloud import TAG_DRAIN
    from nodemanager.configuration.config import loads
    from nodemanager.cycle.controller import Controller
    from nodemanager.actors.gc_tuning import tune_gc
    from nodemanager.sim.baselines import default_size
    from nodemanager.sim.cloud import SimCloud
    from nodemanager.scheduler import DrainSchedule
    from nodemanager.sim.pool import Job, SimPool
    from nodemanager.sim.startd import SimStartd

    def joined(nid: str) -> SimStartd:
        st = pool.startd(nid)
        if st is None:
            raise RuntimeError(f"bench: VM {nid} has no startd in the pool")
        return st

    size = default_size(8)
    base = loads("", "<embedded defaults>")
    settings = replace(base, core=replace(base.core, sizes=(size,), max_nodes=2 * n))
    clock = [1_000_000.0]
    now = lambda: clock[0]  # noqa: E731
    pool = SimPool(now, join_delay=30.0, negotiation_interval=60.0, max_retirement=30 * 86400.0)
    cloud = SimCloud(clock=now, sizes=(size,), boot_delay=60.0, on_running=pool.vm_started,
                     on_terminated=pool.vm_stopped)
    t_build = time.perf_counter()
    n_booting = n * 5 // 100
    for k in range(n - n_booting):
        cloud.create_node(size, f"w{k:06d}", {})
    clock[0] += 100.0
    cloud.advance()                                 # every VM is running...
    clock[0] += 40.0
    pool.advance()                                  # ...and its startd has joined
    ids = [node.id for node in cloud.list_nodes()]
    n_busy, n_idle_old = n * 70 // 100, n * 10 // 100
    n_drained = n * 2 // 100
    jid = 0
    for k, nid in enumerate(ids):
        st = joined(nid)
        if k < n_busy:
            runtime, submitted = 7200.0 + k, clock[0] - 600  # one float each per node, not per job
            for _ in range(1 + k % 8):
                jid += 1
                st.start_job(Job(id=str(jid), cpus=1, ram_mb=1024, runtime=runtime,
                                 submit_time=submitted, walltime=14400.0), clock[0])
    clock[0] += 400.0                               # the first idle nodes pass the 300 s grace
    for k in range(n_booting):
        cloud.create_node(size, f"b{k:06d}", {})    # listed, booting: no startd yet
    for k in range(jid, jid + n // 20):             # a queue: small jobs and whole-node jobs
        pool.submit(Job(id=f"q{k}", cpus=8 if k % 4 == 0 else 1, ram_mb=2048, runtime=3600.0,
                        submit_time=clock[0]))
    idle_fresh = ids[n_busy + n_idle_old:n_busy + 2 * n_idle_old]
    for nid in idle_fresh:                          # recently idle: a short job just ended
        st = joined(nid)
        jid += 1
        st.start_job(Job(id=f"s{jid}", cpus=1, ram_mb=512, runtime=10.0, submit_time=clock[0]),
                     clock[0])
    clock[0] += 20.0
    for nid in idle_fresh:
        joined(nid).advance(clock[0])
    # ours: drains under way on some busy nodes, finished on some idle ones
    matrix = policy_matrix.load_default()
    actuator = Actuator(cloud, pool, settings, clock=now)
    poll = pool.poll()
    workers = {w.cloud_id: w for w in poll.workers}
    draining = ids[:n * 3 // 100]
    drained = ids[n_busy + 2 * n_idle_old:n_busy + 2 * n_idle_old + n_drained]
    for nid in draining + drained:
        ticket = pool.drain(workers[nid], DrainSchedule.GRACEFUL, "nodemanager: bench")
        vm = cloud.node(nid)
        assert vm is not None, nid  # built above, never destroyed
        cloud.set_tags(vm, {TAG_DRAIN: f"{int(clock[0])}:{ticket.request_id}"})
    del workers, poll  # the build's own view of the pool: not what a cycle holds
    build_s = time.perf_counter() - t_build
    world_mb = _rss_mb()  # the simulated cloud and pool alone: what a daemon's process does not hold
    tick()

    metrics = None
    try:
        from nodemanager.console.metrics import Metrics
        metrics = Metrics(sizes=(size,))
    except ImportError:
        pass
    c_cloud = _Counting(cloud, _CLOUD_CALLS)
    c_sched = _Counting(pool, _SCHEDULER_CALLS)
    actuator = Actuator(c_cloud, c_sched, settings, clock=now)
    from nodemanager.core import plan as plain_plan
    from nodemanager.model import SameRecords, node_id
    from nodemanager.scheduler import HTCondorScheduler
    from nodemanager.sim.pool_bindings import PoolBindings

    controller = Controller(settings, matrix, actuator, clock=now, planner=None if reuse else plain_plan)
    adapter = HTCondorScheduler(PoolBindings(pool), clock=now, id_attribute=pool.id_attribute)
    listing: SameRecords[Any] = SameRecords()  # the libcloud adapter's check of each listed node
    # churn: a job starts on busy nodes with a free core, a new share of them every cycle
    changing = [joined(nid) for k, nid in enumerate(ids[:n_busy]) if k % 8 != 7]
    per_cycle = min(len(changing), round(churn * n))
    tune_gc()  # as `nodemanager run` does once it has started up
    rows: list[dict[str, Any]] = []
    last_ids: set[int] = set()
    for cycle in range(max(1, repeat)):
        if rows:
            tick()
            for st in changing[(cycle - 1) * per_cycle % len(changing):][:per_cycle]:
                jid += 1
                st.start_job(Job(id=f"c{jid}", cpus=1, ram_mb=512, runtime=86400.0, submit_time=clock[0]),
                             clock[0])
                pool._touch(st)
        clock[0] += 5.0
        c_cloud.calls.clear()
        c_sched.calls.clear()
        nodes = c_cloud.list_nodes()
        sim_poll = c_sched.poll()
        reply: list[dict[str, Any]] = []
        if fresh:  # untimed: the source data a real poll receives, new objects every cycle
            nodes = [replace(x) for x in nodes]
            reply = [dict(w.ad) for w in sim_poll.workers]
        t0 = time.process_time()
        if fresh:  # timed: the adapters reading it
            nodes = listing.keep(nodes, node_id)
            poll = replace(sim_poll, workers=adapter.workers_from_ads(reply))
        else:
            poll = sim_poll
        t_poll = time.process_time()
        del reply, sim_poll
        # untimed: the share of workers handed back as last poll's very objects (unchanged)
        ids_now = {id(w) for w in poll.workers}
        same_share = len(ids_now & last_ids) / max(1, len(ids_now))
        last_ids = ids_now
        t1 = time.process_time()
        report, tasks = controller.prepare(nodes, clock[0], poll)
        t_plan = time.process_time()
        outcomes = []
        for task in tasks:
            outcomes.extend(actuator.run(task))
        controller.record(outcomes)
        t2 = time.process_time()
        exposition = 0.0
        t3 = t2
        if metrics is not None:
            metrics.observe(report)
            t3 = time.process_time()
            from prometheus_client import generate_latest
            generate_latest(metrics.registry)
            exposition = time.process_time() - t3
        rows.append({
            "nodes": n, "fresh_records": fresh, "reuse": reuse, "churn": churn, "poll_cpu_s": t_poll - t0, "plan_cpu_s": t_plan - t1, "act_cpu_s": t2 - t_plan,
            "cycle_cpu_s": t2 - t1,
            "metrics_cpu_s": t3 - t2, "exposition_cpu_s": exposition,
            "total_cpu_s": (t_poll - t0) + (t3 - t1) + exposition,
            "cloud_calls": c_cloud.total(), "scheduler_calls": c_sched.total(),
            "cloud_call_detail": dict(c_cloud.calls), "scheduler_call_detail": dict(c_sched.calls),
            "same_workers": round(same_share, 4), "rss_after_mb": round(_rss_mb(), 1), "actions": len(report.plan.items), "boots": sum(b.count for b in report.plan.boots),
        })
    # the first cycle does the work (drains, destroys, boots) and reads every record; the steady
    # cycles after it (their medians) find what changed
    best = dict(rows[0])
    steady = rows[1:] or rows
    for key in _PHASES + ("total_cpu_s", "same_workers"):
        best["steady_" + key] = statistics.median(r[key] for r in steady)
    best["steady_cloud_call_detail"] = steady[-1]["cloud_call_detail"]
    best["steady_scheduler_call_detail"] = steady[-1]["scheduler_call_detail"]
    best["rss_by_cycle_mb"] = [r["rss_after_mb"] for r in rows]
    best["rss_mb"] = round(_rss_mb(), 1)
    best["world_rss_mb"] = round(world_mb, 1)
    best["build_s"] = round(build_s, 2)
    return best


def _child(n: int, repeat: int, conn, fresh: bool = True, reuse: bool = True, churn: float = 0.05) -> None:
    import logging

    logging.getLogger("nodemanager").setLevel(logging.ERROR)  # this child process only: no decision log
    try:
        conn.send(measure(n, repeat, tick=lambda: conn.send(None), fresh=fresh, reuse=reuse, churn=churn))
    except BaseException as exc:  # report, do not hang the parent
        conn.send({"nodes": n, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        conn.close()


def _run(args: argparse.Namespace) -> int:
    import json
    import multiprocessing
    import platform

    from nodemanager.sim.progress import progress_bar

    try:
        sizes = [int(x) for x in args.nodes.split(",") if x.strip()]
        if not sizes or min(sizes) <= 0:
            raise ValueError
    except ValueError:
        print(f"nodemanager bench: --nodes {args.nodes!r}: expected positive integers, comma-separated",
              file=sys.stderr)
        return 1
    ctx = multiprocessing.get_context("fork")
    rows = []
    steps = max(1, args.repeat)  # building the pool, then each cycle but the last one
    with progress_bar(len(sizes) * steps, "bench", enabled=not args.json, unit=" steps") as bar:
        for n in sizes:
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(n, args.repeat, child, args.fresh, args.reuse, args.churn))
            proc.start()
            child.close()
            while (row := parent.recv()) is None:  # None: one step done
                bar.update(1)
            rows.append(row)
            proc.join()
    failed = [r for r in rows if "error" in r]
    if args.json:
        print(json.dumps({"machine": _machine(), "python": platform.python_version(), "rows": rows},
                         indent=2))
    else:
        planning = "reusing last cycle's work" if args.reuse else "every node planned afresh"
        print(f"machine: {_machine()}, Python {platform.python_version()}, "
              f"{'fresh' if args.fresh else 'the same'} records every cycle, "
              f"{planning}")
        head = ("nodes", "first s", "poll s", "plan s", "act s", "metrics s", "scrape s", "steady s",
                "RSS MB", "world MB", "cloud calls", "sched calls", "actions")
        print("  ".join(f"{h:>11}" for h in head))
        for r in rows:
            if "error" in r:
                print(f"{r['nodes']:>11}  failed: {r['error']}")
                continue
            cells = (r["nodes"], f"{r['total_cpu_s']:.3f}",
                     *(f"{r['steady_' + k]:.3f}" for k in _PHASES + ("total_cpu_s",)),
                     r["rss_mb"], r["world_rss_mb"],
                     f"{_calls(r['cloud_call_detail'], 'list_nodes')}/{_calls(r['steady_cloud_call_detail'], 'list_nodes')}",
                     f"{_calls(r['scheduler_call_detail'], 'poll')}/{_calls(r['steady_scheduler_call_detail'], 'poll')}",
                     f"{r['actions']}+{r['boots']}b")
            print("  ".join(f"{c:>11}" for c in cells))
        print(f"CPU seconds. first = the first cycle (every record read, the most to do); then the "
              f"median of the {max(1, args.repeat - 1)} steady cycle(s) after it, with "
              f"{args.churn:.0%} of the nodes changed before each: poll = the adapters reading the cloud "
              "listing and the collector's ads into records; plan = the controller's cycle: snapshot, "
              "pairing, classification, matrix, plan, decision logging; act = the actuator carrying the "
              "plan out (the daemon does this in its actuator actors); metrics = Metrics.observe; "
              "scrape = one Prometheus exposition; steady = all of them. RSS = the whole process after "
              "the cycles; world = its RSS once the simulated cloud and pool were built, before the "
              "first cycle (the rest is the controller's). Calls through the cloud and scheduler ports, "
              "first cycle/last cycle, as listing+actions (each drain, cancel or destroy costs one or "
              "two calls). actions = drains, cancels and destroys planned in the first cycle, b = nodes booted.")
    return 1 if failed else 0


def _calls(detail: dict, polling: str) -> str:
    """``polls+actions``: the listing call(s), then the calls the plan's actions made."""
    poll = detail.get(polling, 0)
    return f"{poll}+{sum(detail.values()) - poll}"


def _machine() -> str:
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem = int(fh.readline().split()[1]) / 1024 / 1024
    except (OSError, ValueError, IndexError):
        mem = 0.0
    return f"{cpu}, {os.cpu_count()} CPUs, {mem:.0f} GB RAM, {platform.system()} {platform.release()}"
