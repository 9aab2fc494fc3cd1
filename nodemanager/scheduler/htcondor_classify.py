"""HTCondor startd ads to the matrix's ``worker_state`` (HTCondor's draining design):
the HTCondor adapter's classifier.

Partitionable-slot (p-slot) startds, following HTCondor's draining design and the draining notes:

* Drained/Idle with no dynamic slots → ``down``: drained, ready to go.
* any jobs (``NumDynamicSlots`` > 0, a ``Claimed`` child, a Claimed/Preempting/Matched static slot),
  also while Draining or Retiring → ``busy``.
* Drained/Retiring, or ``Draining`` without jobs yet, → ``busy``: the drain has not finished.
* Unclaimed/Idle, no dynamic slots, not draining → ``idle``.
* Owner (START is false; also the startd's first seconds) → ``idle``: it runs nothing, and idle
  grace (not ``down``) protects a startd that is merely starting up.
* Backfill → ``idle``: backfill work is expendable.
* no ``State`` → ``unpaired`` (the ad is not a usable startd yet).

The idle-since time of a p-slot is the latest of the worker's ``state_since``,
``EnteredCurrentState`` and, while no claim is active, ``ExpectedMachineGracefulDrainingCompletion``
(the startd freezes it at the time the last claim ended; a p-slot stays Unclaimed while its
dynamic slots come and go, so ``EnteredCurrentState`` alone would be too old).

A startd draining with a ``DrainReason`` without our prefix is drained by someone else.

A startd whose ad has ``ReclaimNoticeDeadline`` (epoch seconds, set by the spot notice relay in
deploy/htcondor) is ``reclaimed``; once our drain of it is done it is destroyed.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Mapping

from nodemanager.classad.values import ad_number, ad_true
from nodemanager.core import foreign_reason
from nodemanager.core.reclaim import RECLAIM_ATTRIBUTE, RECLAIMED, notice_words
from nodemanager.model import Classified, Worker
from policy_matrix.vocabulary import BUSY, DOWN, IDLE, UNPAIRED

__all__ = ["classify_htcondor", "classify_htcondor_worker", "shown_state", "children_claimed"]


def classify_htcondor(ad: Mapping[str, Any], now: float = math.inf, *, state: str | None = None,
                      state_since: float = 0.0, running_jobs: int = 0, draining: bool = False,
                      drain_reason: str | None = None) -> Classified:
    """The classification of an HTCondor startd from its (partitionable) slot ad (see module doc).

    ``state`` (``"State/Activity"``) is used when the ad has no ``State``/``Activity``;
    ``running_jobs`` adds the adapter's own count of jobs to what the ad shows; the idle-since time
    is capped at ``now``; ``draining``/``drain_reason`` say whose drain it is.
    """
    st = ad.get("State")
    act = ad.get("Activity")
    if st is None and state:
        st, _, act = state.partition("/")
    dslots = ad_number(ad, "NumDynamicSlots") or 0.0
    jobs = dslots > 0 or running_jobs > 0 or children_claimed(ad)
    c = _table(str(st) if st is not None else "", str(act) if act is not None else "",
               jobs, ad_true(ad, "Draining"), shown_state(ad) if jobs and st in ("Unclaimed", "Owner") else None)
    notice = ad_number(ad, RECLAIM_ATTRIBUTE)
    if notice:
        # the worker relays the VM's spot reclaim notice: drained or not, the cloud takes it back
        return Classified(RECLAIMED, f"{c.why}; {notice_words(notice)}")
    theirs = foreign_reason(draining, drain_reason)
    if c.state == IDLE:
        return Classified(IDLE, c.why, _idle_since(ad, now, state_since), theirs)
    return c if theirs is None else Classified(c.state, c.why, None, theirs)


def classify_htcondor_worker(worker: Worker) -> Classified:
    """The classification of an HTCondor worker from its ad and raw fields."""
    return classify_htcondor(worker.ad, state=worker.state, state_since=worker.state_since,
                             running_jobs=worker.running_jobs, draining=worker.draining,
                             drain_reason=worker.drain_reason)


def children_claimed(ad: Mapping[str, Any]) -> bool:
    child = ad.get("ChildState")
    if isinstance(child, str):
        child = [c.strip().strip('"') for c in child.strip("{} ").split(",")]
    if isinstance(child, (list, tuple)):
        return any(str(c) in ("Claimed", "Preempting", "Matched") for c in child)
    return False


def shown_state(ad: Mapping[str, Any]) -> str | None:
    """``State/Activity`` as an operator reads it: a partitionable slot stays Unclaimed/Idle while
    its dynamic slots run jobs, so a machine with claimed children shows the p-slot with them:
    ``Unclaimed/Idle p-slot, 3 dynamic slots busy`` (``retiring`` when they all retire)."""
    st, act = ad.get("State"), ad.get("Activity")
    if st is None:
        return None
    dslots = int(ad_number(ad, "NumDynamicSlots") or 0)
    if st in ("Unclaimed", "Owner") and (children_claimed(ad) or dslots > 0):
        acts = ad.get("ChildActivity")
        retiring = isinstance(acts, (list, tuple)) and bool(acts) and all(a == "Retiring" for a in acts)
        return _shown(st, act, dslots, retiring)
    return _shown(st, act, -1, False)


def _shown(st: Any, act: Any, dslots: int, retiring: bool) -> str:
    """The text of :func:`shown_state` (``dslots`` -1: the slot's own state alone); one string
    per distinct text when the state and activity are strings (a pool's workers share a few)."""
    if isinstance(st, str) and (act is None or isinstance(act, str)):
        return _shown_text(st, act, dslots, retiring)
    return _shown_text.__wrapped__(st, act, dslots, retiring)


@functools.lru_cache(maxsize=1024)
def _shown_text(st: Any, act: Any, dslots: int, retiring: bool) -> str:
    own = f"{st}/{act}" if act is not None else str(st)
    if dslots < 0:
        return own
    count = f"{dslots} dynamic slot{'s' if dslots != 1 else ''}" if dslots else "dynamic slots"
    return f"{own} p-slot, {count} {'retiring' if retiring else 'busy'}"


@functools.lru_cache(maxsize=1024)
def _table(st: str, act: str, jobs: bool, draining: bool, shown: str | None = None) -> Classified:
    """Everything but the idle-since time depends on these only: computed once per pool."""
    label = shown or (f"{st}/{act}" if act else st)
    jobs = jobs or st in ("Claimed", "Preempting", "Matched")
    if not st:
        return Classified(UNPAIRED, "htcondor ad has no State yet (starting)")
    if st == "Drained" and act == "Idle" and not jobs:
        return Classified(DOWN, f"htcondor {label}: drained, ready to go")
    if jobs:
        extra = " (draining)" if draining or st == "Drained" else ""
        return Classified(BUSY, f"htcondor {label}: running jobs{extra}")
    if st == "Drained" or draining:
        return Classified(BUSY, f"htcondor {label}: drain under way")
    if st in ("Unclaimed", "Owner", "Backfill"):
        why = {"Unclaimed": "no jobs",
               "Owner": "not accepting jobs (START is false); idle grace applies",
               "Backfill": "backfill work only"}[st]
        return Classified(IDLE, f"htcondor {label}: {why}")
    return Classified(BUSY, f"htcondor {label}: state not recognised; left alone")


def _idle_since(ad: Mapping[str, Any], now: float, state_since: float) -> float:
    candidates = [state_since]
    entered = ad_number(ad, "EnteredCurrentState")
    if entered is not None:
        candidates.append(entered)
    frozen = ad_number(ad, "ExpectedMachineGracefulDrainingCompletion")
    if frozen is not None:
        candidates.append(frozen)
    return min(max(candidates), now)
