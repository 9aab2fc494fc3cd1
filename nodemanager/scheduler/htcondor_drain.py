"""The HTCondor drain transaction's pure parts: the reason that marks a drain as ours, the check
expression that makes a startd refuse a drain decided on stale state, and the tests that tell
whether a startd's ad shows our drain (see :mod:`nodemanager.scheduler.htcondor` for the steps).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from nodemanager.core import ad_number
from nodemanager.model import Worker
from nodemanager.scheduler.port import DRAIN_REASON_PREFIX, DrainSchedule, DrainTicket

__all__ = ["DRAIN_TIMEOUT", "drain_check_expression", "drain_reason", "pslot_of", "is_our_drain",
           "ticket_from_worker", "number", "jobs_on"]

# dc_startd.cpp hard-codes 20 s for DRAIN_JOBS / CANCEL_DRAIN_JOBS; a failure this slow is a timeout.
DRAIN_TIMEOUT = 20.0


def number(ad: Mapping[str, Any], key: str, default: float | None = None) -> float | None:
    """A numeric attribute as float (see :func:`~nodemanager.classad.values.ad_number`), else ``default``."""
    v = ad_number(ad, key)
    return default if v is None else v


def drain_check_expression(ad: Mapping[str, Any], schedule: DrainSchedule | str, *,
                           slack: float = 1200.0, factor: float = 1.25) -> str:
    """The ``check_expr`` that makes the startd refuse a drain decided on stale state
    (HTCondor's draining design).

    * Node idle in the snapshot: refuse if any slot is a dynamic slot, the p-slot has dynamic slots,
      or a slot is claimed (``DynamicSlot =!= true`` is false on every dynamic slot ad).
    * Node busy in the snapshot (a deliberate drain of a busy node): defrag's guard, refuse if the
      startd's own estimate for this schedule is now much worse than the snapshot's
      (completion later than snapshot + ``slack``; badput above ``factor`` x snapshot + ``slack``).
    * Always: refuse if the startd restarted since the snapshot (``DaemonStartTime``).

    ``=?=``/``=!=`` keep undefined attributes from making the check "not a bool" (which refuses).
    """
    schedule = DrainSchedule(schedule)
    dslots = number(ad, "NumDynamicSlots", 0.0) or 0.0
    parts: list[str]
    if dslots == 0 and not _children_busy(ad):
        parts = ["DynamicSlot =!= true",
                 "(NumDynamicSlots =?= 0 || NumDynamicSlots =?= undefined)",
                 '(State =?= "Unclaimed" || State =?= "Owner")']
    else:
        kind = "Graceful" if schedule is DrainSchedule.GRACEFUL else "Quick"
        parts = []
        done = number(ad, f"ExpectedMachine{kind}DrainingCompletion")
        badput = number(ad, f"ExpectedMachine{kind}DrainingBadput")
        if done is not None:
            parts.append(f"ExpectedMachine{kind}DrainingCompletion <= {int(done + slack)}")
        if badput is not None:
            parts.append(f"ExpectedMachine{kind}DrainingBadput <= {int(factor * badput + slack)}")
    started = number(ad, "DaemonStartTime")
    if started is not None:
        parts.append(f"DaemonStartTime =?= {int(started)}")
    return " && ".join(parts) if parts else "true"


def jobs_on(pslot: Mapping[str, Any], ads: Iterable[Mapping[str, Any]] | None) -> int:
    """How many jobs (dynamic slots) a startd runs, from its p-slot ad and its slot ads."""
    dynamic = sum(1 for a in ads or () if a.get("DynamicSlot") is True)
    return max(dynamic, int(number(pslot, "NumDynamicSlots", 0.0) or 0))


def _children_busy(ad: Mapping[str, Any]) -> bool:
    child = ad.get("ChildState")
    return isinstance(child, (list, tuple)) and any(c in ("Claimed", "Preempting", "Matched") for c in child)


def drain_reason(why: str, now: float, *, tag: str = DRAIN_REASON_PREFIX) -> str:
    """The ``DrainReason`` we send: ``"<tag> <epoch> <why>"``, unique per node and ours by its tag."""
    why = why.strip()
    if why.startswith(tag + " ") or why == tag:
        why = why[len(tag):].strip()
    return f"{tag} {int(now)} {why}".rstrip()


def pslot_of(ads: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The partitionable slot (else the first non-dynamic slot) of one startd's ads."""
    first = None
    for ad in ads:
        if ad.get("PartitionableSlot") is True or ad.get("SlotType") == "Partitionable":
            return ad
        if first is None and ad.get("DynamicSlot") is not True:
            first = ad
    return first


def is_our_drain(ad: Mapping[str, Any], ticket: DrainTicket, *, tag: str = DRAIN_REASON_PREFIX,
                 skew: float = 5.0) -> tuple[bool, str]:
    """Is the drain ``ad`` shows the one ``ticket`` started? (False, why) if not.

    Checks ``Draining``, ``DrainingRequestId``, ``DrainReason`` (exactly, or our tag when the ticket
    has no reason) and the startd process: ``DaemonStartTime`` equal to the ticket's, or when the
    ticket does not know it, not after the drain started (ids restart at 1 on a restart).
    """
    if ad.get("Draining") is not True:
        return False, "not draining"
    rid = ad.get("DrainingRequestId")
    if rid is None or str(rid) != str(ticket.request_id):
        return False, f"drain request {rid} is not ours ({ticket.request_id})"
    reason = ad.get("DrainReason")
    if ticket.reason:
        if reason != ticket.reason:
            return False, f"drain reason {reason!r} is not ours ({ticket.reason!r})"
    elif not (isinstance(reason, str) and reason.startswith(tag + " ")):
        return False, f"drain reason {reason!r} is not ours"
    started = number(ad, "DaemonStartTime")
    if ticket.daemon_start is not None:
        if started is None or int(started) != int(ticket.daemon_start):
            return False, (f"startd restarted (DaemonStartTime {started} != {ticket.daemon_start}): "
                           f"request id {rid} is not our drain")
    elif started is None or started > ticket.started_at + skew:
        return False, f"startd started at {started}, after our drain began: request id {rid} is not ours"
    return True, "our drain"


def ticket_from_worker(worker: Worker, *, tag: str = DRAIN_REASON_PREFIX) -> DrainTicket | None:
    """Rebuild the ticket of a drain of ours from a polled worker (after a controller restart).

    None unless the worker drains with our reason tag. The start time is ``LastDrainStartTime``.
    """
    reason = worker.drain_reason
    if not worker.draining or not worker.drain_request_id or not (reason or "").startswith(tag + " "):
        return None
    ad = worker.ad
    return DrainTicket(worker=worker.name, request_id=worker.drain_request_id, reason=reason or "",
                       started_at=number(ad, "LastDrainStartTime", 0.0) or 0.0,
                       daemon_start=number(ad, "DaemonStartTime"))
