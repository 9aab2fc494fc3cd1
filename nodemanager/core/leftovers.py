"""Drains of ours left behind by a destroy cut short before the scheduler was told: the name is
given back to the scheduler's pool, so a VM booted later under it never joins already drained.
Pure.

- A worker drained with our reason, running nothing, that no listed VM could be (by cloud id, name
  or address), of a scheduler that keeps a record per name (SLURM): its VM no longer exists; a ``destroy`` item without a node asks the actuator only
  for the scheduler's "node destroyed" step (:meth:`Scheduler.node_destroyed`).
- A listed node whose worker carries a drain of ours set before the VM was launched: the drain
  was for an older VM of that name; it is cancelled (``cancel_drain``), never finished
  (:mod:`nodemanager.core.reasons.inherited_drain`).
"""

from __future__ import annotations

from typing import Sequence

from nodemanager.core.classify import is_our_drain
from nodemanager.core.pair import candidates
from nodemanager.model import CloudNode, ItemKind, PlanItem, Worker

__all__ = ["gone_vm_drains", "NO_VM"]

NO_VM = "no VM: "  # starts the node id of an item about a worker whose VM no longer exists


def _idle(w: Worker) -> bool:
    return w.running_jobs == 0 and w.cpus_busy == 0


def gone_vm_drains(orphans: Sequence[Worker], nodes: Sequence[CloudNode]) -> list[PlanItem]:
    """The items that give back the names we drained for VMs that no longer exist (by name)."""
    # an HTCondor worker (non-empty ad) has no record to repair: its ads go with the VM
    left = [w for w in orphans if is_our_drain(w) and _idle(w) and not w.ad]
    out = []
    for w in sorted(left, key=lambda w: w.name):
        if any(candidates(n, (w,)) for n in nodes):
            continue  # a listed VM may be its: an ambiguous pairing, held, not a leftover
        out.append(PlanItem(kind=ItemKind.DESTROY, node_id=f"{NO_VM}{w.name}", node_name=w.name,
                            worker=w.name, cancellable=False, request_id=w.drain_request_id,
                            reason=f"drained by us ({w.drain_reason}) for a VM that no longer exists: "
                                   "giving the name back to the scheduler's pool"))
    return out
