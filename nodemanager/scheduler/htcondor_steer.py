"""Placement steering on HTCondor: the machine attribute ``NodeManagerKeepRank`` on each startd.

The controller sets it with ``condor_update_machine_ad`` (the startd keeps it in its ads across
its own updates; ``condor_advertise MERGE_STARTD_AD`` would last only until the next one), and
the negotiator prefers the lowest: ``deploy/htcondor/steering.config`` sets
``NEGOTIATOR_PRE_JOB_RANK = -ifThenElse(isUndefined(NodeManagerKeepRank), 0, NodeManagerKeepRank)``,
so machines without it (static nodes, nodes not yet ranked) come first, then ours, kept longest
first. A worker released (rank None) gets ``undefined``. A startd whose polled ad already shows
the rank wanted is not asked again.
"""

from __future__ import annotations

from typing import Sequence

from nodemanager.model import Worker
from nodemanager.scheduler.htcondor_bindings import Bindings
from nodemanager.scheduler.port import SchedulerError

__all__ = ["HTCondorSteering", "KEEP_RANK"]

KEEP_RANK = "NodeManagerKeepRank"


class HTCondorSteering:
    """Applies ranks as ``KEEP_RANK`` through the adapter's bindings."""

    def __init__(self, bindings: Bindings) -> None:
        self._b = bindings

    def steer(self, ranks: Sequence[tuple[Worker, int | None]]) -> int:
        """Set ``KEEP_RANK`` on each worker's startd as ``ranks`` ask; the number of calls made."""
        calls = 0
        for worker, rank in ranks:
            if worker.ad.get(KEEP_RANK) == rank:
                continue
            try:
                self._b.update_machine_ad(worker.ad, {KEEP_RANK: "undefined" if rank is None else str(rank)})
            except self._b.error_types as exc:
                raise SchedulerError(f"steering {worker.name}: {exc}", node=worker.name) from None
            calls += 1
        return calls
