"""What happened in a simulated pool so far: jobs, waits, badput and drain counts."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PoolStats"]


@dataclass(frozen=True, slots=True)
class PoolStats:
    """What happened in the pool so far. Core-seconds are cores x seconds."""

    submitted: int = 0
    started: int = 0
    completed: int = 0
    killed: int = 0
    killed_by_drain: int = 0
    evicted: int = 0                 # ... of which a graceful drain's retirement end evicted
    idle: int = 0
    running: int = 0
    wait_total: float = 0.0
    wait_max: float = 0.0
    badput: float = 0.0              # core-seconds of every killed job's lost run time
    drain_badput: float = 0.0        # ... of jobs killed by drains (incl. escalations)
    used: float = 0.0                # core-seconds of completed jobs
    drains_started: int = 0
    drains_refused: int = 0
    drains_cancelled: int = 0
    drains_completed: int = 0
    drains_escalated: int = 0

    @property
    def wait_mean(self) -> float:
        return self.wait_total / self.started if self.started else 0.0
