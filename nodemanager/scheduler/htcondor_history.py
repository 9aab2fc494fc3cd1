"""Finished jobs from the schedds' history (runtime prediction learns from them): the jobs that
completed (``JobStatus == 4``) since the last poll, read newest first and bounded by a completion
time constraint, so the schedd reads only the end of its history file.

A job's runtime is its last run's (``CompletionDate - JobCurrentStartDate``), else its
``RemoteWallClockTime`` (every run's wall time added up); its key is ``Owner`` and ``Cmd``. An ad
without them is skipped, with one log line naming the job."""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping

from nodemanager.model import FinishedJob, RunningJob
from nodemanager.scheduler.htcondor_bindings import plain_ad

__all__ = ["HISTORY_ATTRIBUTES", "history_constraint", "history_stop", "finished_from_history"]

log = logging.getLogger("nodemanager.scheduler.htcondor")

HISTORY_ATTRIBUTES = ("GlobalJobId", "ClusterId", "ProcId", "Owner", "Cmd", "CompletionDate",
                      "JobCurrentStartDate", "RemoteWallClockTime")
# the history file is in the order jobs left the queue, close to their completion times: reading
# back from the newest stops this much before the earliest completion asked for
_STOP_MARGIN = 600


def history_constraint(since: float) -> str:
    """The jobs that completed at or after ``since``."""
    return f"JobStatus == 4 && CompletionDate >= {int(since)}"


def history_stop(since: float) -> str:
    """Where reading the history back from its newest ad stops (``Schedd.history``'s ``since``)."""
    return f"EnteredCurrentStatus < {int(since) - _STOP_MARGIN}"


def _number(ad: Mapping[str, Any], key: str) -> float | None:
    value = ad.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _finished(ad: Mapping[str, Any], walltime_attribute: str) -> FinishedJob:
    owner, cmd = ad.get("Owner"), ad.get("Cmd")
    if not isinstance(owner, str) or not owner:
        raise ValueError("no Owner")
    end = _number(ad, "CompletionDate")
    if not end:
        raise ValueError(f"no CompletionDate ({ad.get('CompletionDate')!r})")
    start = _number(ad, "JobCurrentStartDate")
    if not start or start > end:
        wall = _number(ad, "RemoteWallClockTime")
        if wall is None:
            raise ValueError(f"neither JobCurrentStartDate nor RemoteWallClockTime "
                             f"({ad.get('JobCurrentStartDate')!r}, {ad.get('RemoteWallClockTime')!r})")
        start = end - wall
    limit = _number(ad, walltime_attribute)
    return FinishedJob(job=RunningJob(job_id=_job_id(ad), user=owner, start=start,
                                      name=cmd if isinstance(cmd, str) and cmd else None,
                                      limit=limit or None), end=end)


def _job_id(ad: Mapping[str, Any]) -> str:
    gid = ad.get("GlobalJobId")
    return gid if isinstance(gid, str) and gid else f"{ad.get('ClusterId', '?')}.{ad.get('ProcId', '?')}"


def finished_from_history(ads: Iterable[Mapping[str, Any]], walltime_attribute: str) -> list[FinishedJob]:
    """The finished jobs of history ads; an unusable ad is logged (naming the job) and skipped."""
    out: list[FinishedJob] = []
    for raw in ads:
        ad: Mapping[str, Any] = {}
        try:
            ad = plain_ad(raw)
            out.append(_finished(ad, walltime_attribute))
        except Exception as exc:  # noqa: BLE001 - hostile data: name the job, never a bare traceback
            log.warning("htcondor history: job %s: %s; its runtime is not learned", _job_id(ad), exc)
    return out
