"""Many replays of one trace: policies and sweeps, one after the other or in forked worker
processes that read the trace once, with one progress bar for all."""

from __future__ import annotations

import threading
from typing import Any, Sequence

from nodemanager.sim.baselines import Policy, SimParams
from nodemanager.sim.constrained import constrain
from nodemanager.sim.figures import Bounds
from nodemanager.sim.replay import ReplayResult, replay
from nodemanager.sim.replay_jobs import split_jobs
from nodemanager.sim.swf import SwfJob

__all__ = ["run_many"]

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

    ``progress``: a progress bar (``nodemanager.sim.progress.progress_bar``): its ``total`` is set
    to the number of replays, and it moves by each replay's share of job pieces submitted, in
    whichever process.
    """
    sizes = runs[0][0].settings.core.sizes if runs else ()
    big = max(sizes, key=lambda s: s.cores) if sizes else None
    split = split_jobs(jobs, bounds.cores_per_node,
                       int(big.ram_mb * runs[0][0].settings.core.node_mem_scaling) if big else 0)
    split.pieces = constrain(split.pieces, sim.gpu_fraction, sim.constrained_fraction, sim.job_seed)
    tasks = list(range(len(runs)))
    parallel = processes > 1 and len(tasks) > 1
    per_piece = 1.0 / max(1, len(split.pieces))  # the bar counts replays, moved piece by piece
    if progress is not None:
        progress.total = len(runs)
        progress.refresh()
    if not parallel:
        _SHARED.update(progress=(lambda n: progress.update(n * per_piece)) if progress is not None else None)
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
            relay = _relay(ticks, progress, per_piece) if ticks is not None else None
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


def _relay(ticks: Any, bar: Any, scale: float) -> threading.Thread:
    """A thread that moves the workers' progress ticks (times ``scale``) onto ``bar`` until it
    reads None."""
    def run() -> None:
        while (n := ticks.get()) is not None:
            bar.update(n * scale)

    thread = threading.Thread(target=run, name="replay-progress", daemon=True)
    thread.start()
    return thread
