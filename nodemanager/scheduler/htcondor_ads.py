"""Workers and demand from HTCondor ads: what the adapter reads from one slot or job ad.

Pure functions on ``classad2.ClassAd`` objects or plain dicts (the tests and the simulated pool
pass dicts). Hostile or broken values (:mod:`nodemanager.scheduler.records`): an idle job whose
``RequestCpus``/``RequestMemory``/``RequestDisk`` is not a usable number (``real("INF")``, NaN, an
overflow, negative, beyond 2^31-1, a string or boolean, ``undefined`` or ``error``) is left out of
demand with a :class:`~nodemanager.scheduler.records.RecordProblem`. A slot ad with such a resource
count (:data:`SLOT_COUNTS`) keeps its worker, so its VM stays paired and is never shut down as a
broken boot, but the count is not used: capacity unknown (0) and at least one job, so the core
classes it busy and leaves it alone. An ad that cannot be read at all is a SchedulerError naming it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from nodemanager.classad.values import ad_number, ad_true
from nodemanager.model import Demand, JobOwner, Worker, frozen_map
from nodemanager.scheduler.htcondor_classify import children_claimed, classify_htcondor, shown_state
from nodemanager.scheduler.port import SchedulerError
from nodemanager.scheduler.records import MAX_COUNT, RecordProblem, number_problem

__all__ = ["JOB_ATTRIBUTES", "SLOT_COUNTS", "worker_from_ad", "htcondor_worker_fields", "machine_ad",
           "demand_from_jobs", "job_owner", "slot_problems", "graceful_eviction_at", "retirement_left",
           "job_request", "job_name"]

JOB_ATTRIBUTES = ("RequestCpus", "RequestMemory", "RequestDisk", "QDate", "ClusterId", "ProcId")
# The job attributes that size a demand, with their default when absent and their largest value.
_JOB_SIZES = (("RequestCpus", 1, MAX_COUNT), ("RequestMemory", 0, MAX_COUNT),
              ("RequestDisk", 0, MAX_COUNT * 1024))  # RequestDisk is KiB
# The slot attributes that count resources or jobs: an unusable one leaves the worker alone.
SLOT_COUNTS = ("TotalSlotCpus", "Cpus", "TotalCpus", "TotalSlotMemory", "Memory", "TotalMemory",
               "NumDynamicSlots")


def _values(ad: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """The evaluated values of those ``keys`` that ``ad`` has, classad2 ``Undefined``/``Error``
    kept (``plain_ad`` drops them, which would make them look absent)."""
    import classad2

    out: dict[str, Any] = {}
    if isinstance(ad, classad2.ClassAd):
        wanted = set(keys)
        for key in ad.keys():  # one pass: a ClassAd lookup of a missing key costs an exception
            if key in wanted:
                v = ad[key]
                out[key] = ad.eval(key) if isinstance(v, classad2.ExprTree) else v
        return out
    for key in keys:
        v = ad.get(key)
        if v is not None:  # a plain dict's None is an absent attribute
            out[key] = v.eval() if isinstance(v, classad2.ExprTree) else v
    return out


def _value_problem(v: Any, high: float) -> tuple[str, str] | None:
    """Why ``v`` (an evaluated attribute) is no usable count in [0, ``high``], else None."""
    if type(v) is int and 0 <= v <= high:  # the common case: no classad2 look-up
        return None
    import classad2

    if isinstance(v, classad2.Value):
        reason = "error" if v == classad2.Value.Error else "undefined"
        return reason, f"evaluates to {reason}"
    return number_problem(v, 0, high)


def slot_problems(ad: Mapping[str, Any], slot: str, raw: Mapping[str, Any] | None = None) -> list[RecordProblem]:
    """The resource counts (:data:`SLOT_COUNTS`) of slot ``slot`` that cannot be used. ``ad`` is
    plain (``plain_ad``); ``raw``, the ad it came from, tells a count that evaluated to
    ``undefined`` or ``error`` (which ``plain_ad`` drops) from an absent one."""
    out = []
    for key in SLOT_COUNTS:
        v = ad.get(key)
        if v is None:
            if raw is None or key not in raw:  # absent: the common case, no ClassAd lookup
                continue
            v = _values(raw, (key,)).get(key)
            if v is None:
                continue
        bad = _value_problem(v, MAX_COUNT)
        if bad is not None:
            out.append(RecordProblem("node", slot, key, bad[1] + "; the startd is left alone", bad[0]))
    return out


def worker_from_ad(ad: Mapping[str, Any], *, id_attribute: str = "CloudInstanceID",
                   unusable: Iterable[str] | None = None) -> Worker:
    """A :class:`Worker` for the startd whose (partitionable) slot ad is ``ad`` (a plain dict).

    ``name`` is the startd's ``Machine``; ``state`` is ``"State/Activity"``; ``ad`` keeps the whole
    ad for the classifier, the victim estimates and the escalation expressions. Raises ValueError
    if the ad lacks ``Name``/``Machine``. The resource counts in ``unusable`` (default: those
    :func:`slot_problems` finds in ``ad``) are left out of the worker's ad; the worker then has no known capacity
    and at least one job, so nothing drains or shuts it down on numbers it cannot trust.
    """
    get = ad.get
    slot = get("Name") or get("Machine")
    if not isinstance(slot, str) or not slot:
        raise ValueError(f"slot ad without Name or Machine: {sorted(ad)[:8]}")
    machine = get("Machine")
    name = machine if isinstance(machine, str) and machine else slot.split("@", 1)[-1]
    bad = set(unusable) if unusable is not None else {p.field for p in slot_problems(ad, slot)}
    if bad:
        ad = {k: v for k, v in ad.items() if k not in bad}
    fields = htcondor_worker_fields(ad)  # the one mapping of ad attributes to Worker fields
    fields.pop("cloud_id", None)
    fields.setdefault("last_heard", ad_number(ad, "MyCurrentTime") or 0.0)
    if bad:
        fields.update(cpus=0, cpus_busy=0, ram_mb=0, running_jobs=max(fields.get("running_jobs", 0), 1))
    cloud_id = get(id_attribute)
    classified = classify_htcondor(ad, state=fields.get("state"),
                                   state_since=fields.get("state_since", 0.0),
                                   running_jobs=fields.get("running_jobs", 0),
                                   draining=fields.get("draining", False),
                                   drain_reason=fields.get("drain_reason"))
    return Worker(name=name, scheduler="htcondor", ad=frozen_map(ad), classified=classified,
                  native_ad=True,
                  cloud_id=str(cloud_id) if cloud_id not in (None, "") else None, **fields)


# Per-slot counts a machine's partitionable slots add up to; the rest is the startd's own.
_SUMMED = ("Cpus", "TotalSlotCpus", "Memory", "TotalSlotMemory", "NumDynamicSlots", "JobStarts",
           "Disk", "TotalSlotDisk", "GPUs", "TotalSlotGPUs")
_LISTS = ("ChildState", "ChildActivity", "ChildRemoteOwner", "ChildAccountingGroup", "ChildCpus",
          "ChildRetirementTimeRemaining")


def _activity_rank(ad: Mapping[str, Any]) -> tuple[bool, bool, bool]:
    """Which slot speaks for the machine's State/Activity: one with jobs, then one not idle, then
    a drained one (a drain under way shows Drained/Retiring on the slots that still run jobs)."""
    jobs = (ad_number(ad, "NumDynamicSlots") or 0) > 0 or children_claimed(ad)
    return jobs, ad.get("Activity") not in (None, "Idle"), ad.get("State") == "Drained"


def machine_ad(ads: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """One ad for a startd with several partitionable slots (``SLOT_TYPE_n_PARTITIONABLE``):
    cores, memory, dynamic slots and job starts summed, child states joined, the State/Activity
    of the slot with jobs (else the busiest), the drain fields of a draining slot, the latest
    ``EnteredCurrentState``. One ad is returned as it is."""
    if len(ads) == 1:
        return ads[0]
    lead = max(ads, key=_activity_rank)
    out = dict(lead)
    for key in _SUMMED:
        values = [a[key] for a in ads if key in a]
        if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = sum(values)
    for key in _LISTS:
        joined: list[Any] = []
        for a in ads:
            if isinstance(a.get(key), (list, tuple)):
                joined.extend(a[key])
        if joined or key in out:
            out[key] = joined
    draining = [a for a in ads if a.get("Draining") is True]
    if draining:
        for key in ("Draining", "DrainReason", "DrainingRequestId", "LastDrainStartTime"):
            if key in draining[0]:
                out[key] = draining[0][key]
    entered = [v for a in ads if (v := ad_number(a, "EnteredCurrentState")) is not None]
    if entered:
        out["EnteredCurrentState"] = max(entered)
    return out


def retirement_left(ad: Mapping[str, Any]) -> tuple[float, float] | None:
    """(least, most) retirement time left among the running jobs' claims, each evaluated against
    its own job (the p-slot's ``ChildRetirementTimeRemaining``); None when the ad has none. A
    job-dependent ``MAXJOBRETIREMENTTIME`` shows only here: the p-slot's own
    ``MaxJobRetirementTime`` is evaluated without a job."""
    left = ad.get("ChildRetirementTimeRemaining")
    if not isinstance(left, (list, tuple)):
        return None
    values = [float(v) for v in left if isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(v)]
    if not values:
        return None
    return max(0.0, min(values)), max(0.0, max(values))


def graceful_eviction_at(ad: Mapping[str, Any]) -> float | None:
    """When a graceful drain begun now starts evicting what still runs: the startd soft-kills a
    retiring job once its remaining retirement is below ``MachineMaxVacateTime``, so its
    ``ExpectedMachineGracefulDrainingCompletion`` (now + the longest of retirement and vacate
    time) less that vacate time, less how much sooner the job with the least retirement left
    runs out (each job retires on its own: the real startd evicts a job whose own retirement
    ran out while another's runs on). None when the ad says nothing."""
    completion = ad_number(ad, "ExpectedMachineGracefulDrainingCompletion")
    if completion is None:
        return None
    left = retirement_left(ad)
    spread = left[1] - left[0] if left is not None else 0.0
    return completion - max(0.0, ad_number(ad, "MachineMaxVacateTime") or 0.0) - spread


def htcondor_worker_fields(ad: Mapping[str, Any]) -> dict[str, Any]:
    """Worker fields an HTCondor p-slot ad implies (``Worker(**fields)`` minus name/scheduler).

    Only fields the ad has are returned, so callers can let explicit values win.
    """
    out: dict[str, Any] = {}
    state = shown_state(ad)
    if state is not None:
        out["state"] = state
    for key, field in (("CloudInstanceID", "cloud_id"), ("DrainReason", "drain_reason"),
                       ("DrainingRequestId", "drain_request_id")):
        if isinstance(ad.get(key), str):
            out[field] = ad[key]
    for key, field in (("LastHeardFrom", "last_heard"), ("EnteredCurrentState", "state_since"),
                       ("DaemonStartTime", "registered_at"), ("LastDrainStartTime", "drain_since")):
        v = ad_number(ad, key)
        if v is not None:
            out[field] = v
    evicts_at = graceful_eviction_at(ad)
    if evicts_at is not None:
        out["retirement_end"] = evicts_at
    total = ad_number(ad, "TotalSlotCpus") or ad_number(ad, "TotalCpus")
    free = ad_number(ad, "Cpus")
    if total is not None:
        out["cpus"] = int(total)
        if free is not None:
            out["cpus_busy"] = max(0, int(total - free))
    mem = ad_number(ad, "TotalSlotMemory") or ad_number(ad, "TotalMemory")
    if mem is not None:
        out["ram_mb"] = int(mem)
    dslots = ad_number(ad, "NumDynamicSlots")
    if dslots is not None:
        out["running_jobs"] = int(dslots)
    if "Draining" in ad:
        out["draining"] = ad_true(ad, "Draining")
    addr = ad.get("MyAddress")
    if isinstance(addr, str) and addr.startswith("<"):
        out["address"] = addr[1:].split(":", 1)[0].split(">", 1)[0]
    owners = job_owners(ad)
    if owners:
        out["jobs_by"] = owners
    return out


def job_owners(ad: Mapping[str, Any]) -> tuple[JobOwner, ...]:
    """Whose jobs the p-slot's dynamic slots run: the job's ``Owner`` (``ChildRemoteOwner``), its
    accounting group (``ChildAccountingGroup`` is ``group.user@domain``: the group is what comes
    before the last dot; none without a dot) and its cores (``ChildCpus``)."""
    owners, groups, cpus = (ad.get(k) for k in ("ChildRemoteOwner", "ChildAccountingGroup", "ChildCpus"))
    if not isinstance(owners, (list, tuple)):
        return ()
    out = []
    for i, owner in enumerate(owners):
        if not isinstance(owner, str) or not owner:
            continue
        group = groups[i] if isinstance(groups, (list, tuple)) and i < len(groups) else None
        group = group.split("@", 1)[0].rpartition(".")[0] if isinstance(group, str) else ""
        cores = cpus[i] if isinstance(cpus, (list, tuple)) and i < len(cpus) else 1
        out.append(JobOwner(owner.split("@", 1)[0], group,
                            int(cores) if isinstance(cores, (int, float)) and not isinstance(cores, bool) else 1))
    return tuple(out)


def job_request(ad: Mapping[str, Any], index: int) -> tuple[int, int, int, float] | RecordProblem:
    """(cpus, memory MB, disk MB, QDate or 0) of idle job ``ad`` (a ClassAd or dict; ``index``:
    its place in the reply), or the problem that leaves it out of demand. Absent requests take
    HTCondor's defaults (1 core)."""
    values = _values(ad, JOB_ATTRIBUTES)
    sizes = []
    for key, default, high in _JOB_SIZES:
        v = values.get(key, default)
        bad = _value_problem(v, high)
        if bad is not None:
            return RecordProblem("job", job_name(values, index), key,
                                 bad[1] + "; the job is left out of demand", bad[0])
        sizes.append(int(v))
    qdate: Any = values.get("QDate")
    submitted = float(qdate) if number_problem(qdate, 1, 2.0**53) is None else 0.0
    return max(1, sizes[0]), sizes[1], sizes[2] // 1024, submitted


def job_name(ad: Mapping[str, Any], index: int) -> str:
    """``ClusterId.ProcId`` of a job ad, else its position in the reply (``#7``)."""
    try:
        cluster, proc = ad.get("ClusterId"), ad.get("ProcId")
    except Exception:  # noqa: BLE001 - only a name for a message about an ad that broke
        cluster = proc = None
    if type(cluster) is int and type(proc) is int:
        return f"{cluster}.{proc}"
    return f"#{index}"


def demand_from_jobs(jobs: Iterable[Mapping[str, Any]], problems: list[RecordProblem] | None = None,
                     by_owner: bool = False) -> tuple[Demand, ...]:
    """Idle jobs grouped by (RequestCpus, RequestMemory MB, RequestDisk MB), largest groups first;
    with ``by_owner`` (runtime prediction) also by ``Owner`` (:func:`job_owner`).

    Jobs with an unusable request are left out (appended to ``problems`` when given). Raises
    SchedulerError naming the job if an ad cannot be read at all.
    """
    groups: dict[tuple[int, int, int, str | None], list[float]] = defaultdict(list)
    for i, job in enumerate(jobs):
        try:
            req = job_request(job, i)
        except Exception as exc:  # noqa: BLE001 - hostile data: name the job, never a bare traceback
            raise SchedulerError(f"job {job_name(job, i)}: cannot read its ad "
                                 f"({type(exc).__name__}: {exc})") from exc
        if isinstance(req, RecordProblem):
            if problems is not None:
                problems.append(req)
            continue
        cpus, mem, disk_mb, qdate = req
        groups[(cpus, mem, disk_mb, job_owner(job) if by_owner else None)].append(qdate)
    out = [Demand(cpus=c, ram_mb=m, count=len(q), scratch_mb=d, oldest_submit=min(q) if any(q) else None,
                  user=owner)
           for (c, m, d, owner), q in groups.items()]
    out.sort(key=lambda d: (-d.count, d.cpus, d.ram_mb, d.user or ""))
    return tuple(out)


def job_owner(job: Mapping[str, Any]) -> str | None:
    """A job's ``Owner`` as runtime prediction keys it (the history's ``Owner``); None when absent.
    Queued jobs are grouped by owner only: a schedd's autocluster does not split by ``Cmd``."""
    owner = job.get("Owner")
    return owner if isinstance(owner, str) and owner else None
