"""What the SLURM adapter holds of one poll (nodes, active jobs per node, the running jobs as
runtime prediction names them, the records it could not use) and of each drain of ours it watches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from nodemanager.model import FinishedJob, RunningJob
from nodemanager.scheduler.records import RecordProblem
from nodemanager.scheduler.slurm_json import ACTIVE_JOB_STATES, SlurmJob, SlurmNode

__all__ = ["PollState", "Track", "jobs_by_node", "running_jobs"]


@dataclass
class Track:
    """A drain of ours being watched (for unclaimed time and completion counting)."""

    request_id: str
    last_sample: float
    completed: bool = False


@dataclass(frozen=True)
class PollState:
    nodes: Mapping[str, SlurmNode]
    jobs: tuple[SlurmJob, ...]
    errors: tuple[RecordProblem, ...]
    at: float
    by_node: Mapping[str, tuple[SlurmJob, ...]]  # active jobs per node, in squeue order
    finished: tuple[FinishedJob, ...] = ()       # completed since the last poll (runtime prediction)
    named: Mapping[int, RunningJob] = field(default_factory=dict)  # running jobs by id (runtime prediction)

    def jobs_on(self, name: str) -> tuple[SlurmJob, ...]:
        return self.by_node.get(name, ())

    def named_on(self, name: str) -> tuple[RunningJob, ...]:
        """The node's running jobs as runtime prediction keys them; none when one of them could
        not be named (its end is unknown, so the node's ends stay the jobs' time limits)."""
        named = self.named
        if not named:
            return ()
        out = []
        for job in self.by_node.get(name, ()):
            run = named.get(job.job_id)
            if run is None:
                return ()
            out.append(run)
        return tuple(out)


def jobs_by_node(jobs: Sequence[SlurmJob]) -> dict[str, tuple[SlurmJob, ...]]:
    """Each node's active jobs, from one pass over the jobs (a poll stays linear in nodes + jobs)."""
    out: dict[str, list[SlurmJob]] = {}
    for job in jobs:
        if job.state in ACTIVE_JOB_STATES:
            for name in job.nodes:
                on = out.get(name)
                if on is None:
                    out[name] = [job]
                elif on[-1] is not job:  # a hostlist naming a node twice holds it once
                    on.append(job)
    return {name: tuple(js) for name, js in out.items()}


def running_jobs(jobs: Sequence[SlurmJob]) -> tuple[dict[int, RunningJob], list[RecordProblem]]:
    """The running jobs (on every node a job holds) as runtime prediction keys them: user, job
    name, start and time limit; a job without a user or a start time is left out, with a problem
    naming it and its nodes."""
    out: dict[int, RunningJob] = {}
    problems: list[RecordProblem] = []
    for job in jobs:
        if job.state not in ACTIVE_JOB_STATES or not job.nodes:
            continue
        missing = "user_name" if not job.user else "start_time" if job.start_time <= 0 else None
        if missing is not None:
            problems.append(RecordProblem(
                "job", str(job.job_id), missing,
                f"is missing; the ends of the jobs on {','.join(job.nodes[:3])}"
                f"{'...' if len(job.nodes) > 3 else ''} stay their time limits"))
            continue
        out[job.job_id] = RunningJob(job_id=str(job.job_id), user=job.user, start=job.start_time,
                                     name=job.name or None, limit=job.walltime)
    return out, problems
