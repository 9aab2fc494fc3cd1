"""Scheduler states to the matrix's ``worker_state`` (seed 004), for SLURM and HTCondor.

SLURM (``sinfo %t`` as printed, long names accepted too), exactly as seed 004 says:

==============================================  ============  =====================================
raw state                                       worker_state  why
==============================================  ============  =====================================
``idle``                                        idle
``alloc`` ``mix`` ``comp`` ``drng`` ``maint``   busy          jobs run (or drain with jobs left)
``drain`` ``down`` ``error``/``err`` ``fail``   down
``unk``/``unknown``, ``inval``, ``pow_dn``      down          cannot run jobs
``failg``                                       busy          failing but jobs still run
``resv`` ``plnd`` ``blocked`` ``npc``           busy          reserved or planned: not ours to take
``boot`` ``futr`` ``pow_up``                    unpaired      starting: boot grace protects it
anything else                                   down          (busy if the worker reports jobs)
==============================================  ============  =====================================

Suffix flags (checked first, in this order of precedence):

* ``#`` powering up / being configured, ``^`` reboot issued: *starting* → ``unpaired``, so only an
  exceeded boot grace can get it shut down (a starting node is never classed ``down``).
* ``*`` not responding: ``down`` (seed 004: any state with a trailing ``*``).
* ``~`` powered off, ``%`` powering down, ``!`` pending power down: ``down`` (cannot run jobs).
* ``$`` in a maintenance reservation, ``-`` planned by the backfill scheduler: ``busy`` (the
  operators or the scheduler have a use for it).
* ``@`` pending reboot, ``+`` and unknown flags: the base state decides.

HTCondor partitionable-slot (p-slot) startds, following seed 000 and the draining notes:

* Drained/Idle with no dynamic slots → ``down``: drained, ready to go.
* any jobs (``NumDynamicSlots`` > 0, a ``Claimed`` child, a Claimed/Preempting/Matched static slot),
  also while Draining or Retiring → ``busy``.
* Drained/Retiring, or ``Draining`` without jobs yet, → ``busy``: the drain has not finished.
* Unclaimed/Idle, no dynamic slots, not draining → ``idle``.
* Owner (START is false; also the startd's first seconds) → ``idle``: it runs nothing, and idle
  grace (not ``down``) protects a startd that is merely starting up.
* Backfill → ``idle``: backfill work is expendable.
* no ``State`` → ``unpaired`` (the ad is not a usable startd yet).

The idle-since time of an HTCondor p-slot is the latest of the worker's ``state_since``,
``EnteredCurrentState`` and, while no claim is active, ``ExpectedMachineGracefulDrainingCompletion``
(the startd freezes it at the time the last claim ended; a p-slot stays Unclaimed while its
dynamic slots come and go, so ``EnteredCurrentState`` alone would be too old).

Any worker not heard from for ``node_stale_after`` seconds is ``down``.

A worker drained (or draining) by someone else — a SLURM reason or an HTCondor ``DrainReason``
without our prefix, e.g. an administrator's ``admin: bad dimm`` — is ``busy`` ("drained by someone
else: <their reason>"), which every matrix leaves alone, until ``reclaim_foreign_after`` (0: never)
has passed since its drain began; then it is classed as above (:func:`classify_foreign`).
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, NamedTuple

from nodemanager.model import Worker
from nodemanager.tags import DRAIN_REASON_PREFIX
from policy_matrix.vocabulary import BUSY, DOWN, IDLE, UNPAIRED

__all__ = ["Classification", "classify_slurm", "classify_htcondor", "classify_worker",
           "htcondor_worker_fields", "SLURM_FLAGS", "ad_number", "is_our_reason", "foreign_drain",
           "classify_foreign", "Foreign"]


class Classification(NamedTuple):
    """A worker_state, why (in words), and for idle workers the scheduler's idle-since time."""

    state: str
    why: str
    idle_since: float | None = None


_SLURM_BASE: dict[str, tuple[str, str]] = {}


def _base(names: str, state: str, why: str) -> None:
    for n in names.split():
        _SLURM_BASE[n] = (state, why)


_base("idle", IDLE, "idle")
_base("alloc allocated mix mixed comp completing", BUSY, "running jobs")
_base("drng draining", BUSY, "draining, jobs still running")
_base("maint", BUSY, "in maintenance")
_base("drain drained", DOWN, "drained")
_base("down", DOWN, "down")
_base("err error", DOWN, "in error")
_base("fail", DOWN, "failed")
_base("unk unknown", DOWN, "state unknown")
_base("inval invalid", DOWN, "invalid registration")
_base("pow_dn powered_down powering_down", DOWN, "powered down")
_base("failg failing", BUSY, "failing, jobs still running")
_base("resv reserved", BUSY, "reserved")
_base("plnd planned", BUSY, "planned for a job")
_base("blocked", BUSY, "blocked by the scheduler")
_base("npc perfctrs", BUSY, "in use for performance counters")
_base("boot booting futr future pow_up powering_up", UNPAIRED, "starting")

SLURM_FLAGS: Mapping[str, str] = {
    "#": "powering up",
    "^": "reboot issued",
    "*": "not responding",
    "~": "powered off",
    "%": "powering down",
    "!": "pending power down",
    "$": "in a maintenance reservation",
    "-": "planned by the backfill scheduler",
    "@": "pending reboot",
    "+": "",
}
_STARTING_FLAGS = "#^"
_DOWN_FLAGS = "*~%!"
_KEEP_FLAGS = "$-"
_ALL_FLAGS = "".join(SLURM_FLAGS)


def classify_slurm(state: str | None, *, running_jobs: int = 0) -> Classification:
    """The worker_state of a SLURM node whose ``sinfo %t`` state is ``state`` (see module doc).

    ``running_jobs`` only matters for a state this table does not know: with jobs it is busy.
    """
    return _classify_slurm(state, running_jobs > 0)


@functools.lru_cache(maxsize=1024)
def _classify_slurm(state: str | None, has_jobs: bool) -> Classification:
    raw = (state or "").strip().lower()
    base = raw.rstrip(_ALL_FLAGS)
    flags = raw[len(base):]
    for group, result in ((_STARTING_FLAGS, UNPAIRED), (_DOWN_FLAGS, DOWN), (_KEEP_FLAGS, BUSY)):
        for f in flags:
            if f in group:
                return Classification(result, f"slurm state {raw!r}: {SLURM_FLAGS[f]}")
    known = _SLURM_BASE.get(base)
    if known is not None:
        return Classification(known[0], f"slurm state {raw!r}: {known[1]}")
    if has_jobs:
        return Classification(BUSY, f"slurm state {raw!r} not recognised; it runs jobs")
    return Classification(DOWN, f"slurm state {raw!r} not recognised")


_AD_LIMIT = 2.0**63  # a ClassAd integer is 64-bit: a value beyond it is no count or time


def ad_number(ad: Mapping[str, Any], key: str) -> float | None:
    """A numeric ad attribute, or None when absent, not a number (booleans and classad2 Values are
    not numbers), not finite (``real("INF")``, NaN) or beyond a 64-bit integer."""
    v: Any = ad.get(key)
    t = type(v)
    if t is float:  # the common case, checked first: this runs for every ad every cycle
        return v if -_AD_LIMIT < v < _AD_LIMIT else None  # false for inf and NaN too
    if t is int and -_AD_LIMIT < v < _AD_LIMIT:
        return float(v)
    return None


def _ad_true(ad: Mapping[str, Any], key: str) -> bool:
    v = ad.get(key)
    return v is True or (isinstance(v, str) and v.lower() == "true")


def _children_claimed(ad: Mapping[str, Any]) -> bool:
    child = ad.get("ChildState")
    if isinstance(child, str):
        child = [c.strip().strip('"') for c in child.strip("{} ").split(",")]
    if isinstance(child, (list, tuple)):
        return any(str(c) in ("Claimed", "Preempting", "Matched") for c in child)
    return False


def classify_htcondor(ad: Mapping[str, Any], now: float, *, state: str | None = None,
                      state_since: float = 0.0, running_jobs: int = 0) -> Classification:
    """The worker_state of an HTCondor startd from its (partitionable) slot ad (see module doc).

    ``state`` (``"State/Activity"``) is used when the ad has no ``State``/``Activity``;
    ``running_jobs`` adds the adapter's own count of jobs to what the ad shows.
    """
    st = ad.get("State")
    act = ad.get("Activity")
    if st is None and state:
        st, _, act = state.partition("/")
    dslots = ad_number(ad, "NumDynamicSlots") or 0.0
    jobs = dslots > 0 or running_jobs > 0 or _children_claimed(ad)
    c = _classify_htcondor(str(st) if st is not None else "", str(act) if act is not None else "",
                           jobs, _ad_true(ad, "Draining"))
    if c.state == IDLE:
        return Classification(IDLE, c.why, _htcondor_idle_since(ad, now, state_since))
    return c


@functools.lru_cache(maxsize=1024)
def _classify_htcondor(st: str, act: str, jobs: bool, draining: bool) -> Classification:
    """Everything but the idle-since time depends on these four only: computed once per pool."""
    label = f"{st}/{act}" if act else st
    jobs = jobs or st in ("Claimed", "Preempting", "Matched")
    if not st:
        return Classification(UNPAIRED, "htcondor ad has no State yet (starting)")
    if st == "Drained" and act == "Idle" and not jobs:
        return Classification(DOWN, f"htcondor {label}: drained, ready to go")
    if jobs:
        extra = " (draining)" if draining or st == "Drained" else ""
        return Classification(BUSY, f"htcondor {label}: running jobs{extra}")
    if st == "Drained" or draining:
        return Classification(BUSY, f"htcondor {label}: drain under way")
    if st in ("Unclaimed", "Owner", "Backfill"):
        why = {"Unclaimed": "no jobs",
               "Owner": "not accepting jobs (START is false); idle grace applies",
               "Backfill": "backfill work only"}[st]
        return Classification(IDLE, f"htcondor {label}: {why}")
    return Classification(BUSY, f"htcondor {label}: state not recognised; left alone")


def _htcondor_idle_since(ad: Mapping[str, Any], now: float, state_since: float) -> float:
    candidates = [state_since]
    entered = ad_number(ad, "EnteredCurrentState")
    if entered is not None:
        candidates.append(entered)
    frozen = ad_number(ad, "ExpectedMachineGracefulDrainingCompletion")
    if frozen is not None:
        candidates.append(frozen)
    return min(max(candidates), now)


def classify_worker(worker: Worker | None, now: float, node_stale_after: float) -> Classification:
    """The worker_state of a cloud node's paired worker (None: ``unpaired``).

    A worker whose ``last_heard`` is more than ``node_stale_after`` ago is ``down``; a
    ``last_heard`` of 0 means "not reported" and is not taken as stale. Idle SLURM workers are
    idle since ``state_since`` (0: unknown, left to the caller).
    """
    if worker is None:
        return Classification(UNPAIRED, "no scheduler record for this node")
    if worker.last_heard > 0 and now - worker.last_heard > node_stale_after:
        return Classification(DOWN, f"not heard from for {now - worker.last_heard:.0f}s "
                                    f"(node_stale_after {node_stale_after:.0f}s)")
    # SLURM workers may carry an ad too (for escalation expressions): the scheduler decides
    if worker.scheduler == "htcondor" or (worker.ad and worker.scheduler != "slurm"):
        return classify_htcondor(worker.ad, now, state=worker.state, state_since=worker.state_since,
                                 running_jobs=worker.running_jobs)
    c = classify_slurm(worker.state, running_jobs=worker.running_jobs)
    if c.state == IDLE:
        return Classification(IDLE, c.why, worker.state_since)
    return c


def is_our_reason(reason: str | None) -> bool:
    """True if a scheduler drain reason is one we set (it carries our prefix)."""
    return reason is not None and reason.startswith(DRAIN_REASON_PREFIX)


# a hand-written snapshot may give a SLURM drain state and reason without "draining": they say it
_SLURM_DRAIN_STATES = frozenset(("drain", "drained", "drng", "draining"))


def foreign_drain(worker: Worker | None) -> str | None:
    """Someone else's reason for draining ``worker`` (``"no reason given"`` if none), or None when
    it is not draining or the drain carries our prefix. A SLURM record in a drain state with a
    reason counts as draining; one with neither ``draining`` nor a reason is not judged."""
    if worker is None:
        return None
    reason = worker.drain_reason
    if not worker.draining and (not reason or worker.scheduler != "slurm" or (
            worker.state or "").strip().lower().rstrip(_ALL_FLAGS) not in _SLURM_DRAIN_STATES):
        return None
    if is_our_reason(reason):
        return None
    return (reason or "").strip() or "no reason given"


class Foreign(NamedTuple):
    """A worker someone else drains: its classification, whether it is left alone (not
    reclaimable yet) and, while reclaiming is ahead, when it becomes reclaimable."""

    cls: Classification
    left_alone: bool
    reclaim_at: float | None


def classify_foreign(c: Classification, reason: str, drain_since: float, now: float,
                     reclaim_after: float) -> Foreign:
    """How a worker someone else drains (``reason``) is classed: ``busy``, left alone, until
    ``reclaim_after`` seconds (0: never) past ``drain_since`` (0: unknown, never); then ``c``."""
    if reclaim_after <= 0 or drain_since <= 0:
        return Foreign(Classification(BUSY, f"drained by someone else: {reason}"), True, None)
    until = drain_since + reclaim_after
    if now < until:
        return Foreign(Classification(BUSY, f"drained by someone else: {reason} (reclaimed after "
                                            f"reclaim_foreign_after {reclaim_after:.0f}s)"), True, until)
    return Foreign(Classification(c.state, f"drained by someone else for {now - drain_since:.0f}s, "
                                           f"past reclaim_foreign_after {reclaim_after:.0f}s: "
                                           f"{reason}; {c.why}", c.idle_since), False, None)


def htcondor_worker_fields(ad: Mapping[str, Any]) -> dict[str, Any]:
    """Worker fields an HTCondor p-slot ad implies (``Worker(**fields)`` minus name/scheduler).

    Only fields the ad has are returned, so callers can let explicit values win.
    """
    out: dict[str, Any] = {}
    st, act = ad.get("State"), ad.get("Activity")
    if st is not None:
        out["state"] = f"{st}/{act}" if act is not None else str(st)
    for key, field in (("CloudInstanceID", "cloud_id"), ("DrainReason", "drain_reason"),
                       ("DrainingRequestId", "drain_request_id")):
        if isinstance(ad.get(key), str):
            out[field] = ad[key]
    for key, field in (("LastHeardFrom", "last_heard"), ("EnteredCurrentState", "state_since"),
                       ("DaemonStartTime", "registered_at"), ("LastDrainStartTime", "drain_since")):
        v = ad_number(ad, key)
        if v is not None:
            out[field] = v
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
        out["draining"] = _ad_true(ad, "Draining")
    addr = ad.get("MyAddress")
    if isinstance(addr, str) and addr.startswith("<"):
        out["address"] = addr[1:].split(":", 1)[0].split(">", 1)[0]
    return out
