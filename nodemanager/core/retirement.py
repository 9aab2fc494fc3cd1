"""Whether a graceful drain of a node would end by evicting its running jobs: the one place that
reads the scheduler adapters' retirement end (HTCondor's ``MaxJobRetirementTime`` as the startd
projects it; a SLURM drain never evicts) against the running jobs' expected ends (SLURM's end
times, the jobs' walltimes). A job with no known end, or running :data:`OVERRUN` past its expected end, counts as
never ending; an unknown retirement end counts as now. Pure."""

from __future__ import annotations

from nodemanager.model import Worker
from nodemanager.text import duration

__all__ = ["would_evict"]

_NEVER = float("inf")
OVERRUN = 300.0   # seconds past its expected end before a job still listed counts as overrunning


def would_evict(worker: Worker | None, now: float) -> str | None:
    """Why a graceful drain of ``worker`` (begun now, or under way) would evict a running job, in
    words; None when it runs none (or there is no worker), or each is expected to end before the
    retirement ends."""
    jobs = max(worker.running_jobs, len(worker.job_end_times)) if worker is not None else 0
    if worker is None or jobs == 0:
        return None
    end = worker.retirement_end
    if end == _NEVER:
        return None
    if end is None:
        return f"{jobs} job(s) run and the scheduler gives no retirement time"
    left = f"retirement ends in {duration(max(end - now, 0.0))}"
    unknown = jobs - len(worker.job_end_times)
    if unknown > 0:
        return f"{unknown} of its {jobs} job(s) have no known end; {left}"
    # a job still running well past its expected end has none known any more: it may outlive the
    # retirement (a job that just ended may be listed running until the next polls)
    overrun = sum(1 for t in worker.job_end_times if t < now - OVERRUN)
    if overrun > 0:
        return f"{overrun} of its {jobs} job(s) run past their expected end; {left}"
    last = max(worker.job_end_times)
    if last > end:
        return f"its last job ends in {duration(max(last - now, 0.0))}; {left}"
    return None
