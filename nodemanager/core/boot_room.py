"""The room left for new nodes this cycle under ``max_nodes``, the cloud quota,
``max_total_price``, ``max_boots_per_hour``, each size's own ``max_nodes`` and a half-open capacity breaker's one probe;
it books the boots placement decides. Pure.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

from nodemanager.core.pricing import node_price
from nodemanager.core.rate_history import HOUR
from nodemanager.model import InFlight, Size, Snapshot
from nodemanager.core.settings import CoreSettings

__all__ = ["BootRoom", "SIZE_MAX", "PROBE", "RATE"]

SIZE_MAX = "size_max_nodes"  # a size's own max_nodes binds (or its cloud's): other sizes may still serve
RATE = "max_boots_per_hour"  # no size may boot more this hour
PROBE = "backoff"  # a half-open capacity breaker allows one probe boot: other sizes serve the rest


class BootRoom:
    """Room for new nodes under max_nodes, the cloud quota, max_total_price and
    max_boots_per_hour; books boots."""

    def __init__(self, snapshot: Snapshot, settings: CoreSettings, sizes: dict[str, Size],
                 boots_in_flight: Sequence[InFlight]) -> None:
        self.settings = settings
        self.limit = settings.max_nodes
        if snapshot.quota is not None:
            self.limit = min(self.limit, snapshot.quota)
        self.total = len(snapshot.cloud_nodes) + len(boots_in_flight)
        # the price in use and the nodes per size are read only under their caps: summed only then
        # (a pass over every listed node each cycle otherwise)
        # (a VM of a size no longer configured counts at its booted price: node_price)
        known = snapshot.known_prices
        self.price = sum(node_price(n, sizes, known) for n in snapshot.cloud_nodes) + sum(
            sizes[f.size].price if f.size in sizes else known.get(f.size or "", 0.0)
            for f in boots_in_flight) if settings.max_total_price > 0 else 0.0
        retired = [node_price(n, sizes, known) for n in snapshot.cloud_nodes if n.size not in sizes] \
            if settings.max_total_price > 0 else []
        self.retired = (f", {sum(retired):g}/h of it by {len(retired)} VM(s) of sizes no longer configured"
                        if retired else "")
        self.boots: dict[str, int] = {}
        # boots of the last hour (listed, terminated or not listed yet), under max_boots_per_hour
        self.recent_boots = sum(1 for t in snapshot.recent_boots if 0.0 <= snapshot.now - t < HOUR) \
            if settings.max_boots_per_hour > 0 else 0
        # half-open capacity breakers: boots of the size under way (its probe)
        self.probing = {s: sum(1 for f in boots_in_flight if f.size == s) for s in snapshot.probe_sizes}
        # nodes listed or booting per size (its max_nodes)
        self.of_size: dict[str, int] = dict(Counter([n.size for n in snapshot.cloud_nodes]
                                                    + [f.size or "" for f in boots_in_flight])) if any(
            s.max_nodes > 0 for s in sizes.values()) else {}
        # several clouds: each one's own max_nodes, and its nodes listed or booting
        self.cloud_caps = dict(settings.cloud_max_nodes)
        self.of_cloud: Counter[str] = Counter(
            [n.cloud for n in snapshot.cloud_nodes]
            + [sizes[f.size].cloud for f in boots_in_flight if f.size in sizes]) if self.cloud_caps else Counter()
        self.sizes = sizes

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
                         f"({price:g}/h in use{self.retired})")
        if settings.max_boots_per_hour > 0:
            by_rate = settings.max_boots_per_hour - self.recent_boots - sum(self.boots.values())
            if by_rate < room:
                room, kind = by_rate, RATE
                cause = (f"max_boots_per_hour {settings.max_boots_per_hour} reached "
                         f"({self.recent_boots} booted in the last hour)")
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
        cap = self.cloud_caps.get(size.cloud, 0)
        if cap > 0:
            mine = self.of_cloud[size.cloud] + sum(n for s, n in self.boots.items() if self.sizes[s].cloud == size.cloud)
            if cap - mine < room:
                room, kind = cap - mine, SIZE_MAX
                cause = f"[Cloud {size.cloud}] max_nodes {cap} reached ({mine} nodes incl. booting)"
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
