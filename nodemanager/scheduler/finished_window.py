"""Which finished jobs a poll reports (``SchedulerPoll.finished``, for runtime prediction): those
that ended since the adapter's first poll and were not reported before, at most :data:`MAX_FINISHED`
a poll. Ends are accepted back to :data:`SLACK` seconds before the newest end reported, since a
scheduler may make a job's record visible a little after a later one's."""

from __future__ import annotations

from typing import Iterable

from nodemanager.model import FinishedJob

__all__ = ["FinishedWindow", "MAX_FINISHED", "SLACK"]

MAX_FINISHED = 1000
SLACK = 120.0


class FinishedWindow:
    """The ends already reported, from ``start`` (the first poll: jobs that ended before it are not
    this process's to learn)."""

    def __init__(self, start: float, slack: float = SLACK) -> None:
        self.start, self.slack = start, slack
        self.newest = start
        self._reported: dict[str, float] = {}   # job id -> end, for ends within the slack

    @property
    def since(self) -> float:
        """The earliest end a poll still asks for."""
        return max(self.start, self.newest - self.slack)

    def new(self, jobs: Iterable[FinishedJob], limit: int = MAX_FINISHED) -> tuple[FinishedJob, ...]:
        """The jobs not reported yet (the newest ``limit`` of them), now counted as reported."""
        since = self.since
        fresh = sorted((j for j in jobs if j.end >= since and j.job.job_id not in self._reported),
                       key=lambda j: j.end)[-limit:] if limit > 0 else []
        for j in fresh:
            self._reported[j.job.job_id] = j.end
            self.newest = max(self.newest, j.end)
        since = self.since
        self._reported = {k: end for k, end in self._reported.items() if end >= since}
        return tuple(fresh)
