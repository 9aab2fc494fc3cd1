"""The HTCondor drain transaction's pure parts: the reason that marks a drain as ours, the check
expression that makes a startd refuse a drain decided on stale state, and the tests that tell
whether a startd's ad shows our drain (see :mod:`nodemanager.scheduler.htcondor` for the steps).
"""

from __future__ import annotations

import time

from typing import Any, Iterable, Mapping

from nodemanager.core import ad_number
from nodemanager.model import Worker
from nodemanager.scheduler.htcondor_ads import retirement_left
from nodemanager.scheduler.port import DRAIN_REASON_PREFIX, DrainSchedule, DrainTicket
from nodemanager.text import duration

__all__ = ["DRAIN_TIMEOUT", "drain_check_expression", "drain_reason", "pslot_of", "is_our_drain",
           "ticket_from_worker", "number", "jobs_on", "graceful_evicts_at_once", "cost_growth"]

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

    The startd evaluates it against its own slot ads, which carry no ``DaemonStartTime`` (only the
    collector's copy does), so a restart is not part of it: a restarted startd is judged afresh by
    the rest. ``=?=``/``=!=`` keep undefined attributes from making the check "not a bool" (which
    refuses).
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
    return " && ".join(parts) if parts else "true"


def cost_growth(snapshot: Mapping[str, Any], live: Mapping[str, Any], schedule: DrainSchedule | str, *,
                slack: float = 1200.0, factor: float = 1.25) -> str | None:
    """In words, the startd's estimate in ``live`` that is past the bound the check expression
    built from ``snapshot`` set (see :func:`drain_check_expression`), else None. A snapshot taken
    within an update of a new claim does not count it yet: the next cycle's drain goes through."""
    kind = "Graceful" if DrainSchedule(schedule) is DrainSchedule.GRACEFUL else "Quick"
    for what, bound in (("Badput", lambda v: factor * v + slack), ("Completion", lambda v: v + slack)):
        key = f"ExpectedMachine{kind}Draining{what}"
        then, now = number(snapshot, key), number(live, key)
        if then is not None and now is not None and now > int(bound(then)):
            if what == "Completion":                 # a time: how much later, never epoch seconds
                return f"{key} {duration(now - then)} later than in the snapshot"
            return f"{key} {now:.0f} s, {then:.0f} s in the snapshot"
    return None


def graceful_evicts_at_once(ad: Mapping[str, Any]) -> str | None:
    """What a graceful drain of this startd would do at once, when that is evicting a job: the
    startd evicts a job once its retirement time left is no more than its vacate time, so with a
    running job's retirement left (its own, ``ChildRetirementTimeRemaining``: a job-dependent
    ``MAXJOBRETIREMENTTIME`` may give one job 0) or else ``MaxJobRetirementTime`` (HTCondor's
    default: 0) not above ``MachineMaxVacateTime`` a graceful drain is no gentler than a quick
    one. None when retirement is longer (or unknown)."""
    vacate = number(ad, "MachineMaxVacateTime")
    if vacate is None:
        return None
    retire = number(ad, "MaxJobRetirementTime", 0.0) or 0.0
    if retire <= vacate:
        return (f"evict its jobs at once: MaxJobRetirementTime ({retire:.0f} s) is not above "
                f"MachineMaxVacateTime ({vacate:.0f} s); set MAXJOBRETIREMENTTIME on the execute nodes")
    left = retirement_left(ad)
    if left is None or left[0] > vacate:
        return None
    return (f"evict a job at once: its retirement left ({left[0]:.0f} s, MAXJOBRETIREMENTTIME as "
            f"evaluated for that job) is not above MachineMaxVacateTime ({vacate:.0f} s)")


def jobs_on(pslot: Mapping[str, Any], ads: Iterable[Mapping[str, Any]] | None) -> int:
    """How many jobs (dynamic slots) a startd runs, from its p-slot ad and its slot ads."""
    dynamic = sum(1 for a in ads or () if a.get("DynamicSlot") is True)
    return max(dynamic, int(number(pslot, "NumDynamicSlots", 0.0) or 0))


def _children_busy(ad: Mapping[str, Any]) -> bool:
    child = ad.get("ChildState")
    return isinstance(child, (list, tuple)) and any(c in ("Claimed", "Preempting", "Matched") for c in child)


def drain_reason(why: str, now: float, *, tag: str = DRAIN_REASON_PREFIX) -> str:
    """The ``DrainReason`` we send: ``"<tag> <UTC time> <why>"`` (``2026-11-27T02:56:46Z``), unique
    per node and ours by its tag; an administrator reads it in ``condor_status``."""
    why = why.strip()
    if why.startswith(tag + " ") or why == tag:
        why = why[len(tag):].strip()
    return f"{tag} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))} {why}".rstrip()


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
                 skew: float = 5.0, request_ids: Iterable[str] = ()) -> tuple[bool, str]:
    """Is the drain ``ad`` shows the one ``ticket`` started? (False, why) if not.

    Ours is the request id (the ticket's, or one of ``request_ids``: the drain renewed under a
    new id by an escalation) **and** the reason: exactly the ticket's (``"<tag> <UTC time> <why>"``,
    unique per drain, so a drain after a startd restart, whose ids start again at 1, is not
    mistaken for ours), or our tag when the ticket has no reason. The startd's own slot ads carry
    no ``DaemonStartTime``; where ``ad`` has it (the collector's copy) and the ticket too, they
    must agree.
    """
    if ad.get("Draining") is not True:
        return False, "not draining"
    rid = ad.get("DrainingRequestId")
    if rid is None or str(rid) not in {str(ticket.request_id), *map(str, request_ids)}:
        return False, f"drain request {rid} is not ours ({ticket.request_id})"
    reason = ad.get("DrainReason")
    if ticket.reason:
        if reason != ticket.reason:
            return False, f"drain reason {reason!r} is not ours ({ticket.reason!r})"
    elif not (isinstance(reason, str) and reason.startswith(tag + " ")):
        return False, f"drain reason {reason!r} is not ours"
    started = number(ad, "DaemonStartTime")
    if started is not None:
        if ticket.daemon_start is not None and int(started) != int(ticket.daemon_start):
            return False, (f"startd restarted (DaemonStartTime {started} != {ticket.daemon_start}): "
                           f"request id {rid} is not our drain")
        if ticket.daemon_start is None and not ticket.reason and started > ticket.started_at + skew:
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
