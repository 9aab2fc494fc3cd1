"""The scheduler port: what the controller needs from HTCondor, SLURM or the simulated pool.

One :meth:`Scheduler.poll` per cycle returns every worker and the queue demand. Drains are a
transaction (the draining design): :meth:`Scheduler.drain` carries a guard so the scheduler refuses if the
node became busy since the snapshot, and :meth:`Scheduler.confirm_drained` re-reads fresh state
before any destroy.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from nodemanager.model import Demand, FinishedJob, Worker
from nodemanager.scheduler.draining_stats import DrainingStats
from nodemanager.scheduler.records import RecordProblem
from nodemanager.tags import DRAIN_REASON_PREFIX

__all__ = ["Scheduler", "SchedulerPoll", "SchedulerError", "DrainRefused", "DrainTicket", "is_denial",
           "DrainSchedule", "Confirmation", "DRAIN_REASON_PREFIX"]


class DrainSchedule(str, enum.Enum):
    GRACEFUL = "graceful"  # honour retirement time, then evict
    QUICK = "quick"        # soft-kill now, honour vacate time
    FAST = "fast"          # hard-kill now

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class SchedulerPoll:
    """``problems``: the unusable values this poll met (jobs left out of demand, node fields not used)."""

    workers: tuple[Worker, ...]
    demand: tuple[Demand, ...]
    polled_at: float
    problems: tuple[RecordProblem, ...] = ()
    # jobs completed since the previous poll, where the adapter learns them (runtime prediction)
    finished: tuple[FinishedJob, ...] = ()


@dataclass(frozen=True, slots=True)
class DrainTicket:
    """Proof of a drain we started: enough to recognise it later, even across restarts of either
    side (HTCondor request ids restart at 1 when the startd restarts, hence ``daemon_start``)."""

    worker: str
    request_id: str
    reason: str
    started_at: float
    daemon_start: float | None = None
    schedule: DrainSchedule = DrainSchedule.GRACEFUL


@dataclass(frozen=True, slots=True)
class Confirmation:
    """The answer to "may this node be destroyed now?" from fresh scheduler state."""

    ok: bool
    reason: str


# what SLURM and HTCondor say when this user may not do what it asked (not a passing fault)
_DENIAL = re.compile(r"invalid user id|access/permission denied|permission denied|not authorized|"
                     r"authorization (?:failed|failure)|authentication (?:failed|failure|error)|"
                     r"user not authorized|unauthorized", re.IGNORECASE)


def is_denial(message: str) -> bool:
    """Whether a scheduler's error text says this user lacks the right (or the credentials) for
    the call: ``slurm_update error: Invalid user id``, ``Access/permission denied``, HTCondor's
    ``PERMISSION DENIED`` and authentication failures."""
    return _DENIAL.search(message) is not None


class SchedulerError(Exception):
    """A scheduler call failed (unreachable, timeout, bad reply). ``node`` names the node, if any;
    ``denied``: the scheduler refused it for lack of rights or credentials (never transient)."""

    def __init__(self, message: str, *, node: str | None = None, transient: bool = True,
                 denied: bool = False) -> None:
        super().__init__(message)
        self.node = node
        self.transient = transient and not denied
        self.denied = denied


class DrainRefused(SchedulerError):
    """The scheduler refused the drain (already draining, node busy since the snapshot, no rights)."""

    def __init__(self, message: str, *, node: str | None = None) -> None:
        super().__init__(message, node=node, transient=False)


@runtime_checkable
class Scheduler(Protocol):
    name: str

    def poll(self) -> SchedulerPoll:
        """All workers and the queue demand, from one query of each (never per node)."""

    def drain(self, worker: Worker, schedule: DrainSchedule, reason: str) -> DrainTicket:
        """Start draining; refuse (DrainRefused) if the node has taken work since ``worker`` was read."""

    def cancel_drain(self, ticket: DrainTicket) -> None:
        """Cancel our drain so the node takes jobs again."""

    def confirm_drained(self, ticket: DrainTicket) -> Confirmation:
        """From fresh state: is the node fully drained, by *our* drain, with nothing running?"""

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        """Make our running drain harsher (quick: soft-kill now; fast: hard-kill now)."""

    def node_destroyed(self, worker_name: str) -> None:
        """Tell the scheduler the node is gone (SLURM: mark it down; HTCondor: nothing to do)."""

    def draining_stats(self) -> DrainingStats:
        """What draining cost and how our drains went, totals since this adapter started."""

    # Optional: ``node_booted(worker_name, cloud_id)``: a new VM took the name (SLURM writes its
    # instance id into the node's record, where one names the previous VM).
    # Optional (placement steering, ``[Daemon] steering``): ``steer(ranks) -> int`` takes
    # (worker, rank) pairs, rank 1 the node new jobs should fill first and None the site's own
    # setting back, makes the scheduler prefer them so and returns the calls it made.
