"""The controller's memory for ``wait_grace = arrivals``: the recent instants new jobs were seen.

Each poll, the jobs that arrived since the poll before are the growth of the queued demand (jobs
counted) plus the jobs seen running for the first time (by job id): a job queued and then started
counts once, at the poll it was first seen. The instants of the polls with arrivals are kept (how
many jobs came at one instant does not matter to :func:`nodemanager.core.arrival_keeper.keep_until`,
which reads the gaps between them). The first poll only sets what was already there. Bounded: the
last :data:`KEEP` instants within :data:`KEEP_SECONDS`. Kept in memory only: a restart (or a new HA
leader) learns afresh, and until :data:`nodemanager.core.arrival_keeper.MIN_GAPS` gaps are seen the
configured ``idle_grace`` holds.
"""

from __future__ import annotations

from collections import deque

from nodemanager.scheduler.port import SchedulerPoll

__all__ = ["ArrivalMemory", "KEEP", "KEEP_SECONDS"]

KEEP = 200
KEEP_SECONDS = 86400.0


class ArrivalMemory:
    """The recent arrival instants (see the module doc)."""

    def __init__(self) -> None:
        self._times: deque[float] = deque(maxlen=KEEP)
        self._running: set[str] | None = None   # job ids running at the poll before; None: no poll yet
        self._queued = 0

    def observe(self, poll: SchedulerPoll, now: float) -> tuple[float, ...]:
        """Take in one poll at ``now``; the remembered arrival instants, oldest first."""
        running = {j.job_id for w in poll.workers for j in w.jobs}
        queued = sum(d.count for d in poll.demand)
        if self._running is not None:
            started = len(running - self._running)
            if queued - self._queued + started > 0 and (not self._times or now > self._times[-1]):
                self._times.append(now)
        self._running, self._queued = running, queued
        while self._times and now - self._times[0] > KEEP_SECONDS:
            self._times.popleft()
        return tuple(self._times)
