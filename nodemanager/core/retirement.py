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
    if end <= now:
        # every running job has outlived its retirement: a drain evicts it at once, whatever its
        # expected end says (one listed past its end may still run)
        return f"{jobs} job(s) run and their retirement has run out"
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
    return _outlives_own(worker, end, now)


def _outlives_own(worker: Worker, end: float, now: float) -> str | None:
    """Why a job would outlive its own retirement, or None. A graceful drain lets every job run
    until the longest retirement of the jobs *still running* ends, so a job that ends early takes
    its retirement with it: each job must end within its own. With one MaxJobRetirementTime for
    the node's jobs, a job's own retirement ends ``end`` less how much later the last one started.
    Unknown without every running job's start and limit."""
    jobs = worker.jobs
    if not jobs or len(jobs) < worker.running_jobs or any(j.limit is None for j in jobs):
        return None
    retirement = end - max(j.start for j in jobs)   # one job's, from its start
    worst = max(jobs, key=lambda j: j.limit or 0.0)
    if (worst.limit or 0.0) <= retirement:
        return None
    return (f"a job ends in {duration(max(worst.start + (worst.limit or 0.0) - now, 0.0))}, after its own "
            f"retirement ({duration(max(worst.start + retirement - now, 0.0))}): the jobs whose retirement covers it may end first")
