"""Many replays of one trace: policies and sweeps, one after the other here, or as Dask tasks on
a local cluster of worker processes or on a running Dask scheduler's workers. The jobs are read
once and shipped once to each worker; one progress bar counts all replays."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

from nodemanager.sim.baselines import Policy, SimParams
from nodemanager.sim.constrained import constrain
from nodemanager.sim.figures import Bounds
from nodemanager.sim.replay import ReplayResult, replay
from nodemanager.sim.replay_jobs import JobSplit, split_jobs
from nodemanager.sim.swf import SwfJob

__all__ = ["run_many", "Shared"]


@dataclass(frozen=True)
class Shared:
    """What every replay of a run reads: sent to each worker once."""

    jobs: Sequence[SwfJob]
    sim: SimParams
    bounds: Bounds
    trace: str
    window: str
    split: JobSplit


def _replay_one(shared: Shared, policy: Policy, record: bool, progress: Any = None) -> ReplayResult:
    return replay(shared.jobs, policy, shared.sim, shared.bounds, trace=shared.trace, window=shared.window,
                  record_series=record, split=shared.split, progress=progress)


def run_many(jobs: Sequence[SwfJob], runs: Sequence[tuple[Policy, bool]], sim: SimParams,
             bounds: Bounds, *, trace: str = "", window: str = "", processes: int = 1,
             progress: Any = None, scheduler: str | None = None) -> list[ReplayResult]:
    """Replay ``jobs`` once per ``(policy, record_series)``; results in the order of ``runs``.

    With ``scheduler`` (``tcp://host:port``) the replays are tasks on that Dask scheduler's
    workers; else with ``processes`` > 1 and several runs, on a local Dask cluster of that many
    worker processes (one thread each); else here, one after the other.

    ``progress``: a progress bar (``nodemanager.sim.progress.progress_bar``): its ``total`` is set
    to the number of replays; here it moves by each replay's share of job pieces submitted, on
    Dask by one as each replay ends.
    """
    sizes = runs[0][0].settings.core.sizes if runs else ()
    big = max(sizes, key=lambda s: s.cores) if sizes else None
    split = split_jobs(jobs, bounds.cores_per_node,
                       int(big.ram_mb * runs[0][0].settings.core.node_mem_scaling) if big else 0)
    split.pieces = constrain(split.pieces, sim.gpu_fraction, sim.constrained_fraction, sim.job_seed)
    shared = Shared(jobs=list(jobs), sim=sim, bounds=bounds, trace=trace, window=window, split=split)
    if progress is not None:
        progress.total = len(runs)
        progress.refresh()
    if scheduler is None and (processes <= 1 or len(runs) <= 1):
        per_piece = 1.0 / max(1, len(split.pieces))  # the bar counts replays, moved piece by piece
        tick = (lambda n: progress.update(n * per_piece)) if progress is not None else None
        return [_replay_one(shared, policy, record, tick) for policy, record in runs]
    return _on_dask(shared, runs, processes, progress, scheduler)


def _on_dask(shared: Shared, runs: Sequence[tuple[Policy, bool]], processes: int, progress: Any,
             scheduler: str | None) -> list[ReplayResult]:
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        cluster = LocalCluster(n_workers=min(processes, len(runs)), threads_per_worker=1, processes=True,
                               dashboard_address=None, memory_limit=0, silence_logs=logging.ERROR)
    try:
        with Client(cluster if cluster is not None else scheduler) as client:
            data = client.scatter(shared, broadcast=True)
            # longest first: cycle intervals differ, the 10 s ones take longest
            order = sorted(range(len(runs)), key=lambda k: runs[k][0].settings.poll.cycle_interval)
            futures = {client.submit(_replay_one, data, runs[k][0], runs[k][1], pure=False,
                                     priority=len(order) - i): k for i, k in enumerate(order)}
            out: list[ReplayResult | None] = [None] * len(runs)
            for future in as_completed(futures):
                out[futures[future]] = future.result()
                if progress is not None:
                    progress.update(1)
    finally:
        if cluster is not None:
            cluster.close()
    return [r for r in out if r is not None]
