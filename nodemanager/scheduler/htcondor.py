"""The HTCondor adapter: workers from startd ads, demand from idle jobs, drains as a transaction.

The calls into the official bindings (``htcondor2``) are kept thin, behind
:class:`~nodemanager.scheduler.htcondor_bindings.Bindings` (:mod:`~nodemanager.scheduler.htcondor_bindings`);
the drain transaction's pure parts (reason, check expression, "is this drain ours") are in
:mod:`~nodemanager.scheduler.htcondor_drain`. Everything else here is plain Python on plain dict ads.

Per cycle, :meth:`HTCondorScheduler.poll` makes **one** collector query of partitionable-slot ads
(with a projection; with runtime prediction on, the claimed dynamic slots too, see
:mod:`~nodemanager.scheduler.htcondor_running`) and one idle-job query per schedd, and reads each ad once (linear in startds +
jobs).

Hostile or broken values in ads (``RequestMemory = real("INF")``, ``Cpus = undefined``): see
:mod:`nodemanager.scheduler.htcondor_ads`. The poll succeeds; each problem is warned about once an
hour (:class:`~nodemanager.scheduler.records.ProblemLog`) and returned in ``SchedulerPoll.problems``.

The drain transaction (drain, confirm, cancel, escalate) is
:class:`~nodemanager.scheduler.htcondor_transaction.DrainTransaction`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from nodemanager.model import FinishedJob, Size, Worker
from nodemanager.scheduler.draining_stats import DrainingStats, DrainingStatsRecorder
from nodemanager.scheduler.port import DRAIN_REASON_PREFIX, SchedulerError, SchedulerPoll
from nodemanager.scheduler.htcondor_ads import (JOB_ATTRIBUTES, demand_from_jobs, machine_ad,
                                                slot_problems, worker_from_ad)
from nodemanager.scheduler.htcondor_attributes import (DEFAULT_CONSTRAINT, PILOT_ATTRIBUTES,
                                                       SLOT_ATTRIBUTES)
from nodemanager.scheduler.htcondor_bindings import Bindings, Htcondor2Bindings, plain_ad
from nodemanager.scheduler.htcondor_history import (HISTORY_ATTRIBUTES, finished_from_history,
                                                    history_constraint, history_stop)
from nodemanager.scheduler.finished_window import FinishedWindow
from nodemanager.scheduler.htcondor_match import WALLTIME_ATTRIBUTE, HTCondorMatcher
from nodemanager.scheduler.htcondor_running import (RUNNING_ATTRIBUTES, is_dynamic, running_by_machine,
                                                    limit_ends, slot_counts, with_dynamic_slots)
from nodemanager.scheduler.htcondor_steer import HTCondorSteering
from nodemanager.scheduler.htcondor_transaction import DrainTransaction
from nodemanager.scheduler.htcondor_drain import DRAIN_TIMEOUT
from nodemanager.scheduler.records import ProblemLog, RecordProblem
from nodemanager.scheduler.htcondor_unchanged import AdMemory
from nodemanager.configuration.settings import SchedulerSettings
from nodemanager.scheduler.htcondor_options import NUMBERS

__all__ = ["HTCondorScheduler", "SLOT_ATTRIBUTES", "PILOT_ATTRIBUTES", "DEFAULT_CONSTRAINT",
           "worker_from_ad"]

log = logging.getLogger(__name__)

def _seconds(text: str | None) -> float | None:
    if not text or not text.strip():
        return None
    return float(NUMBERS["query_timeout"](text))



# ------------------------------------------------------------------------- the adapter


class HTCondorScheduler(DrainTransaction):
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
                 walltime_attribute: str = WALLTIME_ATTRIBUTE, finished_limit: int = 0) -> None:
        self.name = name
        # runtime prediction: jobs completed since the last poll, from the schedds' history (0: not read)
        self.finished_limit = finished_limit
        self.walltime_attribute = walltime_attribute
        self._finished_window: FinishedWindow | None = None
        # with sizes, each idle job is matched to the sizes that can run it
        self.matcher = (HTCondorMatcher(sizes, machine_start, walltime_attribute, by_owner=finished_limit > 0)
                        if sizes else None)
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
        if finished_limit > 0:   # runtime prediction: the dynamic slots' jobs too (htcondor_running)
            attrs += [a for a in (*RUNNING_ATTRIBUTES, walltime_attribute) if a not in attrs]
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
        self._memory = AdMemory()  # last poll's readings and workers, reused while the ads are equal

    @classmethod
    def from_settings(cls, settings: SchedulerSettings, *, clock: Callable[[], float] = time.time,
                      bindings: Bindings | None = None, sizes: Sequence[Size] = (),
                      finished_limit: int = 0) -> "HTCondorScheduler":
        """The adapter for ``[Scheduler] type = htcondor``: ``collector`` (host[:port]; default the
        configured COLLECTOR_HOST), ``schedd`` (comma-separated names; default every schedd),
        ``cloud_id_attribute`` (default CloudInstanceID), ``constraint`` (which startds are ours),
        ``query_timeout`` (seconds, sets QUERY_TIMEOUT), ``drain_check`` (an extra ClassAd
        expression ANDed with the drain's check expression), ``machine_start`` (the execute
        nodes' START, for matching idle jobs to ``sizes``), ``walltime_attribute`` (the job
        attribute holding its requested walltime in seconds; default AllowedJobDuration).
        ``finished_limit``: how many completed jobs a poll reads from the history (0: none)."""
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
                   walltime_attribute=(o.get("walltime_attribute") or "").strip() or WALLTIME_ATTRIBUTE,
                   finished_limit=finished_limit)

    # ---------------------------------------------------------------- poll

    def poll(self) -> SchedulerPoll:
        now = self._clock()
        try:
            constraint = with_dynamic_slots(self.constraint) if self.finished_limit > 0 else self.constraint
            raw = self._b.query_slots(constraint, self.projection)
        except self._b.error_types as exc:
            raise SchedulerError(f"collector query failed: {exc}") from None
        problems: list[RecordProblem] = []
        workers = self.workers_from_ads(raw, problems)
        if self.matcher is None:
            by_owner = self.finished_limit > 0
            demand = demand_from_jobs(self._idle_jobs((*JOB_ATTRIBUTES, "Owner") if by_owner else JOB_ATTRIBUTES),
                                      problems, by_owner=by_owner)
        else:
            demand = self.matcher.demand_from(self._idle_jobs, problems)
        self.problem_log.report(problems)
        finished = self._finished(now) if self.finished_limit > 0 else ()
        return SchedulerPoll(workers=workers, demand=demand, polled_at=now, problems=tuple(problems),
                             finished=finished)

    def _finished(self, now: float) -> tuple[FinishedJob, ...]:
        """The jobs completed since the last poll (a history that cannot be read: none, one line)."""
        if self._finished_window is None:
            self._finished_window = FinishedWindow(now)
        since = self._finished_window.since
        try:
            ads = self._b.query_history(history_constraint(since), HISTORY_ATTRIBUTES, self.finished_limit,
                                        history_stop(since))
        except self._b.error_types as exc:
            log.warning("htcondor: schedd history query failed (%s); no finished runtimes learned this poll", exc)
            return ()
        return self._finished_window.new(finished_from_history(ads, self.walltime_attribute), self.finished_limit)

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
        SchedulerError. With runtime prediction on, dynamic slots' ads name the workers' running
        jobs (``Worker.jobs``) instead."""
        # machine -> its ads, or last poll's very worker while its one ad is unchanged (in the
        # order the machines first appear)
        machines: dict[str, list[Mapping[str, Any]] | Worker] = {}
        dslots: list[tuple[str, Mapping[str, Any]]] = []
        bad: dict[str, list[RecordProblem]] = {}
        memory = self._memory
        whole = self.finished_limit <= 0  # else dynamic slots name running jobs: no machine is plain
        for r in raw:
            seen = memory.reading(r)
            if seen is not None:  # an ad equal to the one last read under its name
                ad, slot, found, kept = seen
                # the worker its one ad gave last poll, if that was the machine's worker then
                if (kept is not None and whole and kept.name not in machines
                        and memory.workers.holds(kept.name, kept)):
                    machines[kept.name] = kept
                    continue
            else:
                slot = "?"
                try:
                    ad = plain_ad(r)
                    slot = str(ad.get("Name") or ad.get("Machine") or "?")
                    found = slot_problems(ad, slot, r)
                except Exception as exc:  # noqa: BLE001 - hostile data: name the slot, never a bare traceback
                    raise SchedulerError(f"slot {slot}: cannot read its ad ({type(exc).__name__}: {exc})",
                                         node=slot) from exc
                memory.read(r, (ad, slot, found, None))
            machine = ad.get("Machine")
            key = machine if isinstance(machine, str) and machine else slot.split("@", 1)[-1]
            if not whole and is_dynamic(ad):
                dslots.append((key, ad))
                continue
            ads = machines.get(key)
            if ads is None:
                machines[key] = [ad]
            elif isinstance(ads, list):
                ads.append(ad)
            else:  # a second slot of a machine last seen with one: read it whole
                machines[key] = [ads.ad, ad]
            if found:
                bad.setdefault(key, []).extend(found)
        running = running_by_machine(dslots, {k: slot_counts(ads) for k, ads in machines.items()
                                              if isinstance(ads, list)},
                                     self.walltime_attribute, problems if problems is not None else []
                                     ) if dslots else {}
        workers: list[Worker] = []
        no_problems: list[RecordProblem] = []
        for key, ads in machines.items():
            if not isinstance(ads, list):  # last poll's worker, its one ad unchanged
                workers.append(memory.unchanged(key))
                continue
            found = bad.get(key, no_problems)
            # everything the worker is built from: an equal source gives last poll's very worker
            plain = len(ads) == 1 and not found and key not in running  # the worker's ad is the source
            source: Any = ads[0] if plain else (ads, [p.field for p in found], running.get(key))
            kept = memory.worker(key, source)
            if kept is not None:
                if problems is not None:
                    problems.extend(found)
                workers.append(kept)
                continue
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
            if key in running:
                w = replace(w, jobs=running[key], job_end_times=limit_ends(running[key]))
            workers.append(memory.built(key, source, plain, w))
        memory.end_poll()
        out = tuple(workers)
        self.observe(out)
        return out

    def observe(self, workers: Sequence[Worker]) -> None:
        """Remember each startd's last ad (its address for drains) and record draining totals."""
        ads = {w.name: w.ad for w in workers}
        with self._lock:
            self._ads = ads
            self.recorder.observe(workers)

    def draining_stats(self) -> DrainingStats:
        """Draining badput/unclaimed time per node and in total, and counts of our drain actions."""
        with self._lock:
            return self.recorder.stats()

    def steer(self, ranks: Sequence[tuple[Worker, int | None]]) -> int:
        """Placement steering: a machine attribute (:mod:`nodemanager.scheduler.htcondor_steer`)."""
        if self.send_gate is not None:
            for worker, _ in ranks:
                self.send_gate(worker.name)
        return HTCondorSteering(self._b).steer(ranks)

    def node_destroyed(self, worker_name: str) -> None:
        """Nothing to tell HTCondor (the startd's ads go with the VM); forget its address."""
        with self._lock:
            self._ads.pop(worker_name, None)
            for key in [k for k in self._renewed if k[0] == worker_name]:
                del self._renewed[key]
            for what in ("completed", "escalated"):
                self._counted.pop((what, worker_name), None)
