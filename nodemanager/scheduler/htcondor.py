"""The HTCondor adapter: workers from startd ads, demand from idle jobs, drains as a transaction.

The calls into the official bindings (``htcondor2``) are kept thin, behind :class:`Bindings`:
:class:`Htcondor2Bindings` is the production implementation and takes the ``htcondor2`` module as a
parameter, so the tests run exactly this code against the simulated collector and startds
(``nodemanager.sim.collector``). Everything else here is plain Python on plain dict ads.

Per cycle, :meth:`HTCondorScheduler.poll` makes **one** collector query of partitionable-slot ads
(with a projection) and one idle-job query per schedd, and reads each ad once (linear in startds +
jobs).

Hostile or broken values in ads (``RequestMemory = real("INF")``, ``Cpus = undefined``): see
:mod:`nodemanager.scheduler.htcondor_ads`. The poll succeeds; each problem is warned about once an
hour (:class:`~nodemanager.scheduler.records.ProblemLog`) and returned in ``SchedulerPoll.problems``.

The drain transaction (seed 000, "Race Conditions"; docs/htcondor.md):

1. :meth:`~HTCondorScheduler.drain` sends ``drainJobs`` with ``CompletionType.Nothing`` (a drained
   node takes no new jobs until it is destroyed), ``start_expr`` false, a reason that marks the drain
   as ours (``"nodemanager <epoch> <why>"``) and a **check expression** that makes the startd refuse
   if the node changed since the snapshot the decision was made on (:func:`drain_check_expression`).
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
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from nodemanager.core import ad_number
from nodemanager.model import Worker
from nodemanager.scheduler.draining_stats import DrainingStats, DrainingStatsRecorder
from nodemanager.scheduler.port import (DRAIN_REASON_PREFIX, Confirmation, DrainRefused, DrainSchedule,
                                        DrainTicket, SchedulerError, SchedulerPoll)
from nodemanager.scheduler.htcondor_ads import (JOB_ATTRIBUTES, demand_from_jobs, slot_problems,
                                                worker_from_ad)
from nodemanager.scheduler.records import ProblemLog, RecordProblem
from nodemanager.settings import SchedulerSettings

__all__ = [
    "Bindings", "Htcondor2Bindings", "HTCondorScheduler",
    "SLOT_ATTRIBUTES", "PILOT_ATTRIBUTES", "JOB_ATTRIBUTES", "DEFAULT_CONSTRAINT", "IDLE_JOBS",
    "DRAIN_TIMEOUT", "drain_check_expression", "worker_from_ad", "demand_from_jobs", "plain_ad",
    "pslot_of", "is_our_drain", "ticket_from_worker", "drain_reason",
]

log = logging.getLogger(__name__)

# Seed 003: what a pilot's .pilot.ad publishes into the slot ad (deploy/htcondor/pilot-ad-cron);
# PilotAdUpdated is the file's modification time, its heartbeat.
PILOT_ATTRIBUTES = ("LAST_JOB_START", "FIRST_EXP_JOB_END", "LAST_EXP_JOB_END", "LAST_MAX_JOB_END",
                    "USED_FRACTION1k", "ADD_UNCOM_TIME1k", "ADD_FINAL_EXP_WASTE1k", "PRIORITY_FACTOR",
                    "CAN_POSTPONE_LAST_JOB", "PilotAdUpdated", "PilotAdCount")

SLOT_ATTRIBUTES = (
    "MyAddress", "Name", "Machine", "State", "Activity", "SlotType", "PartitionableSlot", "DynamicSlot",
    "Cpus", "TotalSlotCpus", "TotalCpus", "Memory", "TotalSlotMemory", "TotalMemory", "NumDynamicSlots",
    "ChildState", "ChildActivity", "JobStarts", "Draining", "DrainReason", "DrainingRequestId",
    "DaemonStartTime", "LastHeardFrom", "EnteredCurrentState", "EnteredCurrentActivity", "MyCurrentTime",
    "MaxJobRetirementTime", "MachineMaxVacateTime",
    "ExpectedMachineGracefulDrainingCompletion", "ExpectedMachineQuickDrainingCompletion",
    "ExpectedMachineGracefulDrainingBadput", "ExpectedMachineQuickDrainingBadput",
    "ExpectedMachineFastDrainingCompletion", "ExpectedMachineFastDrainingBadput",   # seed 000's names
    "TotalMachineDrainingBadput", "TotalMachineDrainingUnclaimedTime",
    "LastDrainStartTime", "LastDrainStopTime",
) + PILOT_ATTRIBUTES

IDLE_JOBS = "JobStatus == 1"
DEFAULT_CONSTRAINT = "PartitionableSlot =?= true"
# dc_startd.cpp hard-codes 20 s for DRAIN_JOBS / CANCEL_DRAIN_JOBS; a failure this slow is a timeout.
DRAIN_TIMEOUT = 20.0


class Bindings(Protocol):
    """The few HTCondor calls the adapter makes. Ads may be ``classad2.ClassAd`` or dicts."""

    error_types: tuple[type[BaseException], ...]

    def query_slots(self, constraint: str, projection: Sequence[str]) -> list[Mapping[str, Any]]:
        """The collector's slot ads matching ``constraint`` (one query)."""

    def query_startd(self, location: Mapping[str, Any], projection: Sequence[str]) -> list[Mapping[str, Any]]:
        """Every slot ad of one startd, asked of the startd itself (live, not the collector copy)."""

    def query_idle_jobs(self, projection: Sequence[str]) -> list[Mapping[str, Any]]:
        """The idle jobs of the pool's schedds."""

    def drain_jobs(self, location: Mapping[str, Any], schedule: str, check_expr: str, start_expr: str,
                   reason: str) -> str:
        """``Startd.drainJobs`` with ``CompletionType.Nothing``; returns the request id."""

    def cancel_drain_jobs(self, location: Mapping[str, Any], request_id: str) -> None:
        """``Startd.cancelDrainJobs(request_id)``."""

    def vacate(self, location: Mapping[str, Any], fast: bool) -> None:
        """``Startd.vacate``: soft-kill (graceful) or hard-kill (fast) every claim."""


class Htcondor2Bindings:
    """:class:`Bindings` on the official ``htcondor2`` bindings (or anything with its API).

    ``pool`` is the collector (None: the configured ``COLLECTOR_HOST``); ``schedds`` the schedd
    names to ask for idle jobs (empty: every schedd the collector knows). ``module`` defaults to
    ``htcondor2``; the tests pass the simulated pool's module here.
    Authorization comes from the HTCondor configuration (``SEC_*``, tokens), not from here.
    """

    def __init__(self, pool: str | None = None, schedds: Iterable[str] = (), *, module: Any = None,
                 query_timeout: float | None = None) -> None:
        if module is None:
            import htcondor2
            module = htcondor2
        self._htc = module
        if query_timeout:
            module.param["QUERY_TIMEOUT"] = str(int(query_timeout))
        self._pool = pool
        self._schedds = tuple(schedds)
        # socket.gaierror (an OSError) comes out of locate() for unresolvable names.
        self.error_types: tuple[type[BaseException], ...] = (module.HTCondorException, OSError)

    def _location(self, ad: Mapping[str, Any]) -> Any:
        import classad2

        if isinstance(ad, classad2.ClassAd):
            return ad
        return classad2.ClassAd({k: ad[k] for k in ("MyAddress", "Name", "Machine") if ad.get(k) is not None})

    def query_slots(self, constraint: str, projection: Sequence[str]) -> list[Any]:
        htc = self._htc
        return htc.Collector(self._pool).query(htc.AdType.Startd, constraint, list(projection))

    def query_startd(self, location: Mapping[str, Any], projection: Sequence[str]) -> list[Any]:
        htc = self._htc
        return htc.Collector(self._location(location)).query(htc.AdType.Startd, None, list(projection))

    def query_idle_jobs(self, projection: Sequence[str]) -> list[Any]:
        htc = self._htc
        collector = htc.Collector(self._pool)
        if self._schedds:
            locations = [collector.locate(htc.DaemonType.Schedd, name) for name in self._schedds]
        else:
            locations = collector.locateAll(htc.DaemonType.Schedd)
        jobs: list[Any] = []
        for loc in locations:
            if loc is not None:
                jobs.extend(htc.Schedd(loc).query(constraint=IDLE_JOBS, projection=list(projection)))
        return jobs

    def drain_jobs(self, location: Mapping[str, Any], schedule: str, check_expr: str, start_expr: str,
                   reason: str) -> str:
        htc = self._htc
        return htc.Startd(self._location(location)).drainJobs(
            drain_type=htc.DrainType[schedule.capitalize()],
            on_completion=htc.CompletionType.Nothing,
            check_expr=check_expr, start_expr=start_expr, reason=reason)

    def cancel_drain_jobs(self, location: Mapping[str, Any], request_id: str) -> None:
        self._htc.Startd(self._location(location)).cancelDrainJobs(request_id)

    def vacate(self, location: Mapping[str, Any], fast: bool) -> None:
        htc = self._htc
        htc.Startd(self._location(location)).vacate(htc.VacateType.Fast if fast else htc.VacateType.Graceful)


# ------------------------------------------------------------------------- pure helpers


def plain_ad(ad: Mapping[str, Any]) -> dict[str, Any]:
    """A plain dict of ``ad``: expressions evaluated in the ad, Undefined/Error left out."""
    import classad2

    if not isinstance(ad, classad2.ClassAd):
        return dict(ad)
    from nodemanager.classad_eval import plain_value

    out: dict[str, Any] = {}
    for key in ad.keys():
        value = ad[key]
        if isinstance(value, classad2.ExprTree):
            value = ad.eval(key)
        value = plain_value(value)
        if value is not None:
            out[key] = value
    return out


def _num(ad: Mapping[str, Any], key: str, default: float | None = None) -> float | None:
    """A numeric attribute as float (see :func:`~nodemanager.core.classify.ad_number`), else ``default``."""
    v = ad_number(ad, key)
    return default if v is None else v


def drain_check_expression(ad: Mapping[str, Any], schedule: DrainSchedule | str, *,
                           slack: float = 1200.0, factor: float = 1.25) -> str:
    """The ``check_expr`` that makes the startd refuse a drain decided on stale state (seed 000).

    * Node idle in the snapshot: refuse if any slot is a dynamic slot, the p-slot has dynamic slots,
      or a slot is claimed (``DynamicSlot =!= true`` is false on every dynamic slot ad).
    * Node busy in the snapshot (a deliberate drain of a busy node): defrag's guard, refuse if the
      startd's own estimate for this schedule is now much worse than the snapshot's
      (completion later than snapshot + ``slack``; badput above ``factor`` x snapshot + ``slack``).
    * Always: refuse if the startd restarted since the snapshot (``DaemonStartTime``).

    ``=?=``/``=!=`` keep undefined attributes from making the check "not a bool" (which refuses).
    """
    schedule = DrainSchedule(schedule)
    dslots = _num(ad, "NumDynamicSlots", 0.0) or 0.0
    parts: list[str]
    if dslots == 0 and not _children_busy(ad):
        parts = ["DynamicSlot =!= true",
                 "(NumDynamicSlots =?= 0 || NumDynamicSlots =?= undefined)",
                 '(State =?= "Unclaimed" || State =?= "Owner")']
    else:
        kind = "Graceful" if schedule is DrainSchedule.GRACEFUL else "Quick"
        parts = []
        done = _num(ad, f"ExpectedMachine{kind}DrainingCompletion")
        badput = _num(ad, f"ExpectedMachine{kind}DrainingBadput")
        if done is not None:
            parts.append(f"ExpectedMachine{kind}DrainingCompletion <= {int(done + slack)}")
        if badput is not None:
            parts.append(f"ExpectedMachine{kind}DrainingBadput <= {int(factor * badput + slack)}")
    started = _num(ad, "DaemonStartTime")
    if started is not None:
        parts.append(f"DaemonStartTime =?= {int(started)}")
    return " && ".join(parts) if parts else "true"


def _seconds(text: str | None) -> float | None:
    if not text or not text.strip():
        return None
    from nodemanager.config import parse_duration
    return float(parse_duration(text))


def _quote(text: str) -> str:
    """``text`` as a ClassAd string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _jobs(pslot: Mapping[str, Any], ads: Iterable[Mapping[str, Any]] | None) -> int:
    """How many jobs (dynamic slots) a startd runs, from its p-slot ad and its slot ads."""
    dynamic = sum(1 for a in ads or () if a.get("DynamicSlot") is True)
    return max(dynamic, int(_num(pslot, "NumDynamicSlots", 0.0) or 0))


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
    started = _num(ad, "DaemonStartTime")
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
                       started_at=_num(ad, "LastDrainStartTime", 0.0) or 0.0,
                       daemon_start=_num(ad, "DaemonStartTime"))


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
                 drain_timeout: float = DRAIN_TIMEOUT, extra_check: str | None = None) -> None:
        self.name = name
        self._b = bindings
        self._clock = clock
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

    @classmethod
    def from_settings(cls, settings: SchedulerSettings, *, clock: Callable[[], float] = time.time,
                      bindings: Bindings | None = None) -> "HTCondorScheduler":
        """The adapter for ``[Scheduler] type = htcondor``: ``collector`` (host[:port]; default the
        configured COLLECTOR_HOST), ``schedd`` (comma-separated names; default every schedd),
        ``cloud_id_attribute`` (default CloudInstanceID), ``constraint`` (which startds are ours),
        ``query_timeout`` (seconds, sets QUERY_TIMEOUT), ``drain_check`` (an extra ClassAd
        expression ANDed with the drain's check expression)."""
        o = settings.options
        if bindings is None:
            schedds = [s.strip() for s in o.get("schedd", "").split(",") if s.strip()]
            bindings = Htcondor2Bindings(o.get("collector") or None, schedds,
                                         query_timeout=_seconds(o.get("query_timeout")))
        extra_check = (o.get("drain_check") or "").strip() or None
        if extra_check is not None:
            from nodemanager.classad_eval import parse
            parse(extra_check)
        return cls(bindings, clock=clock, id_attribute=o.get("cloud_id_attribute") or "CloudInstanceID",
                   constraint=o.get("constraint") or DEFAULT_CONSTRAINT, extra_check=extra_check)

    # ---------------------------------------------------------------- poll

    def poll(self) -> SchedulerPoll:
        now = self._clock()
        try:
            raw = self._b.query_slots(self.constraint, self.projection)
        except self._b.error_types as exc:
            raise SchedulerError(f"collector query failed: {exc}") from None
        problems: list[RecordProblem] = []
        workers = self.workers_from_ads(raw, problems)
        try:
            jobs = self._b.query_idle_jobs(JOB_ATTRIBUTES)
        except self._b.error_types as exc:
            raise SchedulerError(f"schedd query failed: {exc}") from None
        demand = demand_from_jobs(jobs, problems)
        self.problem_log.report(problems)
        return SchedulerPoll(workers=workers, demand=demand, polled_at=now, problems=tuple(problems))

    def workers_from_ads(self, raw: Iterable[Mapping[str, Any]],
                         problems: list[RecordProblem] | None = None) -> tuple[Worker, ...]:
        """Workers from slot ads (one per startd), then :meth:`observe` them. An ad without a name
        is logged and skipped; unusable counts are appended to ``problems`` (the worker is kept,
        see :func:`worker_from_ad`); an ad that cannot be read at all is a SchedulerError."""
        workers: dict[str, Worker] = {}
        for r in raw:
            slot = "?"
            try:
                ad = plain_ad(r)
                slot = str(ad.get("Name") or ad.get("Machine") or "?")
                bad = slot_problems(ad, slot, r)
                w = worker_from_ad(ad, id_attribute=self.id_attribute, unusable=[p.field for p in bad])
            except ValueError as exc:
                log.warning("htcondor: ignoring a bad slot ad: %s", exc)
                continue
            except Exception as exc:  # noqa: BLE001 - hostile data: name the slot, never a bare traceback
                raise SchedulerError(f"slot {slot}: cannot read its ad ({type(exc).__name__}: {exc})",
                                     node=slot) from exc
            if problems is not None:
                problems.extend(bad)
            workers.setdefault(w.name, w)
        out = tuple(workers.values())
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

    def drain(self, worker: Worker, schedule: DrainSchedule, reason: str) -> DrainTicket:
        schedule = DrainSchedule(schedule)
        name = worker.name
        if worker.draining:
            self._count("refused")
            raise DrainRefused(f"{name}: already draining ({worker.drain_reason!r}, request "
                               f"{worker.drain_request_id}); one drain per node", node=name)
        location = self._location(name, worker.ad)
        now = self._clock()
        why = drain_reason(reason, now, tag=self.reason_tag)
        check = drain_check_expression(worker.ad, schedule, slack=self.slack, factor=self.badput_factor)
        if self.extra_check:
            check = f"{check} && ({self.extra_check})"
        started = _num(worker.ad, "DaemonStartTime")
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
                               daemon_start=_num(p, "DaemonStartTime"), schedule=schedule)
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
        elif _num(p, "DaemonStartTime") != _num(worker.ad, "DaemonStartTime"):
            detail = "the startd restarted since the snapshot"
        elif _jobs(p, fresh) > worker.running_jobs:
            detail = (f"it became busy since the snapshot ({_jobs(p, fresh)} jobs now, "
                      f"{worker.running_jobs} then)")
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
        ours, why = is_our_drain(p, ticket, tag=self.reason_tag)
        if not ours:
            return Confirmation(False, f"{ticket.worker}: {why}")
        bad = slot_problems(p, ticket.worker)
        if bad:
            return Confirmation(False, f"{bad[0]}: its job count cannot be trusted")
        seen = _num(p, "MyCurrentTime")
        if seen is None or seen <= ticket.started_at:
            return Confirmation(False, f"{ticket.worker}: state not newer than the drain start")
        if p.get("State") != "Drained" or p.get("Activity") != "Idle":
            return Confirmation(False, f"{ticket.worker}: still {p.get('State')}/{p.get('Activity')}")
        busy = [a for a in fresh
                if a is not p and (a.get("DynamicSlot") is True or a.get("State") != "Drained")]
        if busy or (_num(p, "NumDynamicSlots", 0.0) or 0) > 0:
            n = max(len(busy), int(_num(p, "NumDynamicSlots", 0.0) or 0))
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
        ours, why = is_our_drain(p, ticket, tag=self.reason_tag)
        if not ours:
            raise DrainRefused(f"{ticket.worker}: not cancelling: {why}", node=ticket.worker)
        try:
            self._b.cancel_drain_jobs(location, str(ticket.request_id))
        except self._b.error_types as exc:
            again = self._fresh(ticket.worker, location)
            q = pslot_of(again) if again else None
            if q is not None and not is_our_drain(q, ticket, tag=self.reason_tag)[0]:
                log.info("htcondor: %s: cancel failed (%s) but our drain is gone", ticket.worker, exc)
                return
            raise SchedulerError(f"{ticket.worker}: cancel of drain {ticket.request_id} failed: {exc}",
                                 node=ticket.worker) from None
        self._count("cancelled")
        log.info("htcondor: %s: drain %s cancelled", ticket.worker, ticket.request_id)

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        schedule = DrainSchedule(schedule)
        if schedule is DrainSchedule.GRACEFUL:
            return
        location, fresh, problem = self._ours_now(ticket)
        if problem:
            raise SchedulerError(f"{ticket.worker}: cannot escalate: {problem}", node=ticket.worker)
        assert fresh is not None
        p = pslot_of(fresh)
        assert p is not None
        ours, why = is_our_drain(p, ticket, tag=self.reason_tag)
        if not ours:
            raise DrainRefused(f"{ticket.worker}: not escalating: {why}", node=ticket.worker)
        try:
            self._b.vacate(location, schedule is DrainSchedule.FAST)
        except self._b.error_types as exc:
            raise SchedulerError(f"{ticket.worker}: vacate ({schedule}) failed: {exc}",
                                 node=ticket.worker) from None
        self._count("escalated", (ticket.worker, str(ticket.request_id), ticket.daemon_start, schedule.value))
        log.info("htcondor: %s: drain %s escalated to %s", ticket.worker, ticket.request_id, schedule)

    def node_destroyed(self, worker_name: str) -> None:
        """Nothing to tell HTCondor (the startd's ads go with the VM); forget its address."""
        with self._lock:
            self._ads.pop(worker_name, None)
            for what in ("completed", "escalated"):
                self._counted.pop((what, worker_name), None)
