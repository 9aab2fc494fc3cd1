"""The controller's memory of each spot market: the VM time it watched and the reclaims it saw
(:mod:`nodemanager.core.reclaim_rates` turns them into the rate sizes are priced with).

Read from each plan's node explanations: a spot node listed and not gone adds the seconds since
the last cycle to its size's watched time; a node first seen ``reclaimed`` (a notice relayed by
its worker, or the cloud listing it reclaimed) adds one reclaim. :meth:`ReclaimMemory.doc` /
:meth:`ReclaimMemory.from_doc` are what :class:`nodemanager.cycle.memories.Memories` keeps in the
state dir, so a restart keeps the learned rates (the time it was down is not counted as watched).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from nodemanager.core.reclaim import RECLAIMED
from nodemanager.core.reclaim_rates import Watched, faded, learned_rate, rate_words
from nodemanager.configuration.settings import CoreSettings
from nodemanager.model import NodeExplanation, Size

__all__ = ["ReclaimMemory"]

_KEEP_RECLAIMED = 4096   # node ids remembered as reclaimed (each counted once)


class ReclaimMemory:
    """Per spot size: watched VM time and reclaims (faded); :meth:`rates` prices them."""

    def __init__(self) -> None:
        self._watched: dict[str, Watched] = {}
        self._reclaimed: dict[str, None] = {}   # insertion-ordered: the oldest are forgotten first
        self._last: float | None = None

    def observe(self, nodes: Sequence[NodeExplanation], sizes: Iterable[Size], now: float) -> bool:
        """Count this cycle; True when a reclaim was seen (the rates changed beyond fading)."""
        spot = {s.name for s in sizes if s.market == "spot"}
        if not spot:
            return False
        dt = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        up: dict[str, int] = {}
        seen = False
        for e in nodes:
            if e.size not in spot or e.gone:
                continue
            up[e.size] = up.get(e.size, 0) + 1
            if e.tuple.worker_state == RECLAIMED and e.node_id not in self._reclaimed:
                self._reclaimed[e.node_id] = None
                if len(self._reclaimed) > _KEEP_RECLAIMED:
                    del self._reclaimed[next(iter(self._reclaimed))]
                w = faded(self._watched.get(e.size, Watched(at=now)), now)
                self._watched[e.size] = Watched(vm_seconds=w.vm_seconds, reclaims=w.reclaims + 1.0, at=now)
                seen = True
        for size, n in up.items():
            w = faded(self._watched.get(size, Watched(at=now)), now)
            self._watched[size] = Watched(vm_seconds=w.vm_seconds + n * dt, reclaims=w.reclaims, at=now)
        return seen

    def rates(self, settings: CoreSettings, now: float) -> Mapping[str, tuple[float, str]]:
        """Spot size name -> (reclaims per hour to price with, in words)."""
        out = {}
        for s in settings.sizes:
            if s.market != "spot":
                continue
            w = faded(self._watched.get(s.name, Watched(at=now)), now)
            rate = learned_rate(s.interruptions_per_day, settings.reclaim_prior, w)
            out[s.name] = (rate, rate_words(s.interruptions_per_day, w, rate))
        return out

    def doc(self) -> dict[str, Any]:
        """What was learned, as JSON-ready data (the reclaimed node ids: each is counted once)."""
        return {"watched": {size: [w.vm_seconds, w.reclaims, w.at] for size, w in self._watched.items()},
                "reclaimed": list(self._reclaimed)}

    @classmethod
    def from_doc(cls, doc: Any) -> ReclaimMemory:
        """The memory :meth:`doc` gave; ValueError (or KeyError, TypeError) when malformed."""
        memory = cls()
        for size, (vm_seconds, reclaims, at) in doc["watched"].items():
            memory._watched[str(size)] = Watched(vm_seconds=float(vm_seconds), reclaims=float(reclaims),
                                                 at=float(at))
        memory._reclaimed = {str(n): None for n in doc["reclaimed"][-_KEEP_RECLAIMED:]}
        return memory
