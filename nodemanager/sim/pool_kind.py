"""``[Scheduler] type = simulated``: the in-process simulated pool (the demo's, with the
simulated cloud) as a :class:`~nodemanager.configuration.kinds.SchedulerKind` like any other."""

from __future__ import annotations

from nodemanager.scheduler.classifiers import classify_by_fields
from nodemanager.configuration.kinds import SchedulerKind

__all__ = ["KIND"]


KIND = SchedulerKind(
    name="simulated",
    options=frozenset({"join_delay", "boot_delay", "jobs_per_hour", "job_runtime", "job_cpus", "seed",
                       "burst_every", "burst_size"}),
    build=None, classify=classify_by_fields)
