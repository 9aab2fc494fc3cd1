"""A simulated HTCondor startd with one partitionable slot, following HTCondor's draining design.

It is a plain state machine on an injected time: every method takes ``now`` and first runs the
startd forward to it (:meth:`SimStartd.advance`). Jobs run in dynamic slots carved out of the
partitionable slot (p-slot); a drain (graceful / quick / fast) retires, vacates and kills them on
HTCondor's schedule; the ``ExpectedMachine*`` estimates and the ``TotalMachineDraining*`` totals are
those of ``ResMgr::compute_draining_attrs`` / ``publish_draining_attrs``. The ads themselves are
rendered by :class:`~nodemanager.sim.slot_ads.SlotAds`; jobs, dynamic slots and the drain command's
vocabulary live in ``sim/job.py``, ``sim/dynamic_slot.py`` and ``sim/drain_requests.py``.

What the simulation assumes where HTCondor leaves it open (documented in docs/htcondor.md):

* a soft-killed (vacating) job ignores SIGTERM: it runs on until the vacate time ends and is then
  hard-killed; one that exits on its own first is evicted all the same (as the real starter says);
* a hard kill takes ``kill_time`` seconds (default 0: the dynamic slot is gone at once);
* jobs are never suspended; a claim runs one job (no claim reuse: a finished job's dynamic slot is
  deleted and its resources go back to the p-slot);
* the badput of jobs the drain kills is drain badput, in core-seconds of their whole run time; a
  job hard-killed by ``condor_vacate`` is not (as on the real startd), and a graceful vacate leaves
  retiring claims retiring;
* the startd's own slot ads (a direct query, a drain's check expression) lack ``DaemonStartTime``,
  which only the collector's copy carries (:data:`COLLECTOR_ONLY`).

Refusals raise :class:`DrainError` with HTCondor's error codes; the simulated collector
(``nodemanager.sim.collector``) turns them into the bindings' generic exception.
"""

from __future__ import annotations

from typing import Any, Mapping

from nodemanager.classad.expressions import evaluate, is_true
from nodemanager.sim.drain_requests import (COMPLETIONS, DRAINING_ALREADY_IN_PROGRESS, DRAINING_CHECK_EXPR_FAILED,
                                            DRAINING_NO_MATCHING_REQUEST_ID, FAST, GRACEFUL, QUICK, SCHEDULES,
                                            DrainError)
from nodemanager.sim.dynamic_slot import BUSY, KILLING, RETIRING, VACATING, DSlot
from nodemanager.sim.job import Job, JobEnd
from nodemanager.sim.slot_ads import COLLECTOR_ONLY, SlotAds

__all__ = [
    "Job", "JobEnd", "SimStartd", "DrainError", "COLLECTOR_ONLY", "GRACEFUL", "QUICK", "FAST", "SCHEDULES", "COMPLETIONS",
    "DRAINING_ALREADY_IN_PROGRESS", "DRAINING_NO_MATCHING_REQUEST_ID", "DRAINING_CHECK_EXPR_FAILED",
]

_INF = float("inf")


class SimStartd(SlotAds):
    """One startd with a partitionable slot of ``cpus`` cores and ``memory`` MB.

    ``name`` is the machine name (``Machine``; the p-slot is ``slot1@name``). ``max_retirement`` and
    ``vacate_time`` are the machine's ``MaxJobRetirementTime`` / ``MachineMaxVacateTime``.
    ``attrs`` are extra attributes published in every slot ad (e.g. ``CloudInstanceID`` or a
    pilot's ``.pilot.ad`` values). Jobs that leave are appended to :attr:`ended` (callers pop them).
    ``gpus``: GPUs of the p-slot (``TotalSlotGPUs``; free ones in ``GPUs``), given to jobs by
    ``RequestGPUs``; a job's ``requirements`` must hold against the p-slot ad (its TARGET).
    """

    __slots__ = ("_meets", "_next_n", "_unclaimed_mark", "activity", "address", "alive", "attrs", "cpus",
                 "daemon_start", "drain_complete", "drain_completion", "drain_how", "drain_id",
                 "drain_reason", "drain_request", "draining", "dslots", "ended", "entered_activity",
                 "entered_state", "free_cpus", "free_gpus", "free_memory", "gpus", "graceful_end",
                 "job_starts", "jobs_killed_by_drain", "kill_time", "last_change", "last_drain_start",
                 "last_drain_stop", "max_retirement", "memory", "name", "next_event", "now",
                 "reclaim_deadline", "start_expr", "state",
                 "total_badput", "total_unclaimed", "vacate_time")  # no instance dict

    def __init__(self, name: str, cpus: int, memory: int, now: float, *, address: str | None = None,
                 max_retirement: float = 0.0, vacate_time: float = 600.0, kill_time: float = 0.0,
                 attrs: Mapping[str, Any] | None = None, gpus: int = 0) -> None:
        self.name = name
        self.gpus = int(gpus)
        self._meets: dict[str, bool] | None = None  # requirements text -> holds here (static attributes)
        self.address = address or f"<127.0.0.1:9618?alias={name}&sock=startd>"
        self.cpus = int(cpus)
        self.memory = int(memory)
        self.max_retirement = float(max_retirement)
        self.vacate_time = float(vacate_time)
        self.kill_time = float(kill_time)
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.alive = True
        self.ended: list[JobEnd] = []
        self.jobs_killed_by_drain = 0
        self.reclaim_deadline: float | None = None  # the spot notice relay's attribute
        self._boot(now)

    # ---------------------------------------------------------------- lifecycle

    def _boot(self, now: float) -> None:
        self.now = now
        self.last_change = now                  # when the state last changed (collector updates)
        self.daemon_start = now
        self.free_cpus = self.cpus
        self.free_memory = self.memory
        self.free_gpus = self.gpus
        self.dslots: dict[int, DSlot] = {}
        self._next_n = 1
        self.next_event = _INF
        self.state, self.activity = "Unclaimed", "Idle"
        self.entered_state = now
        self.entered_activity = now
        self.job_starts = 0
        self.draining = False
        self.drain_id = 0                       # per-process counter: restarts at 0
        self.drain_how = ""
        self.drain_reason: str | None = None
        self.drain_request: str | None = None
        self.drain_completion = "nothing"
        self.start_expr: str | None = None
        self.drain_complete = False
        self.last_drain_start: float | None = None
        self.last_drain_stop: float | None = None
        self.graceful_end = _INF                # coordinated retirement end of a graceful drain
        self.total_badput = 0.0
        self.total_unclaimed = 0.0
        self._unclaimed_mark = now
        self._grace_done: float | None = None
        self._quick_done: float | None = None
        self._estimate(now)

    def restart(self, now: float) -> list[JobEnd]:
        """Restart the startd: running jobs are killed, a new ``DaemonStartTime``, drain ids from 1."""
        self.advance(now)
        killed = self._kill_all(now)
        self._boot(now)
        return killed

    def stop(self, now: float) -> list[JobEnd]:
        """The VM went away: running jobs are killed and the startd is gone."""
        self.advance(now)
        killed = self._kill_all(now)
        self.alive = False
        self.next_event = _INF
        return killed

    def _kill_all(self, now: float) -> list[JobEnd]:
        out = [JobEnd(s.job, self.name, s.start, now, True, False) for s in self.dslots.values()]
        self.ended.extend(out)
        self.dslots.clear()
        return out

    # ---------------------------------------------------------------- time

    def advance(self, now: float) -> None:
        """Run every transition due up to ``now``, in time order."""
        if now < self.now:
            return
        while self.next_event <= now and self.alive:
            s = min(self.dslots.values(), key=lambda s: (s.event, s.n))
            self._fire(s, s.event)
            self._refresh_next()
        self.now = now

    def _refresh_next(self) -> None:
        self.next_event = min((s.event for s in self.dslots.values()), default=_INF)

    def _fire(self, s: DSlot, t: float) -> None:
        p = s.phase
        if p != KILLING and s.end <= t and s.end <= s.event:
            self._remove(s, s.end, killed=p == VACATING)
        elif p == RETIRING:
            s.retired_out = True
            self._evict(s, t)
        elif p == VACATING:
            self._to_killing(s, t)
        elif p == KILLING:
            self._remove(s, t, killed=True)

    def _evict(self, s: DSlot, t: float) -> None:
        """Soft-kill: Preempting/Vacating for the vacate time (hard-kill at once if it is 0)."""
        if s.vacate <= 0:
            self._to_killing(s, t)
            return
        s.phase, s.entered = VACATING, t
        self.last_change = t
        s.kill_at = t + s.vacate
        s.refresh()

    def _to_killing(self, s: DSlot, t: float) -> None:
        if self.kill_time <= 0:
            self._remove(s, t, killed=True)
            return
        s.phase, s.entered = KILLING, t
        self.last_change = t
        s.gone_at = t + self.kill_time
        s.refresh()

    def _remove(self, s: DSlot, t: float, *, killed: bool) -> None:
        self._estimate(t)                       # last recompute with the claim active (freeze rule)
        self._integrate(t)
        self.last_change = t
        del self.dslots[s.n]
        self.free_cpus += s.job.cpus
        self.free_memory += s.job.ram_mb
        self.free_gpus += s.job.gpus
        by_drain = killed and self.draining
        if by_drain and not s.vacated:  # the real startd counts a vacate's kills as no drain's badput
            self.total_badput += s.job.cpus * (t - s.start)
            self.jobs_killed_by_drain += 1
        self.ended.append(JobEnd(s.job, self.name, s.start, t, killed, by_drain,
                                 killed and s.retired_out))
        if not self.dslots:
            self._estimate(t)
        if self.draining:
            if self.drain_how == GRACEFUL and not s.awd:
                self._recoordinate(t)
            if not self.dslots and not self.drain_complete:
                self._complete_drain(t)
        self._refresh_next()

    def _integrate(self, t: float) -> None:
        """TotalMachineDrainingUnclaimedTime: unclaimed core-seconds while draining."""
        if self.draining and t > self._unclaimed_mark:
            self.total_unclaimed += self.free_cpus * (t - self._unclaimed_mark)
        self._unclaimed_mark = t

    # ---------------------------------------------------------------- jobs

    def accepts(self, job: Job, now: float) -> bool:
        """Would START accept ``job`` now and do its resources fit? (Drains force START false, or
        to the drain's ``start_expr`` for a graceful drain.)"""
        if not self.alive or job.cpus > self.free_cpus or job.ram_mb > self.free_memory:
            return False
        if self.reclaim_deadline is not None:
            return False  # deploy/htcondor's START: no new job once a reclaim notice is out
        if job.gpus > self.free_gpus or (job.requirements and not self._requirements(job, now)):
            return False
        if not self.draining:
            return True
        if self.drain_how != GRACEFUL or self.start_expr is None or self.drain_complete:
            return False
        text = self.start_expr.strip()
        if text.lower() in ("false", "0"):
            return False
        job_ad = {"RequestCpus": job.cpus, "RequestMemory": job.ram_mb, "ClusterId": job.id}
        return is_true(evaluate(text, self.pslot_ad(now), now, target=job_ad))

    def _requirements(self, job: Job, now: float) -> bool:
        text = job.requirements or ""
        meets = self._meets = self._meets if self._meets is not None else {}
        met = meets.get(text)
        if met is None:
            job_ad = {"RequestCpus": job.cpus, "RequestMemory": job.ram_mb, "RequestGPUs": job.gpus}
            met = meets[text] = is_true(evaluate(text, job_ad, now, target=self.pslot_ad(now)))
        return met

    def start_job(self, job: Job, now: float) -> int:
        """Start ``job`` in a new dynamic slot; returns the slot number. Caller checked :meth:`accepts`."""
        self.advance(now)
        self._integrate(now)
        n = self._next_n
        self._next_n += 1
        s = DSlot(n, job, now, self.max_retirement, self.vacate_time)
        if self.dslots:
            s.share_times(next(reversed(self.dslots.values())))
        if self.draining:
            s.awd = True                        # accepted while draining: no retirement of its own
            s.retire_end = now
            s.phase = RETIRING
            s.evict_at = max(now, self.graceful_end - s.vacate)
            s.refresh()
        self.dslots[n] = s
        self.last_change = now
        self.free_cpus -= job.cpus
        self.free_memory -= job.ram_mb
        self.free_gpus -= job.gpus
        self.job_starts += 1
        if s.event < self.next_event:
            self.next_event = s.event
        return n

    # ---------------------------------------------------------------- draining

    def drain(self, now: float, how: str = GRACEFUL, *, on_completion: str = "nothing",
              check_expr: str | None = None, start_expr: str | None = None,
              reason: str | None = None) -> str:
        """Start draining; returns the request id. Raises :class:`DrainError` 10001 when a
        drain is in progress and 10003 when ``check_expr`` is not true on every slot ad."""
        if how not in SCHEDULES:
            raise ValueError(f"unknown drain schedule {how!r}")
        if on_completion not in COMPLETIONS:
            raise ValueError(f"unknown drain completion {on_completion!r}")
        self.advance(now)
        if self.draining:
            raise DrainError(DRAINING_ALREADY_IN_PROGRESS, "Draining already in progress.")
        if check_expr is not None:
            for ad in self.live_slot_ads(now):
                try:
                    ok = is_true(evaluate(check_expr, ad, now))
                except ValueError:
                    ok = False
                if not ok:
                    raise DrainError(DRAINING_CHECK_EXPR_FAILED,
                                     f"Draining check expression ({check_expr}) is not true on {ad['Name']}.")
        self._integrate(now)
        self.drain_id += 1
        self.draining = True
        self.drain_complete = False
        self.drain_how = how
        self.drain_completion = on_completion
        self.drain_reason = reason if reason is not None else "by command"
        self.drain_request = str(self.drain_id)
        self.start_expr = start_expr if how == GRACEFUL else None
        self.last_drain_start = now
        self.last_change = now
        self.state, self.activity = "Drained", "Retiring"
        self.entered_state = self.entered_activity = now
        if how == GRACEFUL:
            for s in self.dslots.values():
                s.phase, s.entered = RETIRING, now
            self._recoordinate(now)
        else:
            for s in list(self.dslots.values()):
                if s.n not in self.dslots:
                    continue
                if how == QUICK:
                    self._evict(s, now)
                else:
                    self._to_killing(s, now)
        self._refresh_next()
        if not self.dslots and not self.drain_complete:
            self._complete_drain(now)
        return str(self.drain_id)

    def _recoordinate(self, now: float) -> None:
        """Graceful drains retire together: every job may run until the longest remaining retirement
        of the original jobs ends, and is soft-killed early enough to be gone by then."""
        originals = [s.retire_end for s in self.dslots.values() if not s.awd and s.phase == RETIRING]
        self.graceful_end = max([now, *originals])
        for s in list(self.dslots.values()):
            if s.phase == RETIRING and s.n in self.dslots:
                s.evict_at = max(now, s.evict_by(self.graceful_end))
                s.refresh()
                if s.evict_at <= now and s.end > now:
                    s.retired_out = True
                    self._evict(s, now)

    def _complete_drain(self, t: float) -> None:
        self.drain_complete = True
        self.last_change = t
        self.state, self.activity = "Drained", "Idle"
        self.entered_activity = t
        if self.drain_completion in ("resume", "reconfig"):
            self._stop_draining(t)
        elif self.drain_completion == "restart":
            self._boot(t)
        elif self.drain_completion == "exit":
            self.alive = False
            self.next_event = _INF

    def cancel(self, now: float, request_id: str | None = None) -> None:
        """Cancel the drain (a no-op when not draining). A ``request_id`` that is not the current one
        raises :class:`DrainError` 10002. Retiring jobs go back to Busy; evictions under way go on."""
        self.advance(now)
        if not self.draining:
            return
        if request_id and request_id != self.drain_request:
            raise DrainError(DRAINING_NO_MATCHING_REQUEST_ID,
                             f"No matching draining request id {request_id}.")
        self._stop_draining(now)

    def _stop_draining(self, now: float) -> None:
        self._integrate(now)
        self.draining = False
        self.drain_complete = False
        self.drain_reason = None
        self.drain_request = None
        self.start_expr = None
        self.graceful_end = _INF
        self.last_drain_stop = now
        self.last_change = now
        self.state, self.activity = "Unclaimed", "Idle"
        self.entered_state = self.entered_activity = now
        for s in self.dslots.values():
            if s.phase == RETIRING:
                s.phase, s.entered, s.evict_at = BUSY, now, _INF
                s.refresh()
        self._refresh_next()

    def vacate(self, now: float, *, fast: bool = False) -> None:
        """``condor_vacate`` of every claim, as the real startd does it: graceful retires busy
        claims (evicted when their retirement runs out; a retiring claim is left as it is, so a
        graceful vacate does not speed up a graceful drain); fast hard-kills every job now, and
        those kills are no drain's badput even while the startd drains."""
        self.advance(now)
        for s in list(self.dslots.values()):
            if s.n not in self.dslots:
                continue
            if fast and s.phase in (BUSY, RETIRING, VACATING):
                s.vacated = True
                self._to_killing(s, now)
            elif not fast and s.phase == BUSY:
                s.phase, s.entered = RETIRING, now
                s.evict_at = max(now, s.retire_end - s.vacate)
                s.refresh()
                if s.evict_at <= now and s.end > now:
                    self._evict(s, now)
        self._refresh_next()


