"""Spot reclaim notices: the cloud takes a spot VM back after a short notice.

A notice reaches the core two ways. The worker relays the VM's own metadata notice and its
scheduler adapter classifies the record ``reclaimed`` (HTCondor: the startd cron attribute
``ReclaimNoticeDeadline``; SLURM: a drain reason starting ``spot-reclaim``). Or the cloud listing
shows it: ``CloudNode.reclaim_at`` (GCE lists a preempted VM as stopped). A ``reclaimed`` node is
like ``down`` outside the matrix (no capacity for demand, not counted towards ``min_nodes``); the
default matrix drains it, so its jobs may finish in the notice window and none starts there.
A VM the cloud already stopped runs nothing: it is ``down`` (destroyed; its disks still bill).
"""

from __future__ import annotations

import time

from nodemanager.core.classify import Classification
from nodemanager.model import CloudNode
from nodemanager.text import duration
from policy_matrix.vocabulary import DOWN

__all__ = ["RECLAIMED", "RECLAIM_REASON", "RECLAIM_ATTRIBUTE", "notice_words", "cloud_reclaim"]

RECLAIMED = "reclaimed"
RECLAIM_REASON = "spot-reclaim"               # SLURM drain reason prefix the worker relay sets
RECLAIM_ATTRIBUTE = "ReclaimNoticeDeadline"   # HTCondor startd attribute (epoch seconds)
_LIVE = frozenset({"running", "pending"})


def notice_words(deadline: float | None, now: float | None = None) -> str:
    """``"spot reclaim notice: the cloud takes it back at 2026-11-24 01:02:03 UTC (in 1m 40s)"``."""
    if deadline is None or deadline <= 0:
        return "spot reclaim notice (deadline unknown)"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(deadline))
    if now is None:
        return f"spot reclaim notice: the cloud takes it back at {stamp}"
    when = f"in {duration(deadline - now)}" if deadline >= now else f"{duration(now - deadline)} ago"
    return f"spot reclaim notice: the cloud takes it back at {stamp} ({when})"


def cloud_reclaim(node: CloudNode, c: Classification, now: float) -> Classification:
    """``c``, unless the cloud listing shows a reclaim of ``node``: ``reclaimed`` while the VM
    still runs, ``down`` once the cloud stopped it."""
    if node.reclaim_at is None:
        return c
    words = notice_words(node.reclaim_at, now)
    if node.state in _LIVE:
        return Classification(RECLAIMED, f"{words}, from the cloud listing")
    return Classification(DOWN, f"{words}; the cloud stopped it ({node.state}): nothing runs there")
