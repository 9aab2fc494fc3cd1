"""The HTCondor adapter: workers from startd ads, demand from idle jobs, drains as a transaction.

The calls into the official bindings (``htcondor2``) are kept thin, behind
:class:`~nodemanager.scheduler.htcondor_bindings.Bindings` (:mod:`~nodemanager.scheduler.htcondor_bindings`);
the drain transaction's pure parts (reason, check expression, "is this drain ours") are in
:mod:`~nodemanager.scheduler.htcondor_drain`. Everything else here is plain Python on plain dict ads.

Per cycle, :meth:`HTCondorScheduler.poll` makes **one** collector query of partitionable-slot ads
(with a projection) and one idle-job query per schedd, and reads each ad once (linear in startds +
jobs).

Hostile or broken values in ads (``RequestMemory = real("INF")``, ``Cpus = undefined``): see
:mod:`nodemanager.scheduler.htcondor_ads`. The poll succeeds; each problem is warned about once an
hour (:class:`~nodemanager.scheduler.records.ProblemLog`) and returned in ``SchedulerPoll.problems``.

The drain transaction (HTCondor's draining design, "Race Conditions"; docs/htcondor.md):

1. :meth:`~HTCondorScheduler.drain` sends ``drainJobs`` with ``CompletionType.Nothing`` (a drained
   node takes no new jobs until it is destroyed), ``start_expr`` false, a reason that marks the drain
   as ours (``"nodemanager <epoch> <why>"``) and a **check expression** that makes the startd refuse
   if the node changed since the snapshot the decision was made on (:func:`~nodemanager.scheduler.htcondor_drain.drain_check_expression`).
   The bindings' errors are generic, so after a failure the adapter re-reads the startd to tell
   why: a drain of ours that started although the answer was lost is adopted; otherwise the
   refusal says what it saw (already draining, busy since the snapshot, ...). A call that took the
   bindings' 20 s timeout is a transient error.
2. :meth:`~HTCondorScheduler.confirm_drained` queries the startd directly (live state, not the
   collector copy) and says yes only if the p-slot is Drained/Idle with no dynamic slots, the drain
   is ours (reason, request id **and** ``DaemonStartTime``, because request ids restart at 1 when a
   startd restarts) and the state is newer than the drain's start.
3. :meth:`~HTCondorScheduler.cancel_drain` and :meth:`~HTCondorScheduler.escalate` act only on a
   drain that fresh state shows is still ours. Escalation vacates the claims (graceful vacate for
   ``quick``, fast vacate for ``fast``), so the drain and its request id stay the same.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from nodemanager.model import Size, Worker
from nodemanager.scheduler.draining_stats import DrainingStats, DrainingStatsRecorder
from nodemanager.scheduler.port import (DRAIN_REASON_PREFIX, Confirmation, DrainRefused, DrainSchedule,
                                        DrainTicket, SchedulerError, SchedulerPoll)
from nodemanager.scheduler.htcondor_ads import (JOB_ATTRIBUTES, demand_from_jobs, machine_ad,
                                                slot_problems, worker_from_ad)
from nodemanager.scheduler.htcondor_attributes import (DEFAULT_CONSTRAINT, PILOT_ATTRIBUTES,
                                                       SLOT_ATTRIBUTES)
from nodemanager.scheduler.htcondor_bindings import Bindings, Htcondor2Bindings, plain_ad
from nodemanager.scheduler.htcondor_match import WALLTIME_ATTRIBUTE, HTCondorMatcher
from nodemanager.scheduler.htcondor_drain import (DRAIN_TIMEOUT, drain_check_expression, drain_reason,
                                                  cost_growth, graceful_evicts_at_once, is_our_drain,
                                                  jobs_on, number, pslot_of)
from nodemanager.scheduler.records import ProblemLog, RecordProblem
from nodemanager.configuration.settings import SchedulerSettings

__all__ = ["HTCondorScheduler", "SLOT_ATTRIBUTES", "PILOT_ATTRIBUTES", "DEFAULT_CONSTRAINT",
           "worker_from_ad"]

log = logging.getLogger(__name__)

def _seconds(text: str | None) -> float | None:
    if not text or not text.strip():
        return None
    from nodemanager.configuration.config import parse_duration
    return float(parse_duration(text))


def _quote(text: str) -> str:
    """``text`` as a ClassAd string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ------------------------------------------------------------------------- the adapter


class HTCondorScheduler:
    """The :class:`~nodemanager.scheduler.port.Scheduler` for an HTCondor pool (see module doc).

    ``id_attribute`` is the slot attribute holding the cloud instance id (``CloudInstanceID`` with
    ``use feature:CommonCloudAttributesAWS``); ``constraint`` selects the startds we manage;
    ``extra_attributes`` are added to the projection (e.g. attributes an escalation expression uses).
    """

    def __init__(self, bindings: Bindings, *, clock: Callable[[], float] = time.time, name: str = "htcondor",
                 id_attribute: str = "CloudInstanceID", constraint: str = DEFAULT_CONSTRAINT,
                 extra_attributes: Iterable[str] = (), reason_tag: str = DRAIN_REASON_PREFIX,
                 start_expr: str = "false", slack: float = 1200.0, badput_factor: float = 1.25,
                 drain_timeout: float = DRAIN_TIMEOUT, extra_check: str | None = None,
                 sizes: Sequence[Size] = (), machine_start: str | None = None,
                 walltime_attribute: str = WALLTIME_ATTRIBUTE) -> None:
        self.name = name
        # with sizes, each idle job is matched to the sizes that can run it
        self.matcher = HTCondorMatcher(sizes, machine_start, walltime_attribute) if sizes else None
        self._b = bindings
        self._clock = clock
        # [HA]: raises (naming the node) to stop a drain, cancel or vacate right before it is sent
        self.send_gate: Callable[[str], None] | None = None
        self.id_attribute = id_attribute
        self.constraint = constraint
        attrs = list(SLOT_ATTRIBUTES)
        for a in (id_attribute, *extra_attributes):
            if a not in attrs:
                attrs.append(a)
        self.projection: tuple[str, ...] = tuple(attrs)
        self.reason_tag = reason_tag
        self.start_expr = start_expr
        self.slack = slack
        self.badput_factor = badput_factor
        self.drain_timeout = drain_timeout
        self.extra_check = extra_check
        self.recorder = DrainingStatsRecorder()
        self._lock = threading.Lock()          # actuator threads and the poller share the counters
        self._ads: dict[str, Mapping[str, Any]] = {}
        self.problem_log = ProblemLog(log, "htcondor poll", clock)
        # (action, worker) -> the last ticket counted, so a repeated completion/escalation counts once
        self._counted: dict[tuple[str, str], tuple[Any, ...]] = {}
        # (worker, reason) -> request ids our drain took when an escalation renewed it
        self._renewed: dict[tuple[str, str], tuple[str, ...]] = {}

    @classmethod
    def from_settings(cls, settings: SchedulerSettings, *, clock: Callable[[], float] = time.time,
                      bindings: Bindings | None = None, sizes: Sequence[Size] = ()) -> "HTCondorScheduler":
        """The adapter for ``[Scheduler] type = htcondor``: ``collector`` (host[:port]; default the
        configured COLLECTOR_HOST), ``schedd`` (comma-separated names; default every schedd),
        ``cloud_id_attribute`` (default CloudInstanceID), ``constraint`` (which startds are ours),
        ``query_timeout`` (seconds, sets QUERY_TIMEOUT), ``drain_check`` (an extra ClassAd
        expression ANDed with the drain's check expression), ``machine_start`` (the execute
        nodes' START, for matching idle jobs to ``sizes``), ``walltime_attribute`` (the job
        attribute holding its requested walltime in seconds; default AllowedJobDuration)."""
        o = settings.options
        if bindings is None:
            schedds = [s.strip() for s in o.get("schedd", "").split(",") if s.strip()]
            bindings = Htcondor2Bindings(o.get("collector") or None, schedds,
                                         query_timeout=_seconds(o.get("query_timeout")))
        extra_check = (o.get("drain_check") or "").strip() or None
        if extra_check is not None:
            from nodemanager.classad.expressions import parse
            parse(extra_check)
        return cls(bindings, clock=clock, id_attribute=o.get("cloud_id_attribute") or "CloudInstanceID",
                   constraint=o.get("constraint") or DEFAULT_CONSTRAINT, extra_check=extra_check,
                   sizes=sizes, machine_start=(o.get("machine_start") or "").strip() or None,
                   walltime_attribute=(o.get("walltime_attribute") or "").strip() or WALLTIME_ATTRIBUTE)

    # ---------------------------------------------------------------- poll

    def poll(self) -> SchedulerPoll:
        now = self._clock()
        try:
            raw = self._b.query_slots(self.constraint, self.projection)
        except self._b.error_types as exc:
            raise SchedulerError(f"collector query failed: {exc}") from None
        problems: list[RecordProblem] = []
        workers = self.workers_from_ads(raw, problems)
        if self.matcher is None:
            demand = demand_from_jobs(self._idle_jobs(JOB_ATTRIBUTES), problems)
        else:
            demand = self.matcher.demand_from(self._idle_jobs, problems)
        self.problem_log.report(problems)
        return SchedulerPoll(workers=workers, demand=demand, polled_at=now, problems=tuple(problems))

    def _idle_jobs(self, projection: Sequence[str]) -> list[Mapping[str, Any]]:
        try:
            return self._b.query_idle_jobs(projection)
        except self._b.error_types as exc:
            raise SchedulerError(f"schedd query failed: {exc}") from None

    def workers_from_ads(self, raw: Iterable[Mapping[str, Any]],
                         problems: list[RecordProblem] | None = None) -> tuple[Worker, ...]:
        """Workers from slot ads, one per startd (its partitionable slots together: see
        :func:`~nodemanager.scheduler.htcondor_ads.machine_ad`), then :meth:`observe` them. An ad
        without a name is logged and skipped; unusable counts are appended to ``problems`` (the
        worker is kept, see :func:`worker_from_ad`); an ad that cannot be read at all is a
        SchedulerError."""
        machines: dict[str, list[dict[str, Any]]] = {}
        bad: dict[str, list[RecordProblem]] = {}
        for r in raw:
            slot = "?"
            try:
                ad = plain_ad(r)
                slot = str(ad.get("Name") or ad.get("Machine") or "?")
                found = slot_problems(ad, slot, r)
            except Exception as exc:  # noqa: BLE001 - hostile data: name the slot, never a bare traceback
                raise SchedulerError(f"slot {slot}: cannot read its ad ({type(exc).__name__}: {exc})",
                                     node=slot) from exc
            machine = ad.get("Machine")
            key = machine if isinstance(machine, str) and machine else slot.split("@", 1)[-1]
            machines.setdefault(key, []).append(ad)
            if found:
                bad.setdefault(key, []).extend(found)
        workers: list[Worker] = []
        for key, ads in machines.items():
            found = bad.get(key, [])
            try:
                w = worker_from_ad(machine_ad(ads), id_attribute=self.id_attribute,
                                   unusable=[p.field for p in found])
            except ValueError as exc:
                log.warning("htcondor: ignoring a bad slot ad: %s", exc)
                continue
            except Exception as exc:  # noqa: BLE001 - hostile data: name the slot, never a bare traceback
                raise SchedulerError(f"slot {key}: cannot read its ad ({type(exc).__name__}: {exc})",
                                     node=key) from exc
            if problems is not None:
                problems.extend(found)
            workers.append(w)
        out = tuple(workers)
        self.observe(out)
        return out

    def observe(self, workers: Sequence[Worker]) -> None:
        """Remember each startd's last ad (its address for drains) and record draining totals."""
        ads = {w.name: w.ad for w in workers}
        with self._lock:
            self._ads = ads
            self.recorder.observe(workers)

    def _count(self, what: str, once: tuple[Any, ...] | None = None) -> None:
        """Count one drain action; with ``once``, only the first time for that key."""
        with self._lock:
            if once is not None:
                key = (what, str(once[0]))
                if self._counted.get(key) == once:
                    return
                self._counted[key] = once
            setattr(self.recorder, what, getattr(self.recorder, what) + 1)

    def draining_stats(self) -> DrainingStats:
        """Draining badput/unclaimed time per node and in total, and counts of our drain actions."""
        with self._lock:
            return self.recorder.stats()

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
        log.info("htcondor: %s: %s drain started, request %s (%s); check: %s",
                 name, schedule, rid, why, check)
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
            detail = ("refused although it looks unchanged: its drain cost grew past the check, or we lack "
                      "ADMINISTRATOR authorization")
        log.info("htcondor: %s: drain refused: %s", name, detail)
        raise DrainRefused(f"{name}: drain refused: {detail}", node=name)

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

    def node_destroyed(self, worker_name: str) -> None:
        """Nothing to tell HTCondor (the startd's ads go with the VM); forget its address."""
        with self._lock:
            self._ads.pop(worker_name, None)
            for key in [k for k in self._renewed if k[0] == worker_name]:
                del self._renewed[key]
            for what in ("completed", "escalated"):
                self._counted.pop((what, worker_name), None)
