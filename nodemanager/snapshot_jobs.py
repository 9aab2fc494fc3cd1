"""A snapshot worker's running jobs as runtime prediction names them, and their predicted ends:
kept in the JSON so that ``nodemanager plan`` (and ``plan --live``) plan a snapshot taken with
``runtime_prediction = recent`` as the daemon did::

    "jobs"?: [{"job_id": S, "user": S, "start": E, "name"?: S, "limit"?: N}],
    "predicted_end_times"?: [E]     (one per job, in the same order)
"""

from __future__ import annotations

from typing import Any

from nodemanager.model import RunningJob, Worker
from nodemanager.snapshot_values import Fields, fail, read_list, read_number, read_str

__all__ = ["JOB_FIELDS", "read_jobs", "jobs_json"]

JOB_FIELDS = ("jobs", "predicted_end_times")


def _job(v: Any, path: str) -> RunningJob:
    f = Fields(v, path, ("job_id", "user", "start", "name", "limit"))
    return RunningJob(job_id=f.req("job_id", read_str), user=f.req("user", read_str),
                      start=f.req("start", read_number), name=f.opt("name", read_str),
                      limit=f.opt("limit", read_number))


def read_jobs(f: Fields) -> dict[str, Any]:
    """The ``jobs`` and ``predicted_end_times`` of a worker object (the Worker's keyword
    arguments); an end without its job is an error naming the field."""
    jobs = tuple(_job(j, f"{f.sub('jobs')}[{i}]") for i, j in enumerate(f.opt("jobs", read_list, [])))
    ends = tuple(read_number(t, f"{f.sub('predicted_end_times')}[{i}]")
                 for i, t in enumerate(f.opt("predicted_end_times", read_list, [])))
    if ends and len(ends) != len(jobs):
        raise fail(f.sub("predicted_end_times"), f"{len(ends)} ends for {len(jobs)} jobs (one per job)")
    return {"jobs": jobs, "predicted_end_times": ends}


def jobs_json(w: Worker) -> dict[str, Any]:
    """The worker's jobs and predicted ends as JSON fields (none when it names no job)."""
    if not w.jobs:
        return {}
    out: dict[str, Any] = {"jobs": [{k: v for k, v in (("job_id", j.job_id), ("user", j.user), ("start", j.start),
                                                        ("name", j.name), ("limit", j.limit)) if v is not None}
                                    for j in w.jobs]}
    if w.predicted_end_times:
        out["predicted_end_times"] = list(w.predicted_end_times)
    return out
