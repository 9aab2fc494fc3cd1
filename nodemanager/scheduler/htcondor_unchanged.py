"""What the HTCondor adapter keeps of its last poll, so an unchanged startd costs a comparison:
each slot ad's reading (its plain ad, slot name and problems) while the collector hands back an
equal ad, and each machine's worker while everything it is built from is equal (its ads, their
problems, its running jobs): then the poll gives last poll's very worker, and the controller
knows the node unchanged by identity (:mod:`nodemanager.cycle.plan_reuse`).

The check is equality of the ad, not the ad's ``UpdateSequenceNumber``: the adapter reads
expressions evaluated at query time and attributes merged into the collector's copy, neither of
which a sequence number follows, and an equal ad can only build an equal worker."""

from __future__ import annotations

from typing import Any, Mapping

from nodemanager.model import Worker
from nodemanager.model import SameRecords
from nodemanager.scheduler.records import RecordProblem

__all__ = ["AdMemory", "Reading"]

# (plain ad, slot name, problems, the worker of a plain machine: its one ad, no problem, no job named)
Reading = tuple[Mapping[str, Any], str, list[RecordProblem], "Worker | None"]


class AdMemory:
    """Last poll's readings by slot name and workers by machine (see the module docstring)."""

    __slots__ = ("_read", "_now", "workers")

    def __init__(self) -> None:
        self._read: dict[str, Reading] = {}
        self._now: dict[str, Reading] = {}
        self.workers: SameRecords[Worker] = SameRecords()

    def reading(self, raw: Mapping[str, Any]) -> Reading | None:
        """Last poll's reading of ``raw`` when it is a plain dict equal to the ad then read under
        its name (a ClassAd is always read: its values are evaluated first)."""
        if type(raw) is not dict:
            return None
        name = raw.get("Name")
        if not isinstance(name, str):
            return None
        seen = self._read.get(name)
        if seen is not None and (seen[0] is raw or seen[0] == raw):
            self._now[name] = seen
            return seen
        return None

    def read(self, raw: Mapping[str, Any], reading: Reading) -> None:
        """Keep ``reading``, just made of ``raw``, for the next poll."""
        name = raw.get("Name") if type(raw) is dict else None
        if type(name) is str:
            self._now[name] = reading

    def worker(self, machine: str, source: Any) -> Worker | None:
        """Last poll's worker of ``machine`` when it was built from a source equal to ``source``."""
        return self.workers.get(machine, source)

    def built(self, machine: str, source: Any, plain: bool, worker: Worker) -> Worker:
        """Keep ``worker``, built from ``source``. A plain machine's source is its one slot ad,
        which the worker holds an equal copy of: that copy is kept instead, so the ad is held once."""
        if plain:
            name = source.get("Name")
            seen = self._now.get(name) if type(name) is str else None
            if seen is not None and seen[0] is source:
                self._now[name] = (worker.ad, seen[1], seen[2], worker)
            source = worker.ad
        return self.workers.put(machine, source, worker)

    def unchanged(self, machine: str) -> Worker:
        """Last poll's worker of a plain machine whose one ad is unchanged (a reading's worker
        that ``workers.holds``), kept again."""
        return self.workers.carry(machine)

    def end_poll(self) -> None:
        """This poll's readings and workers are the ones the next poll compares with."""
        self._read, self._now = self._now, {}
        self.workers.end_poll()
