"""Demand placement: queued jobs onto capacity that exists, tier by tier, then onto new boots.

Pure. :data:`TIERS` is the order capacity is used in; whatever no tier holds is packed onto the
mix of sizes that serves it at the least money (RAM x ``node_mem_scaling``), within
``max_nodes`` (booting and down nodes count), each size's own ``max_nodes``, the cloud quota and
``max_total_price``; blocked sizes are skipped. A demand item is placed only on sizes that can
run it: ``Demand.sizes`` (decided by the scheduler side; None: any) with enough GPUs; one no
size can run (``sizes`` empty) is never booted for and is reported ``unmatched``. Nodes whose
capacity a placement uses are marked ``needed`` (a drain of ours there is then cancelled; a
drain or destroy the matrix asks for is held back).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from nodemanager.core.boot_room import PROBE, SIZE_MAX, BootRoom
from nodemanager.core.classify import foreign_drain
from nodemanager.core.plan_node import Decision
from nodemanager.core.pricing import expected_price, reclaim_rate, spot_limits, spot_words
from nodemanager.core.demand_runtime import priced_time
from nodemanager.core.reclaim import RECLAIMED
from nodemanager.core.warm import GIVE_WAY_CAPS, WarmCount, count_warm, give_way
from nodemanager.core.cloud_choice import choose_cloud
from nodemanager.core.size_choice import demand_signature, eligible, fits, per_node, pick
from nodemanager.model import Blocked, BootRequest, CloudChoice, Demand, InFlight, Size, Snapshot, Unmet, Worker
from nodemanager.core.settings import CoreSettings
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, IDLE, UNPAIRED

__all__ = ["Tier", "TIERS", "BUSY_FREE", "IDLE_KEPT", "GIVEN_BACK", "BOOTING", "DRAINING",
           "NEW_BOOTS", "Placement", "place_demand", "UNMATCHED"]

_IN_FLIGHT = "\0"  # the owner of a boot not listed yet: its request id after this (no node id starts so)
UNMATCHED = "unmatched"  # the Unmet reason of demand no configured size can run


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
    warm: dict[str, str] = field(default_factory=dict)  # idle nodes kept warm: node id -> why
    gives_way: dict[str, str] = field(default_factory=dict)  # warm nodes that give way to queued jobs -> why
    clouds: list[CloudChoice] = field(default_factory=list)  # several clouds: where each group is bought


_Taken = Callable[[str | None, Demand, int], None]  # told each owner (a node id) a placement used


class _Bins:
    """Free capacity grouped by (cpus, ram, size, gpus); each group holds the owners (node or None)."""

    __slots__ = ("groups",)

    def __init__(self) -> None:
        self.groups: dict[tuple[int, float, str, int], list[str | None]] = {}

    def add(self, cpus: int, ram: float, size: str, owner: str | None, gpus: int = 0) -> None:
        if cpus > 0:
            self.groups.setdefault((cpus, ram, size, gpus), []).append(owner)

    def place(self, d: Demand, eligible: frozenset[str] | None, count: int, taken: _Taken) -> int:
        """Place up to ``count`` jobs of ``d`` on capacity of the ``eligible`` sizes (None: any);
        return how many were placed."""
        if count <= 0:
            return 0
        placed = 0
        for key in sorted(k for k in self.groups if k[0] >= d.cpus and k[1] >= d.ram_mb
                          and k[3] >= d.gpus and (eligible is None or k[2] in eligible)):
            owners = self.groups[key]
            cpus, ram, size, gpus = key
            per = cpus // max(d.cpus, 1)
            if d.ram_mb > 0:
                per = min(per, int(ram // d.ram_mb))
            if d.gpus > 0:
                per = min(per, gpus // d.gpus)
            while owners and placed < count:
                owner = owners.pop()
                take = min(per, count - placed)
                placed += take
                taken(owner, d, take)
                self.add(cpus - take * d.cpus, ram - take * d.ram_mb, size, owner,
                         gpus - take * d.gpus)
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


def _free_gpus(size: Size | None, cpus: int, free_cpus: int) -> int:
    """The GPUs of a node's free share (the scheduler does not say which GPUs are busy)."""
    if size is None or size.gpus <= 0 or cpus <= 0:
        return 0
    return size.gpus * free_cpus // cpus


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
    if f.tuple.worker_state == RECLAIMED:
        return None  # the cloud takes it back: no drain of it is cancelled for queued jobs
    if n.drain is not None:
        # a drained worker takes jobs again once the drain is cancelled; a lost one does not
        return DRAINING if f.drained or ws in (IDLE, BUSY) else None
    # past its boot grace a VM still counts while its absence is unconfirmed (a restart): it may
    # yet join and serve the demand, and booting its replacement now would buy two
    if ws == UNPAIRED and n.want is None and (f.tuple.boot_grace != BOOT_EXCEEDED
                                              or n.blocked == Blocked.UNCONFIRMED):
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
    # the common node (busy or idle, kept, no drain, sized like its size) inline: 50,000 a cycle
    kept = {IDLE: bins[IDLE_KEPT], BUSY: bins[BUSY_FREE]}
    for n in nodes:
        facts = n.facts
        ws = facts.core_state
        w = facts.worker
        # a busy node whose worker's cores are all busy (most of a large pool) has none to offer in
        # any tier: tested first, before what decides its tier
        if ws == BUSY and w is not None and w.cpus and w.cpus_busy >= w.cpus:
            continue
        if (n.want is None and n.drain is None and not n.forced and w is not None and w.cpus and w.ram_mb
                and facts.theirs is None and ws in kept and facts.tuple.worker_state != RECLAIMED):
            cpus, ram = _free(w.cpus, float(w.ram_mb), w, ws)
            if cpus > 0:
                kept[ws].add(cpus, ram, facts.node.size, facts.node.id, _free_gpus(facts.size, w.cpus, cpus))
            continue
        tier = _tier_of(n)
        if tier is None:
            continue
        total, ram = _capacity(n, settings)
        cpus = total
        if not (tier is DRAINING and facts.drained) and tier is not BOOTING:
            cpus, ram = _free(total, ram, facts.worker, facts.core_state)
        bins[tier].add(cpus, ram, facts.node.size, facts.node.id, _free_gpus(facts.size, total, cpus))
    for w, state in orphans:
        if state in (IDLE, BUSY) and not w.draining and foreign_drain(w) is None:
            free = _free(w.cpus, float(w.ram_mb), w, state)
            bins[IDLE_KEPT if state == IDLE else BUSY_FREE].add(free[0], free[1], "", None)
    for f in boots_in_flight:
        s = sizes.get(f.size or "")
        if s is not None:
            bins[BOOTING].add(s.cores, s.ram_mb * settings.node_mem_scaling, s.name, _IN_FLIGHT + f.node, s.gpus)
    return bins


def _blocked_why(name: str, snapshot: Snapshot) -> str:
    why = snapshot.protected_sizes.get(name) or snapshot.open_breakers.get(name)
    return f"{name}: {why}" if why else name


def place_demand(snapshot: Snapshot, settings: CoreSettings, sizes: dict[str, Size],
                 nodes: Sequence[Decision], orphans: Sequence[tuple[Worker, str]],
                 boots_in_flight: Sequence[InFlight], up: Sequence[str]) -> Placement:
    """Place ``snapshot.demand`` on ``nodes`` (listed nodes whose destroy is not under way),
    ``orphans`` (workers no listed node pairs with, with their core state) and
    ``boots_in_flight``, then on new boots; then boot up to each size's and the global
    ``min_nodes`` given ``up`` (the size of each node that counts as up)."""
    bins = _existing(settings, sizes, nodes, orphans, boots_in_flight)
    room = BootRoom(snapshot, settings, sizes, boots_in_flight)
    blocked = snapshot.blocked_sizes | snapshot.protected_sizes.keys() | snapshot.open_breakers.keys()
    usable = sorted((s for s in sizes.values() if s.name not in blocked
                     and s.instance_type not in blocked),
                    key=lambda s: (s.price, s.cores, s.ram_mb, s.name))
    why: dict[str, list[str]] = {}
    notes: list[str] = []
    unmet: list[Unmet] = []
    scaling = settings.node_mem_scaling
    needed: dict[str, str] = {}
    rates = {s.name: reclaim_rate(s, snapshot.reclaim_rates) for s in sizes.values()}
    limits = spot_limits(sizes.values(), snapshot.reclaim_rates, settings.max_rerun_share, settings.reclaim_penalty)
    took_in_flight: set[str] = set()
    # demand a global cap held back: (index of its note and unmet, nodes or money short, the least
    # that boots one node, which cap, the size it needs)
    starved: list[tuple[int, float, float, str, str]] = []
    several = len({s.cloud for s in sizes.values()}) > 1
    clouds: list[CloudChoice] = []

    def taken(owner: str | None, d: Demand, k: int) -> None:
        if owner is not None and owner.startswith(_IN_FLIGHT):
            took_in_flight.add(owner[1:])
        elif owner is not None and owner not in needed:
            needed[owner] = f"queued jobs need it ({k} job(s) of {d.cpus} cpus, {d.ram_mb} MB fit here)"

    # the most constrained first (GPUs, then few eligible sizes, then long runtimes: a short job
    # may fill a new on-demand node's spare cores, a long one must not fill a new spot node's)
    demand = sorted((d for d in snapshot.demand if d.count > 0),
                    key=lambda d: (-d.gpus, d.sizes is None, len(d.sizes or ()), -(priced_time(d) or 0.0), -d.cpus,
                                   -d.ram_mb, d.size or "", d.scratch_mb, d.count,
                                   d.oldest_submit or 0.0, sorted(d.sizes or ())))
    for d in demand:
        if d.sizes is not None and not d.sizes:
            sig = demand_signature(d)
            notes.append(f"{d.count} job(s) of {sig}: no size can run them: "
                         f"{d.unmatched or 'the scheduler matched no size'}")
            unmet.append(Unmet(sig, d.count, UNMATCHED, notes[-1]))
            continue
        want = _size_name(sizes, d.size)
        allowed = eligible(d, want)
        runs_for = priced_time(d)   # seconds: predicted, else requested
        too_long = {n for n, limit in limits.items() if runs_for is not None and runs_for > limit}
        if too_long:   # a spot market whose reclaims would re-run too much of these jobs
            allowed = (allowed if allowed is not None else frozenset(sizes)) - too_long
        left = d.count
        for tier in TIERS:
            left -= bins[tier].place(d, allowed, left, taken)
            if left <= 0:
                break
        if left <= 0:
            continue
        sig = demand_signature(d)
        label = f"{left} job(s) of {sig}"
        unplaced = left
        fitting = [s for s in sizes.values() if fits(s, d, scaling)
                   and (allowed is None or s.name in allowed)]
        choices = [s for s in usable if s in fitting]
        if not choices:
            names = sorted(s.name for s in fitting)
            notes.append(f"{label}: no size fits" + spot_words(too_long, limits) if not fitting else
                         f"{label}: every fitting size is blocked ("
                         f"{', '.join(_blocked_why(n, snapshot) for n in names)})")
            unmet.append(Unmet(label, left, "backoff" if fitting else "no_size", notes[-1]))
            continue
        while left > 0:
            best, need = pick(choices, left, d, scaling,
                              lambda s: expected_price(s, runs_for, settings.reclaim_penalty, rates[s.name]))
            per = max(per_node(best, d, scaling), 1)
            got, cause, kind = room.boot(best, need)
            if got:
                placed = min(left, got * per)
                left -= placed
                why.setdefault(best.name, []).append(f"{placed} job(s) of {sig}")
                if several:
                    clouds.append(choose_cloud(
                        sig, placed, d, best, sizes.values(), allowed, choices,
                        lambda s: expected_price(s, runs_for, settings.reclaim_penalty, rates[s.name]),
                        {n: _blocked_why(n, snapshot) if n not in snapshot.blocked_sizes else
                         f"{n}: refused by its cloud lately (quota or capacity)"
                         for n in sizes if n not in {c.name for c in choices}},
                        scaling))
                # what the new nodes have left over serves the smaller jobs that follow
                full, rest = divmod(placed, per)
                ram = best.ram_mb * scaling
                new = bins[NEW_BOOTS]
                for _ in range(full):
                    new.add(best.cores - per * d.cpus, ram - per * d.ram_mb, best.name, None,
                            best.gpus - per * d.gpus)
                if rest:
                    new.add(best.cores - rest * d.cpus, ram - rest * d.ram_mb, best.name, None,
                            best.gpus - rest * d.gpus)
                for _ in range(got - full - (1 if rest else 0)):
                    new.add(best.cores, ram, best.name, None, best.gpus)
            if cause is None:
                continue
            if kind in (SIZE_MAX, "max_total_price", PROBE) and len(choices) > 1:
                # another size may serve the rest (a cheaper node may fit the money left)
                choices = [s for s in choices if s is not best]
                continue
            queued = f"{left} job(s) of {sig} stay queued" if left < unplaced else label
            notes.append(f"{queued}: {need - got} more node(s) of {best.name} not booted: {cause}")
            unmet.append(Unmet(label, left, "max_nodes" if kind == SIZE_MAX else kind, notes[-1]))
            if kind in GIVE_WAY_CAPS:   # how many nodes, or how much money per hour, must be freed
                over = room.price - settings.max_total_price
                short, least = ((over + (need - got) * best.price, over + best.price) if kind == "max_total_price"
                                else (need - got, 1))
                starved.append((len(notes) - 1, short, least, kind, best.name))
            break

    took = Counter(f.size or "" for f in boots_in_flight if f.node not in took_in_flight)
    gives_way: dict[str, str] = {}
    warm = count_warm(sizes.values(), nodes, needed, took, snapshot.now)  # a blocked size's are kept too
    if warm and starved:   # warm nodes holding a slot or money queued jobs need give way
        warm, gave, gives_way = give_way(warm, [entry[1:] for entry in starved], sizes)
        for (i, *_), words in zip(starved, gave):
            if words:
                notes[i] += f"; {words}"
                unmet[i] = replace(unmet[i], text=notes[i])
    _min_nodes(settings, usable, room, up, boots_in_flight, why, notes, unmet, warm)
    return Placement([BootRequest(size=s, count=c, reason="; ".join(why.get(s, ())))
                      for s, c in sorted(room.boots.items())], notes, unmet, needed,
                     {nid: words for w in warm for nid, words in w.kept.items()}, gives_way, clouds)


def _min_nodes(settings: CoreSettings, usable: Sequence[Size], room: BootRoom, up: Sequence[str],
               boots_in_flight: Sequence[InFlight], why: dict[str, list[str]], notes: list[str],
               unmet: list[Unmet], warm: Sequence[WarmCount]) -> None:
    """Boot each size's warm capacity short, then up to each size's ``min_nodes``, then to the
    global ``min_nodes`` (cheapest size)."""
    by_name = {s.name: s for s in usable}
    # (size, least, what, counted: None the nodes up of the size, -1 of all); a blocked size boots none
    wants: list[tuple[Size, int, str, int | None]] = [(by_name[w.size], w.target, w.what, w.have)
                                                      for w in warm if w.size in by_name]
    wants += [(s, s.min_nodes, f"[Size {s.name}] min_nodes {s.min_nodes}", None) for s in usable
              if s.min_nodes > 0]
    have: dict[str, int] = {}
    # nodes up per size, counted only for a size's own min_nodes (a pass over every node)
    for name in [*up, *(f.size or "" for f in boots_in_flight)] if any(w[3] is None for w in wants) else ():
        have[name] = have.get(name, 0) + 1
    if usable:
        wants.append((usable[0], settings.min_nodes, f"min_nodes {settings.min_nodes}", -1))
    for size, least, what, counted in wants:
        count = (have.get(size.name, 0) + room.boots.get(size.name, 0) if counted is None
                 else len(up) + len(boots_in_flight) + sum(room.boots.values()) if counted < 0 else counted)
        if count >= least:
            continue
        got, cause, kind = room.boot(size, least - count)
        if got:
            why.setdefault(size.name, []).append(f"{what} ({count} {'up' if counted is None or counted < 0 else 'idle or booting'})")
        if cause:
            notes.append(f"{what}: {least - count - got} node(s) not booted: {cause}")
            unmet.append(Unmet(what, 0, "max_nodes" if kind == SIZE_MAX else kind, notes[-1]))
