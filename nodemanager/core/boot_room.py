"""The room left for new nodes this cycle under ``max_nodes``, the cloud quota,
``max_total_price``, each size's own ``max_nodes`` and a half-open capacity breaker's one probe;
it books the boots placement decides. Pure.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

from nodemanager.model import InFlight, Size, Snapshot
from nodemanager.core.settings import CoreSettings

__all__ = ["BootRoom", "SIZE_MAX", "PROBE"]

SIZE_MAX = "size_max_nodes"  # a size's own max_nodes binds: other sizes may still serve
PROBE = "backoff"  # a half-open capacity breaker allows one probe boot: other sizes serve the rest


class BootRoom:
    """Room for new nodes under max_nodes, the cloud quota and max_total_price; books boots."""

    def __init__(self, snapshot: Snapshot, settings: CoreSettings, sizes: dict[str, Size],
                 boots_in_flight: Sequence[InFlight]) -> None:
        self.settings = settings
        self.limit = settings.max_nodes
        if snapshot.quota is not None:
            self.limit = min(self.limit, snapshot.quota)
        self.total = len(snapshot.cloud_nodes) + len(boots_in_flight)
        # the price in use and the nodes per size are read only under their caps: summed only then
        # (a pass over every listed node each cycle otherwise)
        self.price = sum(sizes[n.size].price for n in snapshot.cloud_nodes if n.size in sizes) + sum(
            sizes[f.size].price for f in boots_in_flight if f.size in sizes) if settings.max_total_price > 0 else 0.0
        self.boots: dict[str, int] = {}
        # half-open capacity breakers: boots of the size under way (its probe)
        self.probing = {s: sum(1 for f in boots_in_flight if f.size == s) for s in snapshot.probe_sizes}
        # nodes listed or booting per size (its max_nodes)
        self.of_size: dict[str, int] = dict(Counter([n.size for n in snapshot.cloud_nodes]
                                                    + [f.size or "" for f in boots_in_flight])) if any(
            s.max_nodes > 0 for s in sizes.values()) else {}

    def _left(self, size: Size) -> tuple[int, str | None, str]:
        settings, limit, total, price = self.settings, self.limit, self.total, self.price
        room = limit - total
        kind = "max_nodes" if limit == settings.max_nodes else "quota"
        cause = (f"max_nodes {settings.max_nodes}" if limit == settings.max_nodes
                 else f"cloud quota {limit}") + f" reached ({total} nodes incl. booting)"
        if settings.max_total_price > 0 and size.price > 0:
            by_price = int(math.floor((settings.max_total_price - price) / size.price + 1e-9))
            if by_price < room:
                room, kind = by_price, "max_total_price"
                cause = (f"max_total_price {settings.max_total_price:g}/h reached "
                         f"({price:g}/h in use)")
        if size.name in self.probing:
            probes = self.probing[size.name] + self.boots.get(size.name, 0)
            if 1 - probes < room:
                room, kind = 1 - probes, PROBE
                cause = f"size {size.name}: capacity breaker half-open, one probe boot at a time"
        if size.max_nodes > 0:
            mine = self.of_size.get(size.name, 0) + self.boots.get(size.name, 0)
            if size.max_nodes - mine < room:
                room, kind = size.max_nodes - mine, SIZE_MAX
                cause = f"[Size {size.name}] max_nodes {size.max_nodes} reached ({mine} nodes incl. booting)"
        return max(room, 0), (cause if room <= 0 else None), kind

    def boot(self, size: Size, count: int) -> tuple[int, str | None, str]:
        """Book up to ``count`` nodes of ``size``: how many, why not more (None: all), which cap."""
        room, cause, kind = self._left(size)
        k = min(room, count)
        if k > 0:
            self.boots[size.name] = self.boots.get(size.name, 0) + k
            self.total += k
            self.price += k * size.price
        if k < count:
            _, cause, kind = self._left(size)
            return k, cause or "cap reached", kind
        return k, None, kind
