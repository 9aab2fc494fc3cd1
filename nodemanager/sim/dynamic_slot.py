"""A dynamic slot: one job carved out of a partitionable slot, and the phase a drain has it in."""

from __future__ import annotations

from nodemanager.sim.job import Job

__all__ = ["DSlot", "BUSY", "RETIRING", "VACATING", "KILLING", "PHASE_STATE"]

_INF = float("inf")

# Dynamic-slot phases: (State, Activity).
BUSY, RETIRING, VACATING, KILLING = 0, 1, 2, 3
PHASE_STATE = {
    BUSY: ("Claimed", "Busy"),
    RETIRING: ("Claimed", "Retiring"),
    VACATING: ("Preempting", "Vacating"),
    KILLING: ("Preempting", "Killing"),
}


class DSlot:
    """A dynamic slot running one job."""

    __slots__ = ("n", "job", "start", "end", "phase", "entered", "retire_end", "evict_at", "kill_at",
                 "gone_at", "awd", "vacate", "event", "vacated", "retired_out", "own")

    def __init__(self, n: int, job: Job, start: float, mjrt: float, vacate: float) -> None:
        self.n = n
        self.job = job
        self.start = start
        self.end = start + job.runtime          # natural completion
        self.phase = BUSY
        self.entered = start
        retire = mjrt if job.max_retirement is None else min(mjrt, job.max_retirement)
        self.retire_end = start + max(0.0, retire)  # when its own retirement promise runs out
        # a job-dependent retirement below the machine's: the real startd evicts the job when its
        # own runs out, whatever the other jobs' retirement (no coordination carries it)
        self.own = retire < mjrt
        self.evict_at = _INF
        self.kill_at = _INF
        self.gone_at = _INF
        self.awd = False                        # AcceptedWhileDraining
        self.vacate = vacate
        self.event = self.end
        self.vacated = False                    # hard-killed by condor_vacate, not by the drain
        self.retired_out = False                # evicted at a graceful drain's retirement end

    def share_times(self, last: DSlot) -> None:
        """Hold ``last``'s end and retirement times when equal to this (just started) slot's: jobs
        started together often end together, and 300,000 slots' times are 300,000 floats."""
        if last.end == self.end:
            self.end = self.event = last.end
        if last.retire_end == self.retire_end:
            self.retire_end = last.retire_end

    def evict_by(self, coordinated_end: float) -> float:
        """When a graceful drain whose jobs retire together until ``coordinated_end`` soft-kills
        this job: early enough to be gone by then, or by its own retirement's end if lower."""
        return (min(coordinated_end, self.retire_end) if self.own else coordinated_end) - self.vacate

    def refresh(self) -> None:
        p = self.phase
        if p == BUSY:
            self.event = self.end
        elif p == RETIRING:
            self.event = min(self.end, self.evict_at)
        elif p == VACATING:
            self.event = min(self.end, self.kill_at)
        else:
            self.event = self.gone_at

