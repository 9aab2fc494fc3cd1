"""What the core adds to the scheduler adapters' classification: the scheduler-independent rules.

Each adapter classifies its own records (``Worker.classified``: worker_state, why, idle since,
drained by someone else; see :mod:`nodemanager.scheduler.slurm_classify` and
:mod:`nodemanager.scheduler.htcondor_classify`). The core keeps what holds for any scheduler:

* no paired worker → ``unpaired``;
* any worker not heard from for ``node_stale_after`` seconds → ``down``;
* an idle-since time is never later than now;
* a worker drained (or draining) by someone else — a reason without our prefix, e.g. an
  administrator's ``admin: bad dimm`` — is left alone ("drained by someone else 2h 05m ago: <their
  reason>"): ``busy`` while jobs run on it, ``idle`` since the drain began once none does (paid for
  nothing: the status page lists it as paid idle), until ``reclaim_foreign_after`` (0: never) has
  passed since its drain began; then it is classed as its adapter says (:func:`classify_foreign`).
"""

from __future__ import annotations

from typing import NamedTuple, TypeGuard

from nodemanager.model import Worker
from nodemanager.tags import DRAIN_REASON_PREFIX
from nodemanager.text import duration
from policy_matrix.vocabulary import BUSY, DOWN, IDLE, UNPAIRED

__all__ = ["Classification", "classify_worker", "is_our_reason", "is_our_drain", "foreign_reason",
           "foreign_drain", "classify_foreign", "Foreign"]


class Classification(NamedTuple):
    """A worker_state, why (in words), and for idle workers the scheduler's idle-since time."""

    state: str
    why: str
    idle_since: float | None = None
    relabelled_by: str | None = None   # the LABELS reason that gave the state (None: the adapter's)


def classify_worker(worker: Worker | None, now: float, node_stale_after: float) -> Classification:
    """The worker_state of a cloud node's paired worker (None: ``unpaired``).

    A worker whose ``last_heard`` is more than ``node_stale_after`` ago is ``down``; a
    ``last_heard`` of 0 means "not reported" and is not taken as stale. Otherwise its adapter's
    classification, the idle-since time capped at ``now`` (0: unknown, left to the caller); a
    worker no adapter classified is left alone (``busy``).
    """
    if worker is None:
        return Classification(UNPAIRED, "no scheduler record for this node")
    if worker.last_heard > 0 and now - worker.last_heard > node_stale_after:
        return Classification(DOWN, f"not heard from for {now - worker.last_heard:.0f}s "
                                    f"(node_stale_after {node_stale_after:.0f}s)")
    c = worker.classified
    if c is None:
        return Classification(BUSY, f"{worker.scheduler} worker not classified by its adapter; "
                                    f"left alone")
    if c.state == IDLE and c.idle_since is not None:
        return Classification(IDLE, c.why, min(c.idle_since, now))
    return Classification(c.state, c.why)


def is_our_reason(reason: str | None) -> bool:
    """True if a scheduler drain reason is one we set (it carries our prefix)."""
    return reason is not None and reason.startswith(DRAIN_REASON_PREFIX)


def is_our_drain(worker: Worker | None) -> TypeGuard[Worker]:
    """The one test of the scheduler's record of a drain of ours: the worker drains with our
    reason prefix."""
    return worker is not None and worker.draining and is_our_reason(worker.drain_reason)


def foreign_reason(draining: bool, reason: str | None) -> str | None:
    """For adapters: someone else's reason for a drain (``"no reason given"`` if none), or None
    when the worker is not draining or the drain carries our prefix."""
    if not draining or is_our_reason(reason):
        return None
    return (reason or "").strip() or "no reason given"


def foreign_drain(worker: Worker | None) -> str | None:
    """Someone else's reason for draining ``worker``, as its adapter classified it (None: not
    draining, ours, or no worker)."""
    c = worker.classified if worker is not None else None
    return c.foreign_drain if c is not None else None


class Foreign(NamedTuple):
    """A worker someone else drains: its classification, whether it is left alone (not
    reclaimable yet) and, while reclaiming is ahead, when it becomes reclaimable."""

    cls: Classification
    left_alone: bool
    reclaim_at: float | None


def classify_foreign(c: Classification, reason: str, drain_since: float, now: float,
                     reclaim_after: float, *, idle: bool = False) -> Foreign:
    """How a worker someone else drains (``reason``) is classed: left alone until
    ``reclaim_after`` seconds (0: never) past ``drain_since`` (0: unknown, never), as ``busy``
    while jobs run on it and as ``idle`` (since its drain began, when known) once none does
    (``idle``): a paid node doing nothing, which no matrix rule gives back while theirs; then ``c``."""
    left = reclaim_after <= 0 or drain_since <= 0 or now < drain_since + reclaim_after
    if left:
        since = f" {duration(now - drain_since)} ago" if 0 < drain_since <= now else ""
        words = f"drained by someone else{since}: {reason}"
        until = None
        if reclaim_after > 0 and drain_since > 0:
            until = drain_since + reclaim_after
            words += f" (reclaimed after reclaim_foreign_after {reclaim_after:.0f}s)"
        if idle:
            return Foreign(Classification(IDLE, f"{words}; no job runs",
                                          drain_since if drain_since > 0 else c.idle_since), True, until)
        return Foreign(Classification(BUSY, words), True, until)
    return Foreign(Classification(c.state, f"drained by someone else for {now - drain_since:.0f}s, "
                                           f"past reclaim_foreign_after {reclaim_after:.0f}s: "
                                           f"{reason}; {c.why}", c.idle_since), False, None)
