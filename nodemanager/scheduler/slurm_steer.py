"""Placement steering on SLURM: node ``Weight`` (SLURM allocates the lowest weight first).

A ranked node gets ``Weight = WEIGHT_BASE + rank``; a node no longer ranked gets back the weight
it had before we first changed it (the site's, from ``slurm.conf``). One ``sinfo --json`` reads
the weights now, then one ``scontrol update NodeName=<nodes> Weight=<w>`` per weight that
changes: nodes that already show the weight wanted are left alone.

Weights from ``WEIGHT_BASE`` up are taken for ours, so a controller that restarted does not
mistake them for the site's; the site's weight of a node first seen with one of ours is unknown
and that node keeps our weight when it is released (``scontrol reconfigure`` reads slurm.conf's
weights again). SLURM keeps weights set with ``scontrol`` until slurmctld restarts or reconfigures.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Sequence

from nodemanager.model import Worker
from nodemanager.scheduler.port import SchedulerError

__all__ = ["SlurmSteering", "WEIGHT_BASE"]

log = logging.getLogger(__name__)

# above any weight a site plausibly configures, far below SLURM's limit (2^32 - 2)
WEIGHT_BASE = 1_000_000


def node_weights(doc: Any) -> dict[str, int]:
    """Node name -> Weight from a ``sinfo --json`` document (nodes without one left out)."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list):
        raise SchedulerError("sinfo --json: no node list in the reply")
    out: dict[str, int] = {}
    for n in nodes:
        if isinstance(n, dict) and isinstance(n.get("name"), str) and isinstance(n.get("weight"), int):
            out[n["name"]] = n["weight"]
    return out


class SlurmSteering:
    """Applies ranks as weights. ``query`` returns the ``sinfo --json`` document; ``update`` runs
    ``scontrol update NodeName=<nodes> Weight=<w>`` (both the adapter's own command runners)."""

    def __init__(self, query: Callable[[], Any], update: Callable[[str, int], None]) -> None:
        self._query, self._update = query, update
        self._site: dict[str, int] = {}      # node -> its weight before we changed it
        self._lock = threading.Lock()

    def steer(self, ranks: Sequence[tuple[Worker, int | None]]) -> int:
        """Set the weights ``ranks`` ask for; the number of ``scontrol`` calls made."""
        current = node_weights(self._query())
        wanted: dict[int, list[str]] = {}
        with self._lock:
            for worker, rank in ranks:
                name = worker.name
                now = current.get(name)
                if now is None:
                    continue  # not in SLURM (any more): nothing to set
                if rank is None:
                    target = self._site.pop(name, None)
                    if target is None:
                        if now >= WEIGHT_BASE:
                            log.info("node %s: keeps weight %d: its site weight is not known "
                                     "(scontrol reconfigure restores slurm.conf's)", name, now)
                        continue
                else:
                    if now < WEIGHT_BASE:
                        self._site.setdefault(name, now)
                    target = WEIGHT_BASE + rank
                if target != now:
                    wanted.setdefault(target, []).append(name)
        for weight, names in sorted(wanted.items()):
            self._update(",".join(sorted(names)), weight)
        return len(wanted)
