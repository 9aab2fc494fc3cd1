"""Draining statistics (HTCondor's draining design): what draining cost, per
node and in total, for the metrics.

HTCondor startds publish ``TotalMachineDrainingBadput`` (core-seconds of jobs killed by drains)
and ``TotalMachineDrainingUnclaimedTime`` (core-seconds left unclaimed while draining) since the
startd started. :class:`DrainingStatsRecorder` keeps the last value seen per startd *process*
(worker name + ``registered_at``, i.e. ``DaemonStartTime``) and carries it into the total when the
startd restarts or goes away, so the totals only grow. Workers without these attributes (SLURM)
count 0. It also counts what the adapter did: drains started, refused,
cancelled, completed (confirmed drained) and escalated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from nodemanager.model import Worker

__all__ = ["NodeDrainingStats", "DrainingStats", "DrainingStatsRecorder", "node_stats"]


@dataclass(frozen=True, slots=True)
class NodeDrainingStats:
    """One startd's draining totals since it started (core-seconds), and whether it drains now."""

    name: str
    badput: float = 0.0
    unclaimed: float = 0.0
    draining: bool = False
    drain_reason: str | None = None


@dataclass(frozen=True, slots=True)
class DrainingStats:
    """Totals since this process started (core-seconds; counts of our drains), plus per node."""

    badput: float = 0.0
    unclaimed: float = 0.0
    started: int = 0
    refused: int = 0
    cancelled: int = 0
    completed: int = 0
    escalated: int = 0
    nodes: tuple[NodeDrainingStats, ...] = field(default_factory=tuple)


class DrainingStatsRecorder:
    """Accumulates :class:`DrainingStats`; :meth:`stats` returns a frozen copy.

    :meth:`observe` is called once per poll with every worker and is cheap: per-node numbers are
    only read from the ads when :meth:`stats` is asked for.
    """

    def __init__(self) -> None:
        self._live: dict[str, Worker] = {}
        self._gone_badput = 0.0
        self._gone_unclaimed = 0.0
        self.started = 0
        self.refused = 0
        self.cancelled = 0
        self.completed = 0
        self.escalated = 0

    def observe(self, workers: Iterable[Worker]) -> None:
        """Record one poll. A startd that went away or restarted (new ``registered_at``) has its
        last totals carried into the total."""
        seen = {w.name: w for w in workers}
        live = self._live
        for name, old in live.items():
            new = seen.get(name)
            if new is None or new.registered_at != old.registered_at:
                self._retire(old)
        self._live = seen

    def _retire(self, worker: Worker) -> None:
        node = node_stats(worker)
        self._gone_badput += node.badput
        self._gone_unclaimed += node.unclaimed

    def stats(self) -> DrainingStats:
        nodes = tuple(node_stats(w) for _, w in sorted(self._live.items()))
        return DrainingStats(
            badput=self._gone_badput + sum(s.badput for s in nodes),
            unclaimed=self._gone_unclaimed + sum(s.unclaimed for s in nodes),
            started=self.started, refused=self.refused, cancelled=self.cancelled,
            completed=self.completed, escalated=self.escalated, nodes=nodes)


def _number(ad: Mapping[str, Any], key: str) -> float:
    v = ad.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def node_stats(worker: Worker) -> NodeDrainingStats:
    """One worker's draining totals, from its ad (``TotalMachineDraining*``; 0 when absent)."""
    return NodeDrainingStats(name=worker.name, badput=_number(worker.ad, "TotalMachineDrainingBadput"),
                             unclaimed=_number(worker.ad, "TotalMachineDrainingUnclaimedTime"),
                             draining=worker.draining, drain_reason=worker.drain_reason)
