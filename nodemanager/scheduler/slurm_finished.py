"""Finished jobs from the ``squeue --json`` reply the poll already has (runtime prediction learns
from them): slurmctld keeps a completed job's record for ``MinJobAge`` (300 s by default), with its
user, name, start and end times, so no ``sacct`` (which needs slurmdbd) and no extra command is
needed. Only ``COMPLETED`` jobs count (a job that failed, timed out or was cancelled says little
about how long such a job runs). A record without a user or times is skipped, with one log line
naming the job."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from nodemanager.model import FinishedJob, RunningJob
from nodemanager.scheduler.records import RecordProblem
from nodemanager.scheduler.slurm_json import Reader, job_state, time_limit

__all__ = ["finished_jobs"]

log = logging.getLogger("nodemanager.scheduler.slurm")


def finished_jobs(doc: Any) -> list[FinishedJob]:
    """The completed jobs of a ``squeue --json`` reply (the reply was checked by the poll's parse)."""
    out: list[FinishedJob] = []
    records = doc.get("jobs") if isinstance(doc, Mapping) else None
    for rec in records if isinstance(records, list) else ():
        if not isinstance(rec, Mapping) or job_state(rec) != "COMPLETED":
            continue
        problems: list[RecordProblem] = []
        r = Reader(rec, "job", str(rec.get("job_id", "?")), problems)
        user, start, end = r.text("user_name"), r.number("start_time"), r.number("end_time")
        if not problems:
            for field, bad, words in (("user_name", not user, "is missing"), ("start_time", not start, "is missing"),
                                      ("end_time", end < start, "is before start_time")):
                if bad:
                    problems.append(RecordProblem("job", r.name, field, f"{words}: {rec.get(field)!r}"))
        if problems:
            log.warning("slurm: job %s: %s; its runtime is not learned", r.name,
                        "; ".join(f"{p.field} {p.problem}" for p in problems))
            continue
        out.append(FinishedJob(job=RunningJob(job_id=r.name, user=user, start=start,
                                              name=r.text("name") or None, limit=time_limit(rec)),
                               end=end))
    return out
