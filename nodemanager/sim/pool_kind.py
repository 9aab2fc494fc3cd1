"""``[Scheduler] type = simulated``: the in-process simulated pool (the demo's, with the
simulated cloud) as a :class:`~nodemanager.configuration.kinds.SchedulerKind` like any other."""

from __future__ import annotations

from nodemanager.scheduler.classifiers import classify_by_fields
from nodemanager.configuration.kinds import SchedulerKind
from nodemanager.configuration.values import amount, count, seconds

__all__ = ["KIND"]

_SPAN = seconds(0.001, 365 * 86400)   # as [Daemon]'s durations: 0 (none) up to a year


KIND = SchedulerKind(
    name="simulated",
    options=frozenset({"join_delay", "boot_delay", "jobs_per_hour", "job_runtime", "job_cpus", "seed",
                       "burst_every", "burst_size"}),
    numbers={"join_delay": _SPAN, "boot_delay": _SPAN, "job_runtime": _SPAN,
             "burst_every": seconds(1, 7 * 86400), "burst_size": count(100_000),
             "job_cpus": count(1024, low=1), "seed": count(2**31), "jobs_per_hour": amount(0.001, 1_000_000)},
    build=None, classify=classify_by_fields)
