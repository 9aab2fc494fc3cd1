"""What the SLURM adapter holds of one poll (nodes, active jobs per node, the records it could not
use) and of each drain of ours it watches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from nodemanager.model import FinishedJob
from nodemanager.scheduler.records import RecordProblem
from nodemanager.scheduler.slurm_json import ACTIVE_JOB_STATES, SlurmJob, SlurmNode

__all__ = ["PollState", "Track", "jobs_by_node"]


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

    def jobs_on(self, name: str) -> tuple[SlurmJob, ...]:
        return self.by_node.get(name, ())


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
