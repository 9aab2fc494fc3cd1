"""Runtime prediction from each user's own recent jobs (Tsafrir, Etsion and Feitelson 2007,
"Backfilling using system-generated predictions rather than user runtime estimates"). Pure.

A running job's runtime is predicted as the mean of the last :data:`RECENT` finished runtimes of
the same user and job name (SLURM's job name, HTCondor's ``Cmd``, a trace's executable), else of
the same user, capped by the job's own time limit; with no history (cold start) the prediction is
the limit itself, and a job with neither has none. The finished runtimes are the controller's
memory (``nodemanager.cycle.runtime_memory``); this module only computes.

:func:`expected_end_times` is the one place the core reads when a node's jobs are expected to
end for choosing (consolidation's order, the victim estimate): the predictions when the
controller set them, else the scheduler's end times (the jobs' limits). Whether a drain would
evict (``nodemanager.core.retirement``) keeps reading the limits: a prediction is a good-faith
estimate, the limit the guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from nodemanager.model import RunningJob, Worker

__all__ = ["RECENT", "Recent", "recent_runtimes", "predict_runtime", "predict_ends", "expected_end_times", "Accuracy",
           "accuracy"]

RECENT = 2

# (user, name) -> the recent finished runtimes of that user's jobs of that name (None: of any
# name), oldest first
Recent = Callable[[str, str | None], Sequence[float]]


def predict_runtime(recent: Sequence[float], limit: float | None) -> float | None:
    """The predicted runtime in seconds: the mean of the last :data:`RECENT` of ``recent``, at
    most ``limit``; ``limit`` when there is no history; None with neither."""
    if limit is not None and not (math.isfinite(limit) and limit > 0):
        limit = None
    last = [r for r in recent[-RECENT:] if math.isfinite(r) and r >= 0]
    if not last:
        return limit
    guess = sum(last) / len(last)
    return min(guess, limit) if limit is not None else guess


def recent_runtimes(recent: Recent, user: str, name: str | None) -> Sequence[float]:
    """The recent runtimes a job of ``user`` named ``name`` is predicted from: of that user's jobs
    of that name, else of any of that user's jobs."""
    if name is not None:
        same = recent(user, name)
        if same:
            return same
    return recent(user, None)


def predict_ends(worker: Worker, recent: Recent) -> tuple[float, ...]:
    """The predicted ends of ``worker``'s named jobs, in the order of ``worker.jobs``; empty when
    it names none or a job has no prediction (then the scheduler's end times stand)."""
    ends = []
    for job in worker.jobs:
        runtime = predict_runtime(recent_runtimes(recent, job.user, job.name), job.limit)
        if runtime is None:
            return ()
        ends.append(job.start + runtime)
    return tuple(ends)


def _overrun(job: RunningJob, end: float, now: float) -> float:
    # a job past its prediction has run as long again ahead of it (runtimes are heavy-tailed),
    # never past its own limit
    if end >= now:
        return end
    later = job.start + 2.0 * (now - job.start)
    if job.limit is not None and math.isfinite(job.limit) and job.limit > 0:
        later = min(later, job.start + job.limit)
    return max(later, now)


def expected_end_times(worker: Worker, now: float) -> tuple[float, ...]:
    """When ``worker``'s running jobs are expected to end: the predictions when set (a job that
    outran its prediction: as long again as it has run, at most its limit), else the
    scheduler's end times (module doc)."""
    predicted = worker.predicted_end_times
    if not predicted or len(predicted) != len(worker.jobs):
        return worker.job_end_times
    return tuple(_overrun(job, end, now) for job, end in zip(worker.jobs, predicted))


@dataclass(frozen=True)
class Accuracy:
    """How far estimates were from the runtimes: median and 90th percentile of estimate / actual
    over ``count`` finished jobs (1.0 is exact; above: overestimated)."""

    count: int = 0
    median: float = 0.0
    p90: float = 0.0

    def words(self) -> str:
        if not self.count:
            return "no finished job measured"
        return f"median {self.median:.2f}x, p90 {self.p90:.2f}x over {self.count} jobs"


def accuracy(ratios: Iterable[float]) -> Accuracy:
    """The :class:`Accuracy` of estimate/actual ``ratios`` (nearest-rank percentiles)."""
    values = sorted(r for r in ratios if math.isfinite(r))
    if not values:
        return Accuracy()

    def rank(p: float) -> float:
        return values[min(len(values), max(1, math.ceil(p * len(values)))) - 1]

    return Accuracy(count=len(values), median=rank(0.5), p90=rank(0.9))
