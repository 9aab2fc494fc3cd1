"""Draining statistics of the SLURM adapter: our drain actions counted, the cores our drains
kept unclaimed and the badput of escalations, per node and in total (docs/slurm.md)."""

from __future__ import annotations

import threading

from nodemanager.scheduler.draining_stats import DrainingStats, NodeDrainingStats
from nodemanager.scheduler.slurm_json import request_id_of
from nodemanager.scheduler.slurm_poll import PollState, Track

__all__ = ["DrainStatistics"]


class DrainStatistics:
    """The statistics part of :class:`~nodemanager.scheduler.slurm.SlurmScheduler`, which sets the
    attributes below."""

    _lock: threading.Lock
    _counts: dict[str, int]
    _badput: dict[str, float]
    _unclaimed: dict[str, float]
    _seen: dict[str, tuple[bool, str | None]]
    _tracks: dict[str, Track]

    def draining_stats(self) -> DrainingStats:
        """Draining statistics since this adapter started (see the module doc)."""
        with self._lock:
            names = sorted(set(self._seen) | set(self._badput) | set(self._unclaimed))
            nodes = tuple(NodeDrainingStats(name=n, badput=self._badput.get(n, 0.0),
                                            unclaimed=self._unclaimed.get(n, 0.0),
                                            draining=self._seen.get(n, (False, None))[0],
                                            drain_reason=self._seen.get(n, (False, None))[1])
                          for n in names)
            return DrainingStats(badput=sum(self._badput.values()),
                                 unclaimed=sum(self._unclaimed.values()), nodes=nodes, **self._counts)

    def _count(self, name: str, what: str | None = None, *, badput: float = 0.0,
               unclaimed: float = 0.0) -> None:
        with self._lock:
            if what:
                self._counts[what] += 1
            if badput:
                self._badput[name] = self._badput.get(name, 0.0) + badput
            if unclaimed:
                self._unclaimed[name] = self._unclaimed.get(name, 0.0) + unclaimed

    def _untrack(self, name: str) -> None:
        with self._lock:
            self._tracks.pop(name, None)

    def _sample(self, state: PollState) -> None:
        """Add unclaimed core-seconds for our drains; pick up our drains found after a restart."""
        with self._lock:
            self._seen = {n.name: (n.draining, n.reason or None) for n in state.nodes.values()}
        for node in state.nodes.values():
            rid = request_id_of(node.reason) if node.draining else None
            with self._lock:
                track = self._tracks.get(node.name)
                if rid is None or (track is not None and track.request_id != rid):
                    if track is not None:
                        self._tracks.pop(node.name)
                    continue
                if track is None:
                    self._tracks[node.name] = Track(rid, node.reason_changed_at or state.at)
                    continue
                dt = max(state.at - track.last_sample, 0.0)
                track.last_sample = state.at
            free = max(node.cpus - node.alloc_cpus, 0)
            if dt and free:
                self._count(node.name, unclaimed=free * dt)
