"""The rules the replay's cycle skipping (:mod:`nodemanager.sim.skip`) rests on, pure: which time
dimensions the plan reads per worker state, which busy/idle changes the matrix leaves alone,
when consolidation relabels no node, and whether a queue is sure to fit on capacity left alone.
docs/simulator.md, "Skipping cycles", says why each is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from nodemanager.core.reasons import Stage, switched_on, time_dependent
from nodemanager.core.warm import warm_wanted
from nodemanager.model import Demand, ItemKind, Outcome, Plan
from nodemanager.core.settings import CoreSettings
from policy_matrix import Action, Matrix
from policy_matrix.vocabulary import BUSY, IDLE, IDLE_WAIT, UNPAIRED

__all__ = ["Capacity", "Settles", "settles", "booting_capacity", "fits", "no_spare", "time_reads",
           "TIME_DIMENSIONS", "SKIP_PROVEN", "destroys_settle", "settled_destroys"]

# the tuple's dimensions that change by time alone
TIME_DIMENSIONS = ("window", "boot_grace", "idle_grace")

# the reasons whose time dependence these rules follow exactly (consolidation: :func:`no_spare`);
# the replay runs every cycle while another's time settings are on
SKIP_PROVEN = frozenset({"consolidate"})

# (free cores, cores, memory MB) of one node as the placement counts its free capacity
Capacity = tuple[int, int, int]
# the core's bins hold memory as float products; counting a hair less keeps the bound safe
_RAM_MARGIN = 1e-9

def time_reads(matrix: Matrix, settings: CoreSettings) -> dict[str, frozenset[str]]:
    """Worker state -> the time dimensions (of :data:`TIME_DIMENSIONS`) whose value can change
    what the plan does with a node in that state: those along which the matrix's action varies,
    and boot grace for unpaired nodes (boot budgets, protection and mass down read it). With a
    relabelling reason that depends on time on (:func:`nodemanager.core.reasons.time_dependent`
    of stage LABELS: consolidation, ``max_lifetime``), which looks the time dimensions up under
    another state, every state reads all three."""
    vocabulary = matrix.vocabulary
    states = next(d.values for d in vocabulary.dimensions if d.name == "worker_state")
    if time_dependent(settings, Stage.LABELS):
        return {ws: frozenset(TIME_DIMENSIONS) for ws in states}
    # (worker state, the tuple without dimension k) -> the actions seen
    seen: dict[tuple[int, tuple[str, ...]], set[Action]] = {}
    for st in vocabulary.all_tuples():
        values = st.as_tuple()
        action = matrix.lookup(st).action
        for k in range(1, 4):
            seen.setdefault((k, values[:k] + values[k + 1:]), set()).add(action)
    out = {ws: {"boot_grace"} if vocabulary.core_state(ws) == UNPAIRED else set() for ws in states}
    for (k, rest), actions in seen.items():
        if len(actions) > 1:
            out[rest[0]].add(TIME_DIMENSIONS[k - 1])
    return {ws: frozenset(read) for ws, read in out.items()}


@dataclass(frozen=True)
class Settles:
    """Which node state changes need no cycle (see :func:`settles`): a VM coming up always;
    ``busy``: a node turning busy (every tuple of a busy node is NONE); ``idle_wait``: a node
    turning idle (every tuple of an idle node in its idle grace is NONE; ``idle_grace``: that
    grace, fixed)."""

    busy: bool
    idle_wait: bool
    idle_grace: float


def settles(matrix: Matrix, settings: CoreSettings) -> Settles | None:
    """The :class:`Settles` of ``matrix``; None with spot sizes (the cloud takes a VM back or
    gives notice between cycles; the controller then keeps its worker as last seen, which must be
    its state then). No busy/idle change settles where it may matter beyond the node's own tuple
    and placement: a grace that follows the idle history (break-even), relabels (consolidation,
    lifetimes, settings drift)."""
    if any(s.market == "spot" for s in settings.sizes):
        return None
    steady = _steady(settings)
    tuples = list(matrix.vocabulary.all_tuples())
    busy = steady and all(matrix.lookup(t).action is Action.NONE for t in tuples
                          if t.worker_state == BUSY)
    idle_wait = steady and all(matrix.lookup(t).action is Action.NONE for t in tuples
                               if t.worker_state == IDLE and t.idle_grace == IDLE_WAIT)
    return Settles(busy, idle_wait, settings.idle_grace)


def _steady(settings: CoreSettings) -> bool:
    """No node's plan reads the pool beyond its own tuple and placement: a fixed idle grace (not
    one following the idle history), no relabels (the LABELS reasons turned on: consolidation,
    lifetimes, settings drift), no reason that depends on time
    (:func:`nodemanager.core.reasons.time_dependent`), no warm capacity (a node turning busy
    leaves its size short of idle nodes)."""
    return not (settings.idle_grace_mode != "fixed" or switched_on(settings, Stage.LABELS)
                or time_dependent(settings) or warm_wanted(settings))


def destroys_settle(settings: CoreSettings) -> bool:
    """Whether a cycle that only destroyed nodes (:func:`settled_destroys`) may be taken as
    planning nothing for what comes next: with a steady plan (no break-even idle history, which a
    destroy ends a period of; no relabels, which read the pool) and no spot sizes."""
    return not any(s.market == "spot" for s in settings.sizes) and _steady(settings)


def settled_destroys(plan: Plan, outcomes: Sequence[Outcome]) -> bool:
    """The cycle that planned ``plan`` did nothing but destroy nodes, all gone through, and the
    same world less those nodes plans nothing: no boot, no demand unmet (a destroy frees room
    under ``max_nodes``), not frozen, and no node's want held back (a budget or ``min_nodes``
    the destroys free could release it). Each destroyed node's entry leaves with its node."""
    if not plan.items or plan.boots or plan.unmet or plan.frozen is not None:
        return False
    if any(i.kind is not ItemKind.DESTROY for i in plan.items) or len(outcomes) != len(plan.items):
        return False
    if any(o.kind != ItemKind.DESTROY.value or o.result != "ok" for o in outcomes):
        return False
    return not any(e.action is None and e.blocked_by is not None and e.matrix_action is not Action.NONE
                   for e in plan.nodes)


def booting_capacity(settings: CoreSettings) -> dict[str, Capacity]:
    """Size name -> the capacity placement counts on a node of it that is booting: all its cores
    and its memory x ``node_mem_scaling`` (in whole MB, a hair less than the core's bins). Not
    for GPU sizes (placement keeps their GPUs apart) nor spot ones (a notice may reach a VM
    before its startd joins, unseen by the pool)."""
    return {s.name: (s.cores, s.cores, int(s.ram_mb * settings.node_mem_scaling))
            for s in settings.sizes if s.cores > 0 and not s.gpus and s.market != "spot"}


def no_spare(spare: int, free: Mapping[int, int], margin: int) -> bool:
    """Consolidation (:func:`nodemanager.core.consolidate.relabel`) relabels no busy node when its
    busy nodes hold ``spare`` free cores in all, counted by each node's free cores in ``free``.

    It relabels a node with F > 0 free cores only while the cores left, spare - F, still cover the
    margin; before the first relabel every node sees the whole ``spare``, so none is relabelled
    iff spare - F < margin for the smallest F. Counting more nodes than it does (a superset)
    only raises spare - F: the answer stays safe."""
    if not free:
        return True
    return spare - min(free) < margin


def fits(demand: Sequence[Demand], free: Mapping[Capacity, int]) -> bool:
    """Every job of ``demand`` is sure to be placed by :func:`nodemanager.core.placement.place_demand`
    on busy, idle and booting nodes (its tiers before the drains it would cancel and the new
    boots) whose free capacity, (free cores, cores, memory MB), is counted in ``free``, whatever
    the order it fills them in.

    For a job shape s (cores c, memory r), a node with F free cores and R free memory (the node's
    memory x F / cores, as the placement counts it) holds min(F // c, R // r) such jobs; the
    placement takes the shapes largest first, and a job of shape s' placed anywhere lowers that
    count by at most max(ceil(c'/c), ceil(r'/r)). So if, for each shape in the placement's order,
    the nodes hold at least the jobs of that shape plus every earlier job's worst-case toll, no
    job goes past those nodes (no boot, no cancelled drain, no held-back drain or destroy)."""
    # GPUs, eligible sizes and walltimes or runtimes change what the placement may use and its order
    if any(d.size is not None or d.gpus or d.sizes is not None or d.walltime is not None
           or d.runtime is not None for d in demand):
        return False
    shapes = sorted((d for d in demand if d.count > 0), key=lambda d: (-d.cpus, -d.ram_mb))
    for k, d in enumerate(shapes):
        c, r = max(d.cpus, 1), d.ram_mb
        need = d.count
        for e in shapes[:k]:
            need += e.count * max(-(-e.cpus // c), -(-e.ram_mb // r) if r > 0 else 0)
        room = 0
        for (cores_free, cores, mem), n in free.items():
            per = cores_free // c
            if r > 0 and per:
                per = min(per, math.floor(mem * cores_free / cores * (1 - _RAM_MARGIN) / r))
            room += n * per
            if room >= need:
                break
        if room < need:
            return False
    return True
