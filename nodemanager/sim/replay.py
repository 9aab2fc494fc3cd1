"""The discrete-event replay: an SWF trace through the daemon's own controller, core and actuator.

One replay wires, on a virtual clock:

* :class:`~nodemanager.sim.cloud.SimCloud` (boot delay, billing) whose booted VMs start
  :class:`~nodemanager.sim.pool.SimPool` startds (HTCondor partitionable slots, seed-000 drains);
* :class:`~nodemanager.actuate.Actuator` and :class:`~nodemanager.controller.Controller`, the
  same synchronous cycle the daemon runs: list the cloud, poll the pool, plan with
  :func:`nodemanager.core.plan`, carry the plan out.

Events, in time order: job submissions, pool events (joins, job ends, drain steps, negotiation),
cloud events (boots finishing), and controller cycles on the fixed grid ``t0 + k x
cycle_interval``. A cycle is skipped only when it cannot decide anything new: the previous
cycle planned nothing (or only destroys that leave nothing to do), the pool and cloud look the
same in every way the plan reads (each node's busy/idle/draining/drained state and, while jobs
queue, the queue and free cores, or a queue sure to fit on the free cores of nodes left alone:
:mod:`nodemanager.sim.skip`), and no node's state tuple changes by time alone before then
(:attr:`NodeExplanation.next_change`) in a dimension the plan reads for its worker state
(:func:`nodemanager.sim.skip.time_reads`).

Jobs wider than one node are split into node-sized pieces that the pool schedules
independently (no co-scheduling); the trace job's wait is its last piece's wait. Memory
requests are rounded up to 256 MB and capped at the node's usable memory (both counted).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from nodemanager.actuate import Actuator
from nodemanager.controller import Controller
from nodemanager.controller_inputs import DESTROYED_KEPT
from nodemanager.model import ItemKind, Plan, PlanItem
from nodemanager.sim.baseline_layer import layer_planner
from nodemanager.sim.baselines import Policy, SimParams
from nodemanager.sim.cloud import SimCloud
from nodemanager.sim.constrained import constrain
from nodemanager.sim.figures import HOUR, Bounds, Figures, Series, destroy_boot_pairs, percentile
from nodemanager.sim.pool import Job, SimPool
from nodemanager.sim.spot import SpotModel
from nodemanager.sim.skip import (CycleWatch, booting_capacity, destroys_settle, settled_destroys,
                                  settles, time_reads)
from nodemanager.sim.swf import SwfJob

__all__ = ["ReplayResult", "Piece", "split_jobs", "replay", "MEMORY_QUANTUM"]

MEMORY_QUANTUM = 256          # MB: job memory requests are rounded up to this
_INF = math.inf


@dataclass(frozen=True, slots=True)
class Piece:
    """One pool job: a whole trace job, or one node-sized piece of a wider one."""

    index: int          # position of the trace job in the replayed list
    job: Job


@dataclass
class ReplayResult:
    figures: Figures
    series: Series | None = None


@dataclass
class _Split:
    pieces: list[Piece]
    wide_jobs: int = 0
    memory_capped: int = 0


def split_jobs(jobs: Sequence[SwfJob], cores_per_node: int, usable_ram_mb: int) -> _Split:
    """Pool jobs for ``jobs``: one per job, or ceil(cores / cores_per_node) pieces for wider ones,
    each asking for its share of the memory (rounded up to :data:`MEMORY_QUANTUM`, at most
    ``usable_ram_mb``)."""
    out: list[Piece] = []
    wide = capped = 0
    cap = max(MEMORY_QUANTUM, usable_ram_mb // MEMORY_QUANTUM * MEMORY_QUANTUM)
    for i, j in enumerate(jobs):
        n = -(-j.cores // cores_per_node)
        if n > 1:
            wide += 1
        left = j.cores
        for k in range(n):
            cores = min(cores_per_node, left)
            left -= cores
            mem = 0
            if j.mem_mb > 0:
                mem = -(-int(math.ceil(j.mem_mb * cores / j.cores)) // MEMORY_QUANTUM) * MEMORY_QUANTUM
                if mem > cap:
                    mem = cap
                    capped += 1
            jid = f"{j.id}" if n == 1 else f"{j.id}.{k}"
            out.append(Piece(i, Job(id=jid, cpus=cores, ram_mb=mem, runtime=j.runtime,
                                    submit_time=j.submit,
                                    walltime=j.requested_time if j.requested_time > 0 else None)))
    return _Split(out, wide, capped)


def _gated(delay: float, last_boot: list[float]) -> Callable[..., Plan]:
    """cluster-autoscaler's ``--scale-down-delay-after-add``: the core's plan, without drains or
    destroys of working nodes until ``delay`` seconds after the latest boot."""
    from nodemanager.core import plan as core_plan

    def planner(snapshot, settings, matrix, **kw) -> Plan:
        p = core_plan(snapshot, settings, matrix, **kw)
        if snapshot.now >= last_boot[0] + delay:
            return p
        held = {i.node_id for i in p.items
                if i.kind is ItemKind.DRAIN or (i.kind is ItemKind.DESTROY and i.cancellable)}
        if not held:
            return p
        items: tuple[PlanItem, ...] = tuple(i for i in p.items if i.node_id not in held)
        nodes = tuple(e._replace(action=None, blocked_by="delay_after_add",
                                 reason=f"scale-down delay after add ({delay:.0f}s); {e.reason}")
                      if e.node_id in held else e for e in p.nodes)
        return replace(p, items=items, nodes=nodes)

    return planner


class _World:
    """The cloud, the pool and the bookkeeping the figures need."""

    def __init__(self, policy: Policy, sim: SimParams, t0: float) -> None:
        self.now = t0
        settings = policy.settings
        self.pool = SimPool(self.clock, join_delay=sim.join_delay,
                            negotiation_interval=sim.negotiation_interval,
                            max_retirement=sim.max_retirement, mem_scaling=settings.core.node_mem_scaling,
                            sizes=settings.core.sizes, placement=sim.placement)
        spot = SpotModel() if any(s.market == "spot" for s in settings.core.sizes) else None
        self.cloud = SimCloud(clock=self.clock, sizes=settings.core.sizes, boot_delay=sim.boot_delay,
                              on_running=self._running, on_terminated=self._terminated,
                              cluster=settings.cloud.cluster, spot=spot,
                              on_notice=self._notice, on_reclaim=self._reclaim)
        self.reclaim_kills = [0, 0.0]             # jobs killed and their core-seconds, by reclaims
        self.running: dict[str, float] = {}       # node id -> when its VM came up (live ones)
        self.came_up: dict[str, float] = {}       # node id -> when its VM came up (all)
        self.launched: dict[str, float] = {}      # node id -> launch time (every node ever)
        self.gone: dict[str, float] = {}          # node id -> destroy time
        self.last_busy: dict[str, float] = {}     # node id -> last time it was seen with a job
        self.live: dict[str, None] = {}           # node ids launched and not destroyed
        self.boot_times: list[float] = []         # every successful boot, for destroy->boot pairs
        self.pool_changed = True
        # consolidation and the karpenter/cobald baselines read free cores with nothing queued
        self.watch = CycleWatch(self.pool, self.live, self.running, policy.matrix.vocabulary.core_state,
                                free_matters=settings.core.consolidate or policy.watch_load,
                                # a spot VM taken back unseen leaves its worker carried as last seen
                                margin=settings.core.consolidate_margin
                                if settings.core.consolidate and not policy.watch_load and spot is None
                                else None,
                                settles=None if policy.layer else settles(policy.matrix, settings.core),
                                booting=booting_capacity(settings.core))
        self._used: dict[str, int] = {}           # busy node id -> cores its jobs hold
        self._used_sum = 0
        self._load_at = t0                        # when load() last looked
        self._unloaded: set[str] = set()          # nodes changed since load() last looked

    def clock(self) -> float:
        return self.now

    def launch(self, node_id: str, t: float) -> None:
        self.launched[node_id] = t
        self.live[node_id] = None
        self.changed(node_id)

    def changed(self, node_id: str) -> None:
        """``node_id``'s VM or startd changed (the cycle check and the load count look again)."""
        self.watch.node_changed(node_id)
        self._unloaded.add(node_id)

    def sync(self) -> None:
        """Pass on the nodes whose startd changed since the last call."""
        touched = self.pool.touched
        for nid in touched:
            self.changed(nid)
        touched.clear()

    def _running(self, node, size) -> None:
        self.running[node.id] = self.now
        self.changed(node.id)
        self.came_up[node.id] = self.now
        self.pool.vm_started(node, size)

    def _terminated(self, node_id: str) -> None:
        self.running.pop(node_id, None)
        self.gone[node_id] = self.now
        self.live.pop(node_id, None)
        self.changed(node_id)
        self.pool.vm_stopped(node_id)
        self.pool_changed = True

    def _notice(self, node_id: str, deadline: float) -> None:
        self.pool.reclaim_notice(node_id, deadline)
        self.pool_changed = True

    def _reclaim(self, node_id: str) -> None:
        """The cloud takes a spot VM back now: what its termination kills is the cloud's doing."""
        before = self.pool.stats
        self.pool.vm_stopped(node_id)
        after = self.pool.stats
        # a job a drain was already evicting counts as evicted
        self.reclaim_kills[0] += after.killed - before.killed - (after.evicted - before.evicted)
        self.reclaim_kills[1] += after.badput - before.badput

    @property
    def up(self) -> int:
        return len(self.launched) - len(self.gone)

    def load(self) -> tuple[int, int]:
        """(nodes running at least one job, cores in use), from the live startds; looks only at
        the nodes that changed since the last call (the others hold what they held)."""
        self.sync()
        startd, used = self.pool.startd, self._used
        for nid in self._unloaded:
            st = startd(nid)
            if st is not None and st.dslots and nid in self.running:
                self._used_sum += st.cpus - st.free_cpus - used.get(nid, 0)
                used[nid] = st.cpus - st.free_cpus
            elif nid in used:
                # a look follows every change at the time it happens: busy until now, however
                # many cycles ran or were skipped since the look before
                self._used_sum -= used.pop(nid)
                self.last_busy[nid] = self.now
        self._unloaded.clear()
        self._load_at = self.now
        return len(used), self._used_sum

    def busy_until_now(self) -> None:
        """Bring ``last_busy`` up to the last look for the nodes busy then (at the end)."""
        for nid in self._used:
            self.last_busy[nid] = self._load_at

    def unchanged(self) -> bool:
        """True if a cycle now may be skipped (:meth:`CycleWatch.unchanged`)."""
        self.sync()
        return self.watch.unchanged()

    def mark(self, plan: Plan) -> None:
        """A cycle ran and planned ``plan`` (:meth:`CycleWatch.mark`)."""
        self.sync()
        self.watch.mark(plan)


def replay(jobs: Sequence[SwfJob], policy: Policy, sim: SimParams, bounds: Bounds, *,
           trace: str = "", window: str = "", record_series: bool = True,
           split: _Split | None = None, skip_cycles: bool = True,
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Replay ``jobs`` under ``policy``; returns the figures (and the nodes-over-time series).

    ``skip_cycles`` False runs every cycle of the grid (for checking that skipping changes
    nothing). ``progress`` is called with the number of job pieces submitted since its last
    call, about every 1 % of them (a progress bar's ``update``)."""
    wall0 = time.perf_counter()
    settings = policy.settings
    # max_lifetime's relabel is not yet proven exact under skipping (tests/test_sim_skip.py)
    skip_cycles = skip_cycles and settings.core.max_lifetime <= 0
    sizes = settings.core.sizes
    if not sizes:
        raise ValueError("the simulation needs at least one node size")
    cpn = bounds.cores_per_node
    if split is None:
        big = max(sizes, key=lambda s: s.cores)
        split = split_jobs(jobs, cpn, int(big.ram_mb * settings.core.node_mem_scaling))
        split.pieces = constrain(split.pieces, sim.gpu_fraction, sim.constrained_fraction, sim.job_seed)
    pieces = split.pieces
    interval = max(1.0, settings.poll.cycle_interval)
    first = pieces[0].job.submit_time if pieces else 0.0
    t0 = first - (sim.boot_delay + sim.join_delay + 2 * interval)
    w = _World(policy, sim, t0)
    pool, cloud = w.pool, w.cloud
    seq = [0]

    def request_id() -> str:
        seq[0] += 1
        return f"r{seq[0]:07d}"

    # a baseline's layer may read what the matrix does not: every time-driven change wakes it
    reads = {} if policy.layer else time_reads(policy.matrix, settings.core)
    after_destroys = not policy.layer and destroys_settle(settings.core)
    delay = policy.scale_down_delay_after_boot
    last_boot = [-_INF]
    planner = layer_planner(policy, pool, _gated(delay, last_boot) if delay > 0 else None)
    actuator = Actuator(cloud, pool, settings, clock=w.clock, request_ids=request_id)
    controller = Controller(settings, policy.matrix, actuator, clock=w.clock, planner=planner)

    counts = dict(boots=0, drains=0, drain_cancels=0, destroys=0, escalations=0, cycles=0, skipped=0)
    drained_at: dict[str, float] = {}
    series = Series() if record_series else None
    next_sample = t0
    n_pieces = len(pieces)
    i = 0
    next_tick = t0
    dirty_since: float | None = None     # first event since the last cycle
    active = True
    wake = _INF
    busy = peak = running_cores = 0
    alive_s = busy_s = 0.0
    prev_t = t0
    done_at: float | None = None
    queued_cores = 0
    # the replay's decisions are counted, not logged (a 30-day window makes ~10^5 lines)
    decisions = logging.getLogger("nodemanager")
    old_level = decisions.level
    decisions.setLevel(logging.ERROR)
    reported, report_every = 0, max(1, n_pieces // 100)
    try:
        while True:
            ts = pieces[i].job.submit_time if i < n_pieces else _INF
            tp = pool.next_event_time()
            tc = cloud.next_event_time()
            t_event = min(ts, _INF if tp is None else tp, _INF if tc is None else tc)
            if active or not skip_cycles:
                tick = next_tick
            else:
                soon = min(wake, w.watch.soon)
                target = soon if dirty_since is None else min(soon, dirty_since)
                if target == _INF:
                    tick = _INF
                else:
                    k = max(0, math.ceil((target - t0) / interval - 1e-9))
                    tick = max(next_tick, t0 + k * interval)
            t = min(t_event, tick)
            up = w.up
            if done_at is not None:
                if up <= settings.core.min_nodes:
                    break
                if t > done_at + sim.tail:
                    t = done_at + sim.tail
                    alive_s += up * (t - prev_t)
                    busy_s += busy * (t - prev_t)
                    prev_t = t
                    break
            if t == _INF:
                break
            dt = t - prev_t
            if dt > 0:
                alive_s += up * dt
                busy_s += busy * dt
                if series is not None and t >= next_sample:
                    series.add(prev_t - first, up, busy, (running_cores + queued_cores) / cpn)
                    while next_sample <= t:
                        next_sample += sim.sample_every
            prev_t = t
            w.now = t
            changed = False
            if tc is not None and tc <= t:
                cloud.advance(t)
                changed = True
            if changed or (tp is not None and tp <= t) or ts <= t:
                pool.advance(t)
                changed = True
            while i < n_pieces and pieces[i].job.submit_time <= t:
                # after the pool reached t, so that its next negotiation is not before the submit
                pool.submit(pieces[i].job)
                w.watch.queue_changed()
                queued_cores += pieces[i].job.cpus
                i += 1
            if progress is not None and i - reported >= report_every:
                progress(i - reported)
                reported = i
            if changed and dirty_since is None:
                dirty_since = t
            if t >= tick:
                next_tick = tick + interval
                dirty_since = None
                if skip_cycles and not active and t < min(wake, w.watch.soon) and w.unchanged():
                    counts["skipped"] += 1
                else:
                    report = controller.cycle(cloud.list_nodes(), t, pool.poll())
                    counts["cycles"] += 1
                    plan = report.plan
                    # destroys whose world then plans nothing need no cycle after them (skip_rules)
                    quiet = bool(plan.items) and after_destroys and settled_destroys(plan, report.outcomes)
                    acted = bool(plan.items) and not quiet
                    # a baseline layer whose state moves with time (COBalD's demand) needs every cycle
                    # so does a boot held back for a while (rebuy_hold, a size's backoff)
                    # and inputs the controller still carries (a node missing from the listing)
                    active = bool(acted or plan.boots or getattr(planner, "moving", False)
                                  or any(u.reason == "backoff" for u in plan.unmet)
                                  or controller.inputs.carrying())
                    wake = w.watch.wake(plan, t, reads, settings.core.boot_grace, cloud.node)
                    if quiet:
                        # a cycle must list the nodes gone while the controller still knows it destroyed them
                        wake = min(wake, t + DESTROYED_KEPT / 2)
                    if delay > 0 and last_boot[0] + delay > t:
                        wake = min(wake, last_boot[0] + delay)
                    for o in report.outcomes:
                        if o.result != "ok":
                            active = True
                        elif o.kind == "boot":
                            counts["boots"] += 1
                            w.boot_times.append(t)
                            last_boot[0] = t
                            w.launch(o.node, t)
                        elif o.kind == "drain":
                            counts["drains"] += 1
                            drained_at[o.node] = t
                        elif o.kind == "cancel_drain":
                            counts["drain_cancels"] += 1
                            drained_at.pop(o.node, None)
                        elif o.kind == "destroy":
                            counts["destroys"] += 1
                        elif o.kind == "escalate":
                            counts["escalations"] += 1
                    if skip_cycles:
                        w.mark(plan)
                    changed = True
            if changed or w.pool_changed:
                w.pool_changed = False
                busy, running_cores = w.load()
                queued_cores = sum(d.cpus * d.count for d in pool.demand())
                if i >= n_pieces and done_at is None and queued_cores == 0 and running_cores == 0:
                    done_at = t
            peak = max(peak, w.up)
    finally:
        decisions.setLevel(old_level)
    if progress is not None and n_pieces > reported:
        progress(n_pieces - reported)
    end = prev_t
    w.now = end
    w.busy_until_now()
    if series is not None:
        series.add(end - first, w.up, busy, (running_cores + queued_cores) / cpn)
    return ReplayResult(_figures(jobs, split, policy, bounds, w, counts, drained_at, end,
                                 alive_s, busy_s, peak, trace, window, time.perf_counter() - wall0),
                        series)


def _figures(jobs: Sequence[SwfJob], split: _Split, policy: Policy, bounds: Bounds, w: _World,
             counts: dict[str, int], drained_at: dict[str, float], end: float, alive_s: float,
             busy_s: float, peak: int, trace: str, window: str, wall: float) -> Figures:
    pool, cloud = w.pool, w.cloud
    st = pool.stats
    starts = pool.first_starts()
    job_start: list[float] = [-_INF] * len(jobs)
    started = [0] * len(jobs)
    for p in split.pieces:
        s = starts.get(p.job.id)
        if s is not None:
            started[p.index] += 1
            if s > job_start[p.index]:
                job_start[p.index] = s
    need = [0] * len(jobs)
    for p in split.pieces:
        need[p.index] += 1
    waits = sorted(job_start[k] - jobs[k].submit for k in range(len(jobs)) if started[k] == need[k])
    unfinished = len(jobs) - len(waits)
    paid = sum(cloud.billing_by_size(end).values())
    booting = 0.0
    for nid, launched in w.launched.items():
        gone = w.gone.get(nid, end)
        up_at = w.came_up.get(nid)
        joined = _INF if up_at is None else up_at + w.pool.join_delay
        booting += max(0.0, min(gone, joined) - launched)
    draining = 0.0
    for nid, t in drained_at.items():
        ended = w.gone.get(nid)
        if ended is not None:
            draining += max(0.0, ended - max(t, w.last_busy.get(nid, t)))
    idle = max(0.0, alive_s - busy_s - booting - draining)
    waste = {"busy": busy_s / HOUR, "idle": idle / HOUR, "booting": booting / HOUR,
             "draining": draining / HOUR, "billing": max(0.0, paid - alive_s) / HOUR}
    paid_h = paid / HOUR
    return Figures(
        policy=policy.name, trace=trace, window=window, cores_per_node=bounds.cores_per_node,
        paid_node_hours=paid_h, busy_node_hours=busy_s / HOUR,
        idle_paid_node_hours=paid_h - busy_s / HOUR,
        lower_bound_work_node_hours=bounds.work_node_hours,
        lower_bound_nowait_node_hours=bounds.nowait_node_hours,
        cost_ratio=paid_h / bounds.nowait_node_hours if bounds.nowait_node_hours else 0.0,
        wait_p50=percentile(waits, 50), wait_p95=percentile(waits, 95),
        wait_p99=percentile(waits, 99), wait_max=waits[-1] if waits else 0.0,
        wait_mean=sum(waits) / len(waits) if waits else 0.0,
        jobs_submitted=len(jobs), jobs_completed=len(jobs) - unfinished, jobs_killed=st.killed,
        jobs_unfinished=unfinished, badput_core_hours=st.badput / HOUR,
        boots=counts["boots"], drains=counts["drains"], drain_cancels=counts["drain_cancels"],
        destroys=counts["destroys"], late_give_backs=cloud.late_give_backs(), peak_nodes=peak,
        wall_seconds=wall,
        wide_jobs_split=split.wide_jobs, pieces=len(split.pieces), cycles=counts["cycles"],
        cycles_skipped=counts["skipped"], escalations=counts["escalations"], waste=waste,
        params={**{k: v for k, v in policy.params.items()}, "baseline": policy.baseline,
                "memory_capped": split.memory_capped},
        **_spot_figures(w, end),
        placement=w.pool.placement,
        destroy_boot_60s=destroy_boot_pairs(list(w.gone.values()), w.boot_times),
    )


def _spot_figures(w: _World, end: float) -> dict[str, Any]:
    """Money paid and the kills split by cause: the cloud's reclaims, a graceful drain's
    retirement running out (evictions), or our other decisions."""
    st = w.pool.stats
    killed, badput = w.reclaim_kills
    return dict(money=w.cloud.cost(end), reclaims=len(w.cloud.reclaimed), jobs_evicted=st.evicted,
                jobs_killed_by={"by_reclaim": int(killed), "by_eviction": st.evicted,
                                "by_us": st.killed - int(killed) - st.evicted},
                badput_core_hours_by={"by_reclaim": round(badput / HOUR, 4),
                                      "by_us": round((st.badput - badput) / HOUR, 4)})



# ---- many replays: policies, sweeps, in parallel ------------------------------------------------

_SHARED: dict[str, Any] = {}


def _run_one(k: int) -> tuple[int, ReplayResult]:
    s = _SHARED
    policy, record = s["runs"][k]
    return k, replay(s["jobs"], policy, s["sim"], s["bounds"], trace=s["trace"], window=s["window"],
                     record_series=record, split=s["split"], progress=s["progress"])


def run_many(jobs: Sequence[SwfJob], runs: Sequence[tuple[Policy, bool]], sim: SimParams,
             bounds: Bounds, *, trace: str = "", window: str = "", processes: int = 1,
             progress: Any = None) -> list[ReplayResult]:
    """Replay ``jobs`` once per ``(policy, record_series)``, in ``processes`` worker processes
    (forked, so the trace is read once); results in the order of ``runs``.

    ``progress``: a progress bar (``nodemanager.progress.progress_bar``): its ``total`` is set to
    the job pieces of all runs and it is updated as the replays, in whichever process, submit them.
    """
    sizes = runs[0][0].settings.core.sizes if runs else ()
    big = max(sizes, key=lambda s: s.cores) if sizes else None
    split = split_jobs(jobs, bounds.cores_per_node,
                       int(big.ram_mb * runs[0][0].settings.core.node_mem_scaling) if big else 0)
    split.pieces = constrain(split.pieces, sim.gpu_fraction, sim.constrained_fraction, sim.job_seed)
    tasks = list(range(len(runs)))
    parallel = processes > 1 and len(tasks) > 1
    if progress is not None:
        progress.total = len(split.pieces) * len(runs)
        progress.refresh()
    if not parallel:
        _SHARED.update(progress=progress.update if progress is not None else None)
    # the workers are forked: they read the trace, the split and the policies from here
    _SHARED.update(jobs=jobs, sim=sim, bounds=bounds, trace=trace, window=window, split=split,
                   runs=list(runs))
    out: list[ReplayResult | None] = [None] * len(tasks)
    try:
        if not parallel:
            for task in tasks:
                k, res = _run_one(task)
                out[k] = res
        else:
            import multiprocessing

            ctx = multiprocessing.get_context("fork")
            ticks = ctx.SimpleQueue() if progress is not None else None
            _SHARED.update(progress=ticks.put if ticks is not None else None)
            relay = _relay(ticks, progress) if ticks is not None else None
            # longest first: cycle intervals differ, the 10 s ones take longest
            order = sorted(tasks, key=lambda k: runs[k][0].settings.poll.cycle_interval)
            try:
                with ctx.Pool(processes) as pool:
                    for k, res in pool.imap_unordered(_run_one, order):
                        out[k] = res
            finally:
                if relay is not None and ticks is not None:
                    ticks.put(None)
                    relay.join()
    finally:
        _SHARED.clear()
    return [r for r in out if r is not None]


def _relay(ticks: Any, bar: Any) -> threading.Thread:
    """A thread that moves the workers' progress ticks onto ``bar`` until it reads None."""
    def run() -> None:
        while (n := ticks.get()) is not None:
            bar.update(n)

    thread = threading.Thread(target=run, name="replay-progress", daemon=True)
    thread.start()
    return thread
