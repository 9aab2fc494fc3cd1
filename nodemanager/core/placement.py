"""Demand placement: queued jobs onto capacity that exists, tier by tier, then onto new boots.

Pure. :data:`TIERS` is the order capacity is used in; whatever no tier holds is packed onto the
cheapest sizes that fit (RAM x ``node_mem_scaling``), within ``max_nodes`` (booting and down
nodes count), the cloud quota and ``max_total_price``; blocked sizes are skipped. Nodes whose
capacity a placement uses are returned as ``needed`` (a drain of ours there is then cancelled; a
drain or destroy the matrix asks for is held back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from nodemanager.core.classify import foreign_drain
from nodemanager.core.plan_node import Decision
from nodemanager.model import BootRequest, Demand, InFlight, Size, Snapshot, Unmet, Worker
from nodemanager.settings import CoreSettings
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, IDLE, UNPAIRED

__all__ = ["Tier", "TIERS", "BUSY_FREE", "IDLE_KEPT", "GIVEN_BACK", "BOOTING", "DRAINING",
           "NEW_BOOTS", "Placement", "place_demand"]


@dataclass(frozen=True)
class Tier:
    """One kind of capacity demand is placed on, tried in the order of :data:`TIERS`."""

    name: str
    holds: str


BUSY_FREE = Tier("busy free", "free cores of busy nodes (and of busy unlisted workers)")
IDLE_KEPT = Tier("idle kept", "idle nodes the matrix keeps (and idle unlisted workers)")
GIVEN_BACK = Tier("given back", "idle or busy nodes the matrix would give back: they then stay, "
                                "blocked by demand")
BOOTING = Tier("booting", "nodes booting, and boots requested but not listed by the cloud yet")
DRAINING = Tier("draining", "nodes we are draining: the drain is cancelled")
NEW_BOOTS = Tier("new boots", "room left on nodes booted this cycle for larger jobs")
TIERS: tuple[Tier, ...] = (BUSY_FREE, IDLE_KEPT, GIVEN_BACK, BOOTING, DRAINING, NEW_BOOTS)


@dataclass(frozen=True)
class Placement:
    """The boots to request (each with its why), notes for the operator, the unmet demand, and the
    listed nodes queued jobs need (node id -> why, in words)."""

    boots: list[BootRequest]
    notes: list[str]
    unmet: list[Unmet]
    needed: dict[str, str]


_Taken = Callable[[str | None, Demand, int], None]  # told each owner (a node id) a placement used


class _Bins:
    """Free capacity grouped by (cpus, ram, size); each group holds the owners (node or None)."""

    __slots__ = ("groups",)

    def __init__(self) -> None:
        self.groups: dict[tuple[int, float, str], list[str | None]] = {}

    def add(self, cpus: int, ram: float, size: str, owner: str | None) -> None:
        if cpus > 0:
            self.groups.setdefault((cpus, ram, size), []).append(owner)

    def place(self, d: Demand, want_size: str | None, count: int, taken: _Taken) -> int:
        """Place up to ``count`` jobs of ``d``; return how many were placed."""
        if count <= 0:
            return 0
        placed = 0
        for key in sorted(k for k in self.groups if k[0] >= d.cpus and k[1] >= d.ram_mb
                          and (want_size is None or k[2] == want_size)):
            owners = self.groups[key]
            cpus, ram, size = key
            per = cpus // max(d.cpus, 1)
            if d.ram_mb > 0:
                per = min(per, int(ram // d.ram_mb))
            while owners and placed < count:
                owner = owners.pop()
                take = min(per, count - placed)
                placed += take
                taken(owner, d, take)
                self.add(cpus - take * d.cpus, ram - take * d.ram_mb, size, owner)
            if not owners:
                del self.groups[key]
            if placed >= count:
                break
        return placed


def _capacity(n: Decision, settings: CoreSettings) -> tuple[int, float]:
    w, size = n.facts.worker, n.facts.size
    cpus = (w.cpus if w and w.cpus else 0) or (size.cores if size else 0)
    ram = float(w.ram_mb) if w and w.ram_mb else (size.ram_mb * settings.node_mem_scaling
                                                  if size else 0.0)
    return cpus, ram


def _free(cpus: int, ram: float, w: Worker | None, state: str) -> tuple[int, float]:
    if state == IDLE or w is None:
        return cpus, ram
    if w.cpus_busy <= 0 or cpus <= 0:
        return 0, 0.0
    free = max(cpus - w.cpus_busy, 0)
    return free, ram * free / cpus


def _fits(size: Size, d: Demand, scaling: float) -> bool:
    return (size.cores >= d.cpus and size.ram_mb * scaling >= d.ram_mb
            and (size.scratch_mb == 0 or size.scratch_mb >= d.scratch_mb))


def _size_name(sizes: dict[str, Size], pinned: str | None) -> str | None:
    if pinned is None:
        return None
    if pinned in sizes:
        return pinned
    for s in sizes.values():
        if s.instance_type == pinned:
            return s.name
    return pinned


def _tier_of(n: Decision) -> Tier | None:
    """The tier a listed node's capacity goes to (None: it offers none)."""
    f = n.facts
    ws = f.core_state
    if n.drain is not None:
        # a drained worker takes jobs again once the drain is cancelled; a lost one does not
        return DRAINING if f.drained or ws in (IDLE, BUSY) else None
    if ws == UNPAIRED and f.tuple.boot_grace != BOOT_EXCEEDED and n.want is None:
        return BOOTING
    if ws in (IDLE, BUSY) and f.theirs is None and not n.forced:
        if n.want is not None:
            return GIVEN_BACK
        return IDLE_KEPT if ws == IDLE else BUSY_FREE
    return None


def _existing(settings: CoreSettings, sizes: dict[str, Size], nodes: Sequence[Decision],
              orphans: Sequence[tuple[Worker, str]],
              boots_in_flight: Sequence[InFlight]) -> dict[Tier, _Bins]:
    """Free capacity that exists now, by tier (:data:`NEW_BOOTS` starts empty)."""
    bins = {t: _Bins() for t in TIERS}
    for n in nodes:
        tier = _tier_of(n)
        if tier is None:
            continue
        cpus, ram = _capacity(n, settings)
        facts = n.facts
        if not (tier is DRAINING and facts.drained) and tier is not BOOTING:
            cpus, ram = _free(cpus, ram, facts.worker, facts.core_state)
        bins[tier].add(cpus, ram, facts.node.size, facts.node.id)
    for w, state in orphans:
        if state in (IDLE, BUSY) and not w.draining and foreign_drain(w) is None:
            free = _free(w.cpus, float(w.ram_mb), w, state)
            bins[IDLE_KEPT if state == IDLE else BUSY_FREE].add(free[0], free[1], "", None)
    for f in boots_in_flight:
        s = sizes.get(f.size or "")
        if s is not None:
            bins[BOOTING].add(s.cores, s.ram_mb * settings.node_mem_scaling, s.name, None)
    return bins




class _Room:
    """Room for new nodes under max_nodes, the cloud quota and max_total_price; books boots."""

    def __init__(self, snapshot: Snapshot, settings: CoreSettings, sizes: dict[str, Size],
                 boots_in_flight: Sequence[InFlight]) -> None:
        self.settings = settings
        self.limit = settings.max_nodes
        if snapshot.quota is not None:
            self.limit = min(self.limit, snapshot.quota)
        self.total = len(snapshot.cloud_nodes) + len(boots_in_flight)
        self.price = sum(sizes[n.size].price for n in snapshot.cloud_nodes if n.size in sizes) + sum(
            sizes[f.size].price for f in boots_in_flight if f.size in sizes)
        self.boots: dict[str, int] = {}

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


def _per_node(size: Size, d: Demand, scaling: float) -> int:
    """How many jobs of ``d`` one empty node of ``size`` holds (0: none)."""
    per = size.cores // max(d.cpus, 1)
    if d.ram_mb > 0:
        per = min(per, int(size.ram_mb * scaling // d.ram_mb))
    return per


def place_demand(snapshot: Snapshot, settings: CoreSettings, sizes: dict[str, Size],
                 nodes: Sequence[Decision], orphans: Sequence[tuple[Worker, str]],
                 boots_in_flight: Sequence[InFlight], nodes_up: int) -> Placement:
    """Place ``snapshot.demand`` on ``nodes`` (listed nodes whose destroy is not under way),
    ``orphans`` (workers no listed node pairs with, with their core state) and
    ``boots_in_flight``, then on new boots; then boot up to ``min_nodes`` given ``nodes_up``."""
    bins = _existing(settings, sizes, nodes, orphans, boots_in_flight)
    room = _Room(snapshot, settings, sizes, boots_in_flight)
    usable = sorted((s for s in sizes.values() if s.name not in snapshot.blocked_sizes
                     and s.instance_type not in snapshot.blocked_sizes),
                    key=lambda s: (s.price, s.cores, s.ram_mb, s.name))
    why: dict[str, list[str]] = {}
    notes: list[str] = []
    unmet: list[Unmet] = []
    scaling = settings.node_mem_scaling
    needed: dict[str, str] = {}

    def taken(owner: str | None, d: Demand, k: int) -> None:
        if owner is not None and owner not in needed:
            needed[owner] = f"queued jobs need it ({k} job(s) of {d.cpus} cpus, {d.ram_mb} MB fit here)"

    demand = sorted((d for d in snapshot.demand if d.count > 0),
                    key=lambda d: (-d.cpus, -d.ram_mb, d.size or "", d.scratch_mb, d.count,
                                   d.oldest_submit or 0.0))
    for d in demand:
        want = _size_name(sizes, d.size)
        left = d.count
        for tier in TIERS:
            left -= bins[tier].place(d, want, left, taken)
            if left <= 0:
                break
        if left <= 0:
            continue
        label = f"{left} job(s) of {d.cpus} cpus, {d.ram_mb} MB"
        fitting = [s for s in sizes.values() if _fits(s, d, scaling)
                   and (want is None or s.name == want)]
        choices = [s for s in usable if s in fitting]
        if not choices:
            notes.append(f"{label}: no size fits" if not fitting else
                         f"{label}: every fitting size is blocked ("
                         f"{', '.join(sorted(s.name for s in fitting))})")
            unmet.append(Unmet(label, left, "backoff" if fitting else "no_size", notes[-1]))
            continue

        def cost(s: Size) -> tuple[float, float, int, float, str]:
            per = _per_node(s, d, scaling)
            return (math.ceil(left / max(per, 1)) * s.price, s.price, s.cores, s.ram_mb, s.name)
        best = min(choices, key=cost)
        per = max(_per_node(best, d, scaling), 1)
        need = math.ceil(left / per)
        got, cause, kind = room.boot(best, need)
        if got:
            placed = min(left, got * per)
            why.setdefault(best.name, []).append(f"{placed} job(s) of {d.cpus} cpus, {d.ram_mb} MB")
            # what the new nodes have left over serves the smaller jobs that follow
            full, rest = divmod(placed, per)
            ram = best.ram_mb * scaling
            new = bins[NEW_BOOTS]
            for _ in range(full):
                new.add(best.cores - per * d.cpus, ram - per * d.ram_mb, best.name, None)
            if rest:
                new.add(best.cores - rest * d.cpus, ram - rest * d.ram_mb, best.name, None)
            for _ in range(got - full - (1 if rest else 0)):
                new.add(best.cores, ram, best.name, None)
        if cause:
            notes.append(f"{label}: {need - got} more node(s) of {best.name} not booted: {cause}")
            unmet.append(Unmet(label, max(0, left - got * per), kind, notes[-1]))

    up = len(boots_in_flight) + sum(room.boots.values()) + nodes_up
    if up < settings.min_nodes and usable:
        cheapest = usable[0]
        got, cause, kind = room.boot(cheapest, settings.min_nodes - up)
        if got:
            why.setdefault(cheapest.name, []).append(f"min_nodes {settings.min_nodes} ({up} up)")
        if cause:
            notes.append(f"min_nodes {settings.min_nodes}: {settings.min_nodes - up - got} "
                         f"node(s) not booted: {cause}")
            unmet.append(Unmet(f"min_nodes {settings.min_nodes}", 0, kind, notes[-1]))
    return Placement([BootRequest(size=s, count=c, reason="; ".join(why.get(s, ())))
                      for s, c in sorted(room.boots.items())], notes, unmet, needed)
