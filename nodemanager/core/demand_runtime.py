"""Queued jobs' predicted runtimes, for the size and market choice. Pure.

A spot market's price for a group of jobs grows with how long they run (re-runs after a reclaim,
:mod:`nodemanager.core.pricing`), and the users' requested times are a poor guess of that (often
10-1000x the runtime). Where the scheduler groups its demand by user and job name
(``Demand.user`` / ``Demand.name``), each group's runtime is predicted as a running job's is
(:func:`nodemanager.core.runtime_prediction.predict_runtime`: the mean of that user's last
finished runtimes of that name, else of any name, at most the requested time; the requested
time with no history), rounded up to a walltime bucket. Groups then alike but for their user and
name become one, so the demand stays a few items. :func:`priced_time` is the one place the
choice reads how long a group is priced for.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from nodemanager.core.runtime_prediction import Recent, predict_runtime, recent_runtimes
from nodemanager.core.walltime import walltime_bucket
from nodemanager.model import Demand

__all__ = ["predicted_demand", "priced_time"]


def priced_time(d: Demand) -> float | None:
    """How long ``d``'s jobs are priced as running, in seconds: their predicted runtime where
    known, else their requested walltime (None: neither)."""
    return d.runtime if d.runtime is not None else d.walltime


def predicted_demand(demand: Sequence[Demand], recent: Recent) -> tuple[Demand, ...]:
    """``demand`` with each user's group given its predicted ``runtime`` (module doc), and the
    groups then alike but for user and name merged (counts added, the oldest submit kept), in
    the order each merged group first appears."""
    if not any(d.user is not None for d in demand):
        return tuple(demand)
    out: dict[Demand, Demand] = {}
    for d in demand:
        if d.user is not None:
            runtime = walltime_bucket(predict_runtime(recent_runtimes(recent, d.user, d.name), d.walltime))
            d = replace(d, user=None, name=None, runtime=runtime)
        key = replace(d, count=0, oldest_submit=None)
        seen = out.get(key)
        if seen is None:
            out[key] = d
            continue
        oldest = [t for t in (seen.oldest_submit, d.oldest_submit) if t is not None]
        out[key] = replace(seen, count=seen.count + d.count, oldest_submit=min(oldest) if oldest else None)
    return tuple(out.values())
