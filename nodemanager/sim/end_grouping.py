"""The simulated negotiator's end-grouping placements: a job goes to the node whose running jobs
are expected to end closest to when the job itself is expected to end, so that a node's jobs
end together and the node can be given back, instead of one long job keeping it up among short
ones. A node with no running job counts as ending now; ties go by the controller's keep rank
(as ``steered``).

``ends-oracle`` knows every job's true runtime (an upper bound on what grouping by ends can
give); ``ends`` uses the runtimes the controller predicts from each user's recent jobs
(``runtime_prediction = recent``), which is what a site's negotiator could be given.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

from nodemanager.core.runtime_prediction import predict_runtime, recent_runtimes, Recent
from nodemanager.sim.job import Job

__all__ = ["END_PLACEMENTS", "STEERED", "Runtime", "oracle_runtime", "predicted_runtime", "node_end", "end_distance"]

END_PLACEMENTS = ("ends", "ends-oracle")
STEERED = ("steered", *END_PLACEMENTS)   # the placements that read the controller's keep ranks

# a job -> its expected runtime in seconds (None: no estimate)
Runtime = Callable[[Job], "float | None"]


def oracle_runtime(job: Job) -> float | None:
    """The job's true runtime."""
    return job.runtime


def predicted_runtime(recent: Recent) -> Runtime:
    """The runtime predicted from the user's recent finished jobs, capped by the job's limit
    (:func:`nodemanager.core.runtime_prediction.predict_runtime`)."""
    def runtime(job: Job) -> float | None:
        return predict_runtime(recent_runtimes(recent, job.owner or "", job.cmd), job.walltime)
    return runtime


def node_end(running: Iterable[tuple[Job, float]], now: float, runtime: Runtime) -> float | None:
    """When the last of a node's ``running`` (job, start) pairs is expected to end (a job past
    its estimate: now); ``now`` for a node with none; None when a job has no estimate."""
    end = now
    for job, start in running:
        r = runtime(job)
        if r is None:
            return None
        end = max(end, start + r)
    return end


def end_distance(node: float | None, job: float | None) -> float:
    """How far a node's expected end is from a job's (infinite when either is unknown)."""
    if node is None or job is None:
        return math.inf
    return abs(node - job)
