"""The jobs running on each startd, from its dynamic slots' ads, as runtime prediction keys them.

With runtime prediction on, the poll's one collector query also returns the claimed dynamic
slots (:func:`with_dynamic_slots`). A dynamic slot running a job carries the job's
``GlobalJobId``/``JobId``, ``RemoteOwner`` (``user@domain``: the user is the schedd's ``Owner``,
the key the history's finished jobs are learned under) and ``JobStart``. The job's ``Cmd`` is not
on the slot ad unless the site publishes it (``STARTD_JOB_ATTRS = $(STARTD_JOB_ATTRS) Cmd``), so
a job is usually keyed by its user alone; the walltime attribute likewise, when published.

A startd's jobs are named only when every dynamic slot the partitionable slot counts
(``NumDynamicSlots``) was read and each running one could be named; otherwise it names none,
so its ends stay what the scheduler says (the collector's copies of the slots are updated
apart, and a job not named has no known end). A dynamic slot whose job cannot be named is told
once per record (:class:`~nodemanager.scheduler.records.ProblemLog`), naming the slot and job.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from nodemanager.model import RunningJob
from nodemanager.classad.values import ad_number
from nodemanager.scheduler.records import RecordProblem

__all__ = ["RUNNING_ATTRIBUTES", "with_dynamic_slots", "is_dynamic", "running_by_machine", "slot_counts",
           "limit_ends"]

# what a dynamic slot says of the job it runs (Cmd only where the site publishes it)
RUNNING_ATTRIBUTES = ("GlobalJobId", "JobId", "JobStart", "RemoteOwner", "Cmd")

_DYNAMIC = 'DynamicSlot =?= true && State == "Claimed"'


def with_dynamic_slots(constraint: str) -> str:
    """``constraint`` (which startds are ours) widened to the claimed dynamic slots, whose
    machines are then matched to ours (one collector query still)."""
    return f"({constraint}) || ({_DYNAMIC})"


def is_dynamic(ad: Mapping[str, Any]) -> bool:
    """A dynamic slot's ad (kept apart from the partitionable slots a worker is built from)."""
    return ad.get("DynamicSlot") is True or ad.get("SlotType") == "Dynamic"


def _job(ad: Mapping[str, Any], walltime_attribute: str) -> RunningJob | None | RecordProblem:
    slot = str(ad.get("Name") or "?")
    job_id = ad.get("GlobalJobId") or ad.get("JobId")
    if not isinstance(job_id, str) or not job_id:
        return None   # claimed between jobs: nothing runs there
    owner, start = ad.get("RemoteOwner"), ad_number(ad, "JobStart")
    if not isinstance(owner, str) or not owner.split("@", 1)[0]:
        return RecordProblem("node", slot, "RemoteOwner", f"is missing or not a string for job {job_id}: "
                             f"{owner!r}; the startd's job ends stay unknown")
    if start is None or start <= 0:
        return RecordProblem("node", slot, "JobStart", f"is missing or not a time for job {job_id}: "
                             f"{ad.get('JobStart')!r}; the startd's job ends stay unknown")
    cmd, limit = ad.get("Cmd"), ad_number(ad, walltime_attribute)
    return RunningJob(job_id=job_id, user=owner.split("@", 1)[0], start=float(start),
                      name=cmd if isinstance(cmd, str) and cmd else None,
                      limit=float(limit) if limit is not None and limit > 0 else None)


def running_by_machine(dslots: Iterable[tuple[str, Mapping[str, Any]]], counts: Mapping[str, int],
                       walltime_attribute: str, problems: list[RecordProblem]
                       ) -> dict[str, tuple[RunningJob, ...]]:
    """Each machine's running jobs from its dynamic slots' ads (``(machine, ad)`` pairs);
    ``counts`` are the machines' ``NumDynamicSlots`` (only these machines are ours). A machine
    is left out when its slots were not all read or one could not be named (module doc)."""
    slots: dict[str, list[Mapping[str, Any]]] = {}
    for machine, ad in dslots:
        if machine in counts:
            slots.setdefault(machine, []).append(ad)
    out: dict[str, tuple[RunningJob, ...]] = {}
    for machine, ads in slots.items():
        if len(ads) != counts[machine]:
            continue
        jobs: list[RunningJob] = []
        for ad in ads:
            got = _job(ad, walltime_attribute)
            if isinstance(got, RecordProblem):
                problems.append(got)
                break
            if got is not None:
                jobs.append(got)
        else:
            out[machine] = tuple(sorted(jobs, key=lambda j: (j.start, j.job_id)))
    return out


def slot_counts(ads: Sequence[Mapping[str, Any]]) -> int:
    """How many dynamic slots a startd's partitionable slots count."""
    return int(sum(ad_number(a, "NumDynamicSlots") or 0 for a in ads))


def limit_ends(jobs: Iterable[RunningJob]) -> tuple[float, ...]:
    """The guaranteed ends of ``jobs``: start plus the job's own limit (the walltime attribute,
    which HTCondor enforces), for the jobs that have one; a job without has no known end."""
    return tuple(sorted(j.start + j.limit for j in jobs if j.limit is not None))
