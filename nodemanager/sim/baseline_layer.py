"""What some peers do that no matrix or setting of our core expresses: the simulator's layer over
:func:`nodemanager.core.plan` for those baselines (never used by the daemon).

* :func:`random_expander`: cluster-autoscaler's default ``--expander=random``: each scale-up
  goes to one node group chosen at random among those whose size fits the largest pending job.
* :func:`karpenter`: Karpenter's ``WhenEmptyOrUnderutilized`` consolidation of non-empty nodes,
  as a graceful drain (batch jobs cannot be evicted and rescheduled; no job is killed).
* :func:`cobald`: COBalD's ``LinearController`` over a TARDIS ``FactoryPool`` of drones: boots
  and releases follow utilisation and allocation, never the job queue.

Each returns a planner with :func:`nodemanager.core.plan`'s signature. Sources and parameters:
``docs/simulator.md`` (baselines) and ``../shared/notes/consolidation-and-matchmaking.md``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence

from nodemanager.model import BootRequest, CloudNode, ItemKind, Plan, PlanItem, Size, Snapshot

__all__ = ["Planner", "random_expander", "karpenter", "cobald", "Load", "fits_elsewhere",
           "consolidation_candidate", "layer_planner",
           "linear_control"]

Planner = Callable[..., Plan]


class _Startd(Protocol):
    alive: bool
    draining: bool
    cpus: int
    memory: int
    free_cpus: int
    free_memory: int

    def running(self) -> Any: ...


class _Pool(Protocol):
    def startd(self, node_id: str) -> _Startd | None: ...


def _core() -> Planner:
    from nodemanager.core import plan

    return plan


def _worker_of(snapshot: Snapshot, node: CloudNode) -> str | None:
    return next((w.name for w in snapshot.workers if w.cloud_id == node.id), None)


def _busy_nodes(snapshot: Snapshot) -> set[str]:
    """Nodes with an action of ours under way (a drain, a destroy, a cancel)."""
    return {f.node for f in snapshot.in_flight if f.action != "boot"}


# ---- cluster-autoscaler: --expander=random ------------------------------------------------------

def random_expander(sizes: Sequence[Size], seed: int = 0, inner: Planner | None = None) -> Planner:
    """The core's plan with its boots moved to one size picked at random among those with at
    least the largest pending job's cores, as many nodes as hold the cores the core booted
    (within ``max_nodes``). Seeded: a replay is repeatable."""
    rng = random.Random(seed)
    by_name = {s.name: s for s in sizes}
    base = inner or _core()

    def planner(snapshot: Snapshot, settings: Any, matrix: Any, **kw: Any) -> Plan:
        p = base(snapshot, settings, matrix, **kw)
        if not p.boots or len(by_name) < 2:
            return p
        cores = sum(by_name[b.size].cores * b.count for b in p.boots if b.size in by_name)
        widest = max((d.cpus for d in snapshot.demand if d.count > 0), default=1)
        options = sorted((s for s in by_name.values() if s.cores >= widest), key=lambda s: s.name)
        if not options or not cores:
            return p
        pick = rng.choice(options)
        room = max(0, settings.max_nodes - len(snapshot.cloud_nodes))
        count = min(room, -(-cores // pick.cores))
        if count <= 0:
            return replace(p, boots=())
        why = f"expander random chose {pick.name} for {cores} cores"
        return replace(p, boots=(BootRequest(size=pick.name, count=count, reason=why),))

    return planner


# ---- Karpenter: consolidation WhenEmptyOrUnderutilized ------------------------------------------

@dataclass(frozen=True)
class Load:
    """One node's place in a consolidation simulation."""

    node_id: str
    price: float
    jobs: tuple[tuple[int, int], ...]     # (cpus, ram_mb) of each running job
    free_cpus: int
    free_ram: int


def fits_elsewhere(jobs: Sequence[tuple[int, int]], others: Sequence[Load]) -> bool:
    """Would ``jobs`` fit on the free room of ``others``, placed first-fit decreasing (by cpus,
    then memory, as Karpenter's scheduling simulation sorts pods)?"""
    room = [[o.free_cpus, o.free_ram] for o in others]
    for cpus, ram in sorted(jobs, reverse=True):
        for r in room:
            if r[0] >= cpus and r[1] >= ram:
                r[0] -= cpus
                r[1] -= ram
                break
        else:
            return False
    return True


def consolidation_candidate(loads: Sequence[Load], leaving: Sequence[tuple[int, int]],
                            allowed: int) -> str | None:
    """Karpenter's single-node consolidation: the node to give back, or None. Candidates in
    descending savings ratio (price / (1 + its jobs), v1.14); the first whose jobs, with those of
    nodes already leaving, fit on the others is taken, if the budget ``allowed`` one more."""
    if allowed <= 0:
        return None
    order = sorted((ld for ld in loads if ld.jobs),
                   key=lambda ld: (-ld.price / (1 + len(ld.jobs)), ld.node_id))
    for cand in order:
        others = [ld for ld in loads if ld.node_id != cand.node_id]
        if fits_elsewhere(list(cand.jobs) + list(leaving), others):
            return cand.node_id
    return None


def karpenter(pool: _Pool, sizes: Sequence[Size], *, consolidate_after: float = 0.0,
              budget: float = 0.10, inner: Planner | None = None) -> Planner:
    """The core's plan (empty nodes: the karpenter matrix), and when it does nothing and no job
    queues, one graceful drain of an underutilised node whose jobs fit on the other nodes'
    free room. ``budget``: the share of nodes that may be leaving at once, rounded up
    (Karpenter's default ``nodes: "10%"``); ``consolidate_after``: since the node's last job
    start."""
    base = inner or _core()
    price = {s.name: s.price for s in sizes}

    def planner(snapshot: Snapshot, settings: Any, matrix: Any, **kw: Any) -> Plan:
        p = base(snapshot, settings, matrix, **kw)
        drains = [i for i in p.items if i.kind is ItemKind.DRAIN]
        acting = _busy_nodes(snapshot)
        ready: list[tuple[CloudNode, _Startd]] = []
        for node in snapshot.cloud_nodes:
            st = pool.startd(node.id)
            if st is not None and st.alive:
                ready.append((node, st))
        leaving_ids = {n.id for n, st in ready if st.draining or n.id in acting}
        allowed = math.ceil(budget * (len(ready) - len(leaving_ids))) - len(leaving_ids)
        if len(drains) > allowed:          # the budget covers empty nodes too
            cut = {i.node_id for i in drains[max(allowed, 0):]}
            p = replace(p, items=tuple(i for i in p.items if i.node_id not in cut))
        if p.items or p.boots or any(d.count > 0 for d in snapshot.demand):
            return p
        now = snapshot.now
        loads: list[Load] = []
        leaving: list[tuple[int, int]] = []
        for node, st in ready:
            jobs = tuple((job.cpus, job.ram_mb) for job, _ in st.running())
            if node.id in leaving_ids:
                leaving.extend(jobs)
                continue
            last = max((start for _, start in st.running()), default=-math.inf)
            loads.append(Load(node.id, price.get(node.size, 0.0),
                              jobs if now - last >= consolidate_after else (),
                              st.free_cpus, st.free_memory))
        pick = consolidation_candidate(loads, leaving, allowed)
        if pick is None:
            return p
        node = next(n for n, _ in ready if n.id == pick)
        worker = _worker_of(snapshot, node)
        if worker is None:
            return p
        load = next(ld for ld in loads if ld.node_id == pick)
        item = PlanItem(kind=ItemKind.DRAIN, node_id=node.id, node_name=node.name, worker=worker,
                        reason=f"consolidation: its {len(load.jobs)} job(s) fit on other nodes")
        return replace(p, items=(item,))

    return planner


# ---- COBalD/TARDIS: LinearController over a FactoryPool -----------------------------------------

def linear_control(demand: float, utilisation: float, allocation: float, *, low: float,
                   high: float, rate: float, dt: float, minimum: float, maximum: float) -> float:
    """COBalD's ``LinearController`` step over ``dt`` seconds, then the ``Limiter``'s bounds:
    lower by rate x dt below ``low`` utilisation, else raise above ``high`` allocation."""
    if utilisation < low:
        demand -= rate * dt
    elif allocation > high:
        demand += rate * dt
    return min(max(demand, minimum), maximum)


def cobald(pool: _Pool, size: Size, *, low: float = 0.9, high: float = 0.9, rate: float = 1.0,
           minimum: float = 1.0, memory_ratio: bool = False, interval: float = 30.0,
           inner: Planner | None = None) -> Planner:
    """COBalD with one machine type, ``size``: demand D in cores follows
    :func:`linear_control` on the drones' mean utilisation (the least of their used shares: of
    cores, and of memory with ``memory_ratio``) and allocation (the largest), both 1.0 with no
    drone available; each cycle the FactoryPool
    spawns drones until their demand reaches D, or releases (least ``supply x utilisation``
    first) drones whose demand fits in the excess. A released drone still booting is destroyed;
    a running one is drained gracefully and destroyed when empty. The core keeps destroying
    drained and broken nodes; its own boots and drain cancels are dropped. ``interval``: the
    cycle; the planner's ``moving`` is true while D moves (the replay then skips no cycle)."""
    base = inner or _core()
    state = {"demand": 0.0, "at": math.nan}

    def planner(snapshot: Snapshot, settings: Any, matrix: Any, **kw: Any) -> Plan:
        p = base(snapshot, settings, matrix, **kw)
        now = snapshot.now
        acting = _busy_nodes(snapshot)
        drones, shares = [], []
        for node in snapshot.cloud_nodes:
            if node.id in acting:
                continue
            st = pool.startd(node.id)
            if st is not None and (not st.alive or st.draining):
                continue
            drones.append((node, st))
            if st is not None:
                used_c = (st.cpus - st.free_cpus) / max(st.cpus, 1)
                used_m = (st.memory - st.free_memory) / max(st.memory, 1) if memory_ratio else used_c
                shares.append((min(used_c, used_m), max(used_c, used_m)))
        u = sum(s[0] for s in shares) / len(shares) if shares else 1.0
        a = sum(s[1] for s in shares) / len(shares) if shares else 1.0
        # a cycle skipped by the replay saw the same U and A, so D did not move then either
        dt = 0.0 if math.isnan(state["at"]) else min(now - state["at"], interval)
        state["at"] = now
        before = state["demand"]
        state["demand"] = linear_control(before, u, a, low=low, high=high, rate=rate,
                                         dt=dt, minimum=minimum,
                                         maximum=settings.max_nodes * size.cores)
        planner.moving = state["demand"] != before  # type: ignore[attr-defined]
        items = [i for i in p.items if i.kind is not ItemKind.CANCEL_DRAIN]
        target = state["demand"]
        held = size.cores * len(drones)
        boots: tuple[BootRequest, ...] = ()
        if held < target:
            room = max(0, settings.max_nodes - len(snapshot.cloud_nodes))
            count = min(room, math.ceil((target - held) / size.cores))
            if count:
                boots = (BootRequest(size=size.name, count=count,
                                     reason=f"COBalD demand {target:.0f} cores, drones hold {held}"),)
        else:
            excess = held - target
            def weight(d: tuple[CloudNode, _Startd | None]) -> tuple[float, str]:
                st = d[1]
                used = 0.0 if st is None else (st.cpus - st.free_cpus) / max(st.cpus, 1)
                return (0.0 if st is None else st.cpus * used, d[0].id)
            taken = {i.node_id for i in items}
            for node, st in sorted(drones, key=weight):
                if excess < size.cores:
                    break
                if node.id in taken:
                    continue
                excess -= size.cores
                why = f"COBalD released it: demand {target:.0f} cores, drones hold {held}"
                worker = _worker_of(snapshot, node)
                if st is None or worker is None:
                    items.append(PlanItem(kind=ItemKind.DESTROY, node_id=node.id,
                                          node_name=node.name, reason=why))
                else:
                    items.append(PlanItem(kind=ItemKind.DRAIN, node_id=node.id,
                                          node_name=node.name, worker=worker, reason=why))
        return replace(p, items=tuple(items), boots=boots)

    return planner


def layer_planner(policy: Any, pool: _Pool, inner: Planner | None = None) -> Planner | None:
    """The planner for ``policy``'s ``layer`` (None: the core's plan, or ``inner``, as is)."""
    sizes = policy.settings.core.sizes
    prm = policy.params
    if policy.layer == "expander-random":
        return random_expander(sizes, inner=inner)
    if policy.layer == "karpenter":
        return karpenter(pool, sizes, consolidate_after=prm["consolidate_after"],
                         budget=prm["budget"], inner=inner)
    if policy.layer == "cobald":
        return cobald(pool, max(sizes, key=lambda s: s.cores), low=prm["low_utilisation"],
                      high=prm["high_allocation"], rate=prm["rate"], minimum=prm["minimum"],
                      memory_ratio=prm["memory_ratio"], interval=prm["interval"], inner=inner)
    return inner
