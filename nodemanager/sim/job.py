"""A batch job as the simulated pool runs it, and how it left a startd."""

from __future__ import annotations

from dataclasses import dataclass

from nodemanager.model import RunningJob

__all__ = ["Job", "JobEnd", "running_job"]


@dataclass(frozen=True, slots=True)
class Job:
    """A batch job: ``runtime`` is how long it really runs; ``walltime`` the user's estimate (if any).

    ``max_retirement`` is the job's own ``MaxJobRetirementTime``, which can only lower the machine's.
    """

    id: str
    cpus: int = 1
    ram_mb: int = 0
    runtime: float = 0.0
    submit_time: float = 0.0
    walltime: float | None = None
    max_retirement: float | None = None
    gpus: int = 0                       # RequestGPUs
    requirements: str | None = None     # the job's Requirements beyond resources (ClassAd, TARGET. = slot)
    owner: str | None = None            # Owner and Cmd: runtime prediction's keys
    cmd: str | None = None


@dataclass(frozen=True, slots=True)
class JobEnd:
    """A job left a startd at ``end``: finished (``killed`` False) or killed (``by_drain``: by a drain;
    ``evicted``: soft-killed because a graceful drain's retirement ran out while it ran)."""

    job: Job
    node: str
    start: float
    end: float
    killed: bool
    by_drain: bool = False
    evicted: bool = False


def running_job(job: Job, start: float) -> RunningJob:
    """``job`` as runtime prediction keys it: its owner and command, started at ``start``."""
    return RunningJob(job_id=job.id, user=job.owner or "", start=start, name=job.cmd, limit=job.walltime)
