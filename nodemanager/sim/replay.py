"""The discrete-event replay: an SWF trace through the daemon's own controller, core and actuator.

One replay wires, on a virtual clock:

* :class:`~nodemanager.sim.cloud.SimCloud` (boot delay, billing) whose booted VMs start
  :class:`~nodemanager.sim.pool.SimPool` startds (HTCondor partitionable slots, drains as HTCondor's draining design says);
* :class:`~nodemanager.cycle.actuate.Actuator` and :class:`~nodemanager.cycle.controller.Controller`, the
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
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.sim.prediction_figures import with_accuracy
from nodemanager.cycle.controller_inputs import DESTROYED_KEPT
from nodemanager.model import ItemKind, Plan, PlanItem
from nodemanager.sim.baseline_layer import layer_planner
from nodemanager.sim.end_grouping import STEERED, predicted_runtime
from nodemanager.cycle.plan_reuse import reusing
from nodemanager.sim.baselines import Policy, SimParams
from nodemanager.sim.constrained import constrain
from nodemanager.sim.figures import Bounds, Figures, Series
from nodemanager.sim.replay_figures import replay_figures
from nodemanager.sim.replay_jobs import MEMORY_QUANTUM, JobSplit, Piece, split_jobs
from nodemanager.sim.replay_world import ReplayWorld
from nodemanager.core.warm import warm_turns
from nodemanager.sim.spend import replay_spend
from nodemanager.sim.skip import destroys_settle, settled_destroys, time_reads
from nodemanager.sim.skip_rules import SKIP_PROVEN
from nodemanager.core.reasons import time_dependent
from nodemanager.sim.swf import SwfJob

__all__ = ["ReplayResult", "Piece", "split_jobs", "replay", "MEMORY_QUANTUM"]

_INF = math.inf


@dataclass
class ReplayResult:
    figures: Figures
    series: Series | None = None



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


def replay(jobs: Sequence[SwfJob], policy: Policy, sim: SimParams, bounds: Bounds, *,
           trace: str = "", window: str = "", record_series: bool = True,
           split: JobSplit | None = None, skip_cycles: bool = True,
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Replay ``jobs`` under ``policy``; returns the figures (and the nodes-over-time series).

    ``skip_cycles`` False runs every cycle of the grid (for checking that skipping changes
    nothing). ``progress`` is called with the number of job pieces submitted since its last
    call, about every 1 % of them (a progress bar's ``update``)."""
    wall0 = time.perf_counter()
    if sim.placement in STEERED and policy.baseline.startswith("nodemanager"):
        policy = replace(policy, settings=replace(policy.settings, core=replace(policy.settings.core, steering=True)))
    if sim.placement == "ends":   # the negotiator reads the controller's predicted runtimes
        policy = replace(policy, settings=replace(policy.settings, core=replace(
            policy.settings.core, runtime_prediction="recent")))
    settings = policy.settings
    # a reason whose time settings are on may act at any cycle: only consolidation's is proven
    # exact under skipping (the watch's free-core rules); max_lifetime's, drift's or a site's own
    # reason's is not (tests/test_sim_skip.py), and then every cycle runs
    skip_cycles = skip_cycles and all(r.name in SKIP_PROVEN for r in time_dependent(settings.core))
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
    w = ReplayWorld(policy, sim, t0)
    pool, cloud = w.pool, w.cloud
    if sim.spend_by:
        pool.ended_log = []
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
    # the replay's records come back as the same objects while unchanged: last cycle's work is reused
    controller = Controller(settings, policy.matrix, actuator, clock=w.clock, planner=reusing(planner))
    if sim.placement == "ends":
        pool.runtime = predicted_runtime(controller.memories.runtimes.recent)

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
    warm_turn = -_INF
    busy = peak = running_cores = 0
    alive_s = busy_s = 0.0
    prev_t = t0
    done_at: float | None = None
    # a policy that kills what it runs never ends its jobs: give up when even a no-wait pool would be long done
    give_up_at = (max((p.job.submit_time + p.job.runtime for p in pieces), default=0.0) + sim.give_up_after
                  if sim.give_up_after > 0 else _INF)
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
            if t == _INF or (done_at is None and t > give_up_at):
                break
            dt = t - prev_t
            if dt > 0:
                alive_s += up * dt
                busy_s += busy * dt
                if series is not None and t >= next_sample:
                    series.add(prev_t - first, up, busy, (running_cores + queued_cores) / cpn,
                               cloud.paid_seconds_so_far(prev_t) / 3600.0)
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
                    # a warm schedule's window opens or closes by time alone, which no node's next change says
                    if t >= warm_turn:  # nothing turns before the last answer: ask again only past it
                        warm_turn = warm_turns(sizes, t)
                    wake = min(wake, warm_turn)
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
        series.add(end - first, w.up, busy, (running_cores + queued_cores) / cpn,
                   cloud.paid_seconds_so_far(end) / 3600.0)
    figures = replay_figures(jobs, split, policy, bounds, w, counts, drained_at, end, alive_s, busy_s, peak,
                             trace, window, time.perf_counter() - wall0)
    if sim.spend_by:
        figures = replace(figures, spend=replay_spend(jobs, split, cloud, pool, w.launched, end, sim.spend_by))
    return ReplayResult(with_accuracy(figures, controller.memories.runtimes, settings.core.prediction), series)
