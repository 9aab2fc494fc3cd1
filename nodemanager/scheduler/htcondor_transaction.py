"""The HTCondor adapter's drain transaction: drain, confirm, cancel and escalate a startd's drain.

The drain transaction (HTCondor's draining design, "Race Conditions"; docs/htcondor.md):

1. :meth:`~DrainTransaction.drain` sends ``drainJobs`` with ``CompletionType.Nothing`` (a drained
   node takes no new jobs until it is destroyed), ``start_expr`` false, a reason that marks the drain
   as ours (``"nodemanager <UTC time> <why>"``) and a **check expression** that makes the startd refuse
   if the node changed since the snapshot the decision was made on (:func:`~nodemanager.scheduler.htcondor_drain.drain_check_expression`).
   The bindings' errors are generic, so after a failure the adapter re-reads the startd to tell
   why: a drain of ours that started although the answer was lost is adopted; otherwise the
   refusal says what it saw (already draining, busy since the snapshot, ...). A call that took the
   bindings' 20 s timeout is a transient error.
2. :meth:`~DrainTransaction.confirm_drained` queries the startd directly (live state, not the
   collector copy) and says yes only if the p-slot is Drained/Idle with no dynamic slots, the drain
   is ours (its exact reason and a request id we hold: the startd's own ads carry no
   ``DaemonStartTime``, so a restarted startd's drain with a reused id is told apart by its reason)
   and the state is newer than the drain's start.
3. :meth:`~DrainTransaction.cancel_drain` and :meth:`~DrainTransaction.escalate` act only on a
   drain that fresh state shows is still ours. ``fast`` cancels our drain and starts it again as a
   fast drain with the same reason (the startd counts the kills as draining badput), under a new
   request id remembered as ours; ``quick`` is refused once claims retire (HTCondor cannot
   soft-kill a retiring claim).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from nodemanager.model import Worker
from nodemanager.scheduler.draining_stats import DrainingStatsRecorder
from nodemanager.scheduler.htcondor_ads import slot_problems
from nodemanager.scheduler.htcondor_bindings import Bindings, plain_ad
from nodemanager.scheduler.htcondor_drain import (drain_check_expression, drain_reason, cost_growth,
                                                  graceful_evicts_at_once, is_our_drain, jobs_on,
                                                  number, pslot_of)
from nodemanager.scheduler.port import (Confirmation, DrainRefused, DrainSchedule, DrainTicket,
                                        SchedulerError, is_denial)

__all__ = ["DrainTransaction"]

log = logging.getLogger("nodemanager.scheduler.htcondor")


def _quote(text: str) -> str:
    """``text`` as a ClassAd string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class DrainTransaction:
    """The drain transaction of :class:`~nodemanager.scheduler.htcondor.HTCondorScheduler`, which
    sets the attributes below."""

    _b: Bindings
    _clock: Callable[[], float]
    _lock: threading.Lock
    _ads: dict[str, Mapping[str, Any]]
    _renewed: dict[tuple[str, str], tuple[str, ...]]
    _counted: dict[tuple[str, str], tuple[Any, ...]]
    projection: tuple[str, ...]
    send_gate: Callable[[str], None] | None
    reason_tag: str
    start_expr: str
    slack: float
    badput_factor: float
    drain_timeout: float
    extra_check: str | None
    recorder: DrainingStatsRecorder

    def _count(self, what: str, once: tuple[Any, ...] | None = None) -> None:
        """Count one drain action; with ``once``, only the first time for that key."""
        with self._lock:
            if once is not None:
                key = (what, str(once[0]))
                if self._counted.get(key) == once:
                    return
                self._counted[key] = once
            setattr(self.recorder, what, getattr(self.recorder, what) + 1)

    # ---------------------------------------------------------------- the drain transaction

    def _location(self, name: str, fallback: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        ad = self._ads.get(name) or fallback
        if not ad or not ad.get("MyAddress"):
            raise SchedulerError(f"{name}: no address known for this startd (not in the last poll)",
                                 node=name)
        return ad

    def _fresh(self, name: str, location: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The startd's live slot ads, or None if it cannot be asked now."""
        try:
            return [plain_ad(a) for a in self._b.query_startd(location, self.projection + ("DynamicSlot",))]
        except self._b.error_types as exc:
            log.info("htcondor: %s: direct query failed: %s", name, exc)
            return None

    def _collector_copy(self, name: str) -> list[dict[str, Any]] | None:
        """The collector's copy of one startd's slot ads, or None if the collector cannot be asked."""
        try:
            raw = self._b.query_slots(f"Machine == {_quote(name)}", self.projection + ("DynamicSlot",))
        except self._b.error_types as exc:
            log.info("htcondor: %s: collector query failed: %s", name, exc)
            return None
        return [plain_ad(a) for a in raw]

    def _gate(self, node: str) -> None:
        if self.send_gate is not None:
            self.send_gate(node)

    def drain(self, worker: Worker, schedule: DrainSchedule, reason: str) -> DrainTicket:
        schedule = DrainSchedule(schedule)
        name = worker.name
        if worker.draining:
            self._count("refused")
            raise DrainRefused(f"{name}: already draining ({worker.drain_reason!r}, request "
                               f"{worker.drain_request_id}); one drain per node", node=name)
        evicts = graceful_evicts_at_once(worker.ad) if schedule is DrainSchedule.GRACEFUL else None
        if evicts and (worker.running_jobs > 0 or worker.cpus_busy > 0):
            self._count("refused")
            log.warning("htcondor: %s: graceful drain not started: it would %s", name, evicts)
            raise DrainRefused(f"{name}: graceful drain not started: it would {evicts}", node=name)
        location = self._location(name, worker.ad)
        now = self._clock()
        why = drain_reason(reason, now, tag=self.reason_tag)
        check = drain_check_expression(worker.ad, schedule, slack=self.slack, factor=self.badput_factor)
        if self.extra_check:
            check = f"{check} && ({self.extra_check})"
        started = number(worker.ad, "DaemonStartTime")
        self._gate(name)
        try:
            rid = self._b.drain_jobs(location, schedule.value, check, self.start_expr, why)
        except self._b.error_types as exc:
            elapsed = self._clock() - now
            return self._after_failed_drain(worker, location, schedule, why, now, elapsed, exc)
        self._count("started")
        log.info("htcondor: %s: %s drain started, request %s", name, schedule, rid)
        log.debug("htcondor: %s: drain request %s: reason %s; check: %s", name, rid, why, check)
        return DrainTicket(worker=name, request_id=str(rid), reason=why, started_at=now,
                           daemon_start=started, schedule=schedule)

    def _after_failed_drain(self, worker: Worker, location: Mapping[str, Any], schedule: DrainSchedule,
                            why: str, now: float, elapsed: float, exc: BaseException) -> DrainTicket:
        """The bindings say only "failed": re-read the startd and tell the caller why."""
        name = worker.name
        timed_out = elapsed >= self.drain_timeout - 0.5
        # A startd that did not answer in 20 s will not answer a direct query either: ask the collector.
        fresh = self._collector_copy(name) if timed_out else self._fresh(name, location)
        p = pslot_of(fresh) if fresh else None
        if p is not None and p.get("Draining") is True and p.get("DrainReason") == why:
            rid = str(p.get("DrainingRequestId"))
            self._count("started")
            log.info("htcondor: %s: drain request failed (%s) but our drain %s is running: adopted",
                     name, exc, rid)
            return DrainTicket(worker=name, request_id=rid, reason=why, started_at=now,
                               daemon_start=number(p, "DaemonStartTime"), schedule=schedule)
        if timed_out:
            log.warning("htcondor: %s: no answer to the drain request in %.0f s", name, elapsed)
            raise SchedulerError(f"{name}: no answer to the drain request within {self.drain_timeout:.0f} s "
                                 f"({exc})", node=name, transient=True)
        self._count("refused")
        if p is None:
            detail = "refused, and the startd cannot be queried now"
        elif p.get("Draining") is True:
            detail = (f"already draining ({p.get('DrainReason')!r}, request {p.get('DrainingRequestId')}); "
                      "one drain per node")
        elif jobs_on(p, fresh) > worker.running_jobs:
            detail = (f"it became busy since the snapshot ({jobs_on(p, fresh)} jobs now, "
                      f"{worker.running_jobs} then)")
        elif None not in (then := number(worker.ad, "DaemonStartTime"), now_ := number(p, "DaemonStartTime")) \
                and then != now_:  # only the collector's copy (after a timeout) has it
            detail = "the startd restarted since the snapshot"
        elif grown := cost_growth(worker.ad, p, schedule):
            detail = f"its drain cost grew past the check since the snapshot ({grown}); asked again next cycle"
        else:
            denied = self._denied(location, exc)
            if denied:
                log.warning("htcondor: %s: drain refused: no permission: %s", name, denied)
                raise SchedulerError(f"{name}: drain refused: {denied}", node=name, denied=True)
            detail = ("refused although it looks unchanged: its drain cost grew past the check, or we lack "
                      "ADMINISTRATOR authorization")
        log.info("htcondor: %s: drain refused: %s", name, detail)
        raise DrainRefused(f"{name}: drain refused: {detail}", node=name)

    def _denied(self, location: Mapping[str, Any], exc: BaseException) -> str | None:
        """Why a drain the startd refused unchanged was refused for lack of rights (None: it was
        not): the error says so, or the startd does not grant us DRAIN_JOBS when asked."""
        if is_denial(str(exc)):
            return str(exc)
        ask = getattr(self._b, "authorized", None)
        if ask is not None and ask(location, "DRAIN_JOBS") is False:
            return f"DRAIN_JOBS (ADMINISTRATOR) not granted to this user at {location.get('MyAddress')} ({exc})"
        return None

    def _ours_now(self, ticket: DrainTicket
                  ) -> tuple[Mapping[str, Any], list[dict[str, Any]] | None, str]:
        """(location, the startd's live slot ads or None, what went wrong or "")."""
        location = self._location(ticket.worker)
        fresh = self._fresh(ticket.worker, location)
        if fresh is None:
            return location, None, "the startd did not answer a direct query"
        p = pslot_of(fresh)
        if p is None:
            return location, fresh, "the startd reports no partitionable slot"
        return location, fresh, ""

    def _is_ours(self, ad: Mapping[str, Any], ticket: DrainTicket) -> tuple[bool, str]:
        with self._lock:
            renewed = self._renewed.get((ticket.worker, ticket.reason), ())
        return is_our_drain(ad, ticket, tag=self.reason_tag, request_ids=renewed)

    def confirm_drained(self, ticket: DrainTicket) -> Confirmation:
        try:
            _, fresh, problem = self._ours_now(ticket)
        except SchedulerError as exc:
            return Confirmation(False, str(exc))
        if problem:
            return Confirmation(False, f"{ticket.worker}: {problem}")
        assert fresh is not None
        p = pslot_of(fresh)
        assert p is not None
        ours, why = self._is_ours(p, ticket)
        if not ours:
            return Confirmation(False, f"{ticket.worker}: {why}")
        bad = slot_problems(p, ticket.worker)
        if bad:
            return Confirmation(False, f"{bad[0]}: its job count cannot be trusted")
        seen = number(p, "MyCurrentTime")
        if seen is None or seen <= ticket.started_at:
            return Confirmation(False, f"{ticket.worker}: state not newer than the drain start")
        if p.get("State") != "Drained" or p.get("Activity") != "Idle":
            return Confirmation(False, f"{ticket.worker}: still {p.get('State')}/{p.get('Activity')}")
        busy = [a for a in fresh
                if a is not p and (a.get("DynamicSlot") is True or a.get("State") != "Drained")]
        if busy or (number(p, "NumDynamicSlots", 0.0) or 0) > 0:
            n = max(len(busy), int(number(p, "NumDynamicSlots", 0.0) or 0))
            return Confirmation(False, f"{ticket.worker}: {n} slot(s) still have jobs")
        self._count("completed", (ticket.worker, str(ticket.request_id), ticket.daemon_start))
        return Confirmation(True, f"{ticket.worker}: drained by our request {ticket.request_id}, "
                                  "nothing runs")

    def cancel_drain(self, ticket: DrainTicket) -> None:
        location, fresh, problem = self._ours_now(ticket)
        if problem:
            raise SchedulerError(f"{ticket.worker}: cannot cancel the drain: {problem}", node=ticket.worker)
        assert fresh is not None
        p = pslot_of(fresh)
        assert p is not None
        if p.get("Draining") is not True:
            log.info("htcondor: %s: cancel: not draining any more", ticket.worker)
            return
        ours, why = self._is_ours(p, ticket)
        if not ours:
            raise DrainRefused(f"{ticket.worker}: not cancelling: {why}", node=ticket.worker)
        self._gate(ticket.worker)
        try:
            self._b.cancel_drain_jobs(location, str(ticket.request_id))
        except self._b.error_types as exc:
            again = self._fresh(ticket.worker, location)
            q = pslot_of(again) if again else None
            if q is not None and not self._is_ours(q, ticket)[0]:
                log.info("htcondor: %s: cancel failed (%s) but our drain is gone", ticket.worker, exc)
                return
            raise SchedulerError(f"{ticket.worker}: cancel of drain {ticket.request_id} failed: {exc}",
                                 node=ticket.worker) from None
        self._count("cancelled")
        log.info("htcondor: %s: drain %s cancelled", ticket.worker, ticket.request_id)

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        """Make our drain harsher. ``fast``: our drain is cancelled and started again as a fast
        drain with the same reason (the startd kills every job and counts it as draining badput;
        a fast vacate would not), under a new request id this adapter remembers as ours.
        ``quick`` cannot be done on a drain whose claims already retire: HTCondor's graceful
        vacate only retires them and a quick drain after a graceful one leaves them retiring, so
        it is refused (escalate to ``fast``, or start the drain as ``quick``)."""
        schedule = DrainSchedule(schedule)
        if schedule is DrainSchedule.GRACEFUL:
            return
        location, fresh, problem = self._ours_now(ticket)
        if problem:
            raise SchedulerError(f"{ticket.worker}: cannot escalate: {problem}", node=ticket.worker)
        assert fresh is not None
        p = pslot_of(fresh)
        assert p is not None
        ours, why = self._is_ours(p, ticket)
        if not ours:
            raise DrainRefused(f"{ticket.worker}: not escalating: {why}", node=ticket.worker)
        jobs = jobs_on(p, fresh)
        if jobs == 0:
            log.info("htcondor: %s: drain %s not escalated to %s: no job runs", ticket.worker,
                     p.get("DrainingRequestId"), schedule)
            return
        if schedule is DrainSchedule.QUICK:
            retiring = sum(1 for a in fresh if a.get("DynamicSlot") is True and a.get("Activity") == "Retiring")
            if retiring:
                raise DrainRefused(
                    f"{ticket.worker}: drain not made quick: {retiring} job(s) already retire under a graceful "
                    "drain and HTCondor cannot soft-kill a retiring claim; escalate to fast, or start drains "
                    "as quick", node=ticket.worker)
            return
        current = str(p.get("DrainingRequestId"))
        reason = str(p.get("DrainReason"))
        self._gate(ticket.worker)
        try:
            self._b.cancel_drain_jobs(location, current)
            rid = str(self._b.drain_jobs(location, schedule.value, "true", self.start_expr, reason))
        except self._b.error_types as exc:
            raise SchedulerError(f"{ticket.worker}: escalation of drain {current} to {schedule} failed: {exc}",
                                 node=ticket.worker) from None
        with self._lock:
            key = (ticket.worker, ticket.reason)
            self._renewed[key] = (*self._renewed.get(key, ()), rid)
        self._count("escalated", (ticket.worker, str(ticket.request_id), ticket.daemon_start, schedule.value))
        log.info("htcondor: %s: drain %s escalated to %s (%d job(s) killed), now request %s",
                 ticket.worker, current, schedule, jobs, rid)

