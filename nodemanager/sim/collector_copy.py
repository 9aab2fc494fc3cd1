"""The collector's copy of a simulated pool's startd ads, as :meth:`SimPool.poll` reports them.

A startd's ad reaches the collector when its state changes and every ``update_interval`` seconds
(UPDATE_INTERVAL): a poll looks only at the startds that changed or whose ad is due again, and an ad
due again with no change is not parsed again.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import Callable, Iterable

from nodemanager.model import Demand, FinishedJob, Worker, frozen_map
from nodemanager.scheduler import HTCondorScheduler, SchedulerPoll, worker_from_ad
from nodemanager.scheduler.htcondor_ads import graceful_eviction_at
from nodemanager.sim.job import running_job
from nodemanager.sim.startd import SimStartd

__all__ = ["CollectorCopy"]


def _shared_floats(values: Iterable[float]) -> list[float]:
    """``values``, equal ones as one object (jobs started together end together: one float)."""
    seen: dict[float, float] = {}
    return [seen.setdefault(v, v) for v in values]


class CollectorCopy:
    """The poll side of :class:`~nodemanager.sim.pool.SimPool` (mixed into it)."""

    now: float
    update_interval: float
    id_attribute: str
    adapter: HTCondorScheduler
    _clock: Callable[[], float]
    _joined: dict[str, SimStartd]
    _version: dict[str, int]                         # node id -> change counter
    _rendered: dict[str, tuple[int, float, Worker]]  # node id -> (version, at, worker)
    _workers: dict[str, Worker | None]               # node id -> its worker, in join order
    _unrendered: set[str]                            # node ids changed since the last poll
    _resend: list[tuple[float, str, float]]          # (when its ad is sent again, node id, rendered at)
    _finished: list[FinishedJob]                     # jobs completed since the last poll

    def advance(self, now: float | None = None) -> None:
        """Run the pool forward (the pool's own)."""
        raise NotImplementedError

    def demand(self) -> tuple[Demand, ...]:
        """The idle jobs' demand (the negotiator's)."""
        raise NotImplementedError

    def poll(self) -> SchedulerPoll:
        """Workers as the collector has them: a startd's ad is sent again when its state changed or
        ``update_interval`` seconds passed (HTCondor's UPDATE_INTERVAL), so ``LastHeardFrom`` and
        the time-dependent estimates are up to ``update_interval`` old, state changes are not."""
        self.advance(self._clock())
        now = self.now
        due, self._unrendered = self._unrendered, set()
        resend, later = self._resend, []
        again = now + self.update_interval * (1 - 1e-12)  # one float for every ad sent now
        # the heap's times are a hair early: the test that decides is the one below, as it always was
        while resend and resend[0][0] <= now:
            entry = heapq.heappop(resend)
            nid, at = entry[1], entry[2]
            cached = self._rendered.get(nid)
            if cached is None or cached[1] != at or nid in due:
                continue  # gone, or rendered again since (that render has its own entry)
            if now - at >= self.update_interval:
                due.add(nid)
            else:
                later.append(entry)
        for item in later:
            heapq.heappush(resend, item)
        workers = self._workers
        for nid in due:
            st = self._joined.get(nid)
            if st is None or not st.alive:
                workers.pop(nid, None)
                continue
            version = self._version[nid]
            cached = self._rendered.get(nid)
            if cached is not None and cached[0] == version and now - cached[1] < self.update_interval:
                continue  # the collector's copy is current
            w = self.render(st, now, cached[2] if cached is not None and cached[0] == version else None)
            self._rendered[nid] = (version, now, w)
            workers[nid] = w
            heapq.heappush(resend, (again, nid, now))
        out = tuple(w for w in workers.values() if w is not None)
        self.adapter.observe(out)
        finished, self._finished = tuple(self._finished), []
        return SchedulerPoll(workers=out, demand=self.demand(), polled_at=now, finished=finished)

    def render(self, st: SimStartd, now: float, before: Worker | None = None) -> Worker:
        """The worker of ``st``'s ad sent now. ``before``: its worker from the ad last sent, when
        the startd has not changed since: then only ``LastHeardFrom`` and the time-dependent
        estimates moved (none of which the adapter's fields or classification read but
        ``last_heard`` and ``retirement_end``), so the new ad replaces the old one without parsing it again."""
        ad = st.pslot_ad(now)
        ad["LastHeardFrom"] = ad["MyCurrentTime"]  # int(now), the ad's own object
        if before is not None:
            # the retirement end follows the time once the jobs' retirement has run out
            return replace(before, ad=frozen_map(ad), last_heard=float(int(now)),
                           retirement_end=graceful_eviction_at(ad))
        return self._with_job_ends(worker_from_ad(ad, id_attribute=self.id_attribute), st)

    @staticmethod
    def _with_job_ends(w: Worker, st: SimStartd) -> Worker:
        if not st.dslots:
            return w
        running = list(st.running())
        ends = tuple(sorted(_shared_floats(start + job.walltime for job, start in running if job.walltime)))
        named = tuple(running_job(job, start) for job, start in running if job.owner is not None)
        return replace(w, job_end_times=ends, jobs=named) if ends or named else w
