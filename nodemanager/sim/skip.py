"""Which controller cycles a replay may skip: those at which the core would plan nothing.

The base rule is the one Karpenter's consolidation uses (``IsConsolidated`` /
``markConsolidated``): a counter that every input bumps (:attr:`CycleWatch.changes`: a VM
launched, up or gone, as the cloud's listing shows it; a startd changed, as the pool's poll shows
it: jobs started, ended or killed, drains; a job submitted, the queue; the replay has no admin
state) is marked after a cycle L that planned nothing, and until it moves a cycle is skipped up to
the earliest time the core itself says a node's tuple changes by time alone
(:attr:`NodeExplanation.next_change`, from :mod:`nodemanager.core.facts`).

A few finer rules let a cycle be skipped although an input changed. Each is kept because it pays
(docs/simulator.md, "Skipping cycles", gives the measurements), names the core function it mirrors,
and is checked against the core by ``tests/test_sim_skip_core.py``: at every cycle skipped, the
policy's planner run on that moment's listing and poll plans no action and no boot.

* equal inputs: since L every node's state as the plan reads it (booting / up without a worker /
  busy / idle / draining / drained) and, while jobs queue, the queue by shape and every node's
  free cores are as at L (a change undone counts as none);
* :meth:`CycleWatch.fits` (:func:`nodemanager.core.placement.place_demand`): every queued job is
  sure to fit on the free cores of the busy, idle and booting nodes L left alone, so the queue
  may change freely;
* :func:`settles` (the matrix's lookup): a VM coming up, and a node's turn from busy to idle or
  back that the matrix leaves alone (a node gone idle wakes the replay at its idle grace's end);
* :func:`no_spare` (:func:`nodemanager.core.consolidate.relabel`): under consolidation, a
  free-core change when consolidation relabels no node at L nor now;
* :func:`settled_destroys`: a cycle that only destroyed nodes counts as one that planned nothing;
* :func:`time_reads` with :meth:`CycleWatch.wake` (the matrix's lookup and
  :func:`nodemanager.core.billing.boot_grace_state`): a node's tuple changing by time alone in a
  dimension the plan does not read for its worker state (a busy node's billing window, a booting
  node's window opening under the shipped matrix) wakes nothing.

Everything is kept up to date from the nodes the pool reports changed (:attr:`SimPool.touched`),
so a check costs what changed, not the pool's size. The pure rules live in
:mod:`nodemanager.sim.skip_rules`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Mapping, Sequence

from nodemanager.core.billing import (BOOT_GRACE_ENDS, IDLE_GRACE_ENDS, WINDOW_CLOSES, WINDOW_OPENS,
                                      boot_grace_state)
from nodemanager.model import CloudNode, Demand, NodeExplanation, Plan
from nodemanager.sim.pool import SimPool
from nodemanager.sim.skip_rules import (TIME_DIMENSIONS, Capacity, Settles, booting_capacity,
                                        destroys_settle, fits, no_spare, settled_destroys, settles,
                                        time_reads)
from policy_matrix import Action
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, IDLE, UNPAIRED

__all__ = ["CycleWatch", "Capacity", "Settles", "settles", "booting_capacity", "fits", "no_spare",
           "time_reads", "TIME_DIMENSIONS", "destroys_settle", "settled_destroys"]

BOOT = frozenset({"boot_grace"})
# what NodeFacts.next_change says of a change of one of them
_TIME_CHANGES = frozenset({WINDOW_OPENS, WINDOW_CLOSES, BOOT_GRACE_ENDS, IDLE_GRACE_ENDS})


class CycleWatch:
    """Tells the replay whether a cycle may be skipped (see the module doc).

    ``live``: the nodes launched and not destroyed; ``running``: those whose VM is up;
    ``core_state``: the matrix vocabulary's core state of a worker state. Call
    :meth:`node_changed` for every node launched, started, stopped or whose startd changed
    (:attr:`SimPool.touched`), :meth:`queue_changed` for every job submitted, :meth:`mark` after
    every cycle that ran, and :meth:`unchanged` before a cycle to ask whether it may be skipped. ``free_matters``: the plan reads free cores
    even with nothing queued (consolidation, a baseline reading every node's load): any change of them runs a cycle, unless
    ``margin`` (consolidation's ``consolidate_margin``) is given and :meth:`quiet` holds both at L
    and now (consolidation relabels no node either time, see :func:`no_spare`)."""

    def __init__(self, pool: SimPool, live: Mapping[str, object], running: Mapping[str, object],
                 core_state: Callable[[str], str], free_matters: bool = False,
                 margin: int | None = None, settles: Settles | None = None,
                 booting: Mapping[str, Capacity] | None = None) -> None:
        self._pool = pool
        self.changes = 0                                 # bumped by every input (see changed())
        self._changes_at_mark = -1
        self._booting = booting or {}
        self._settles = settles
        self.soon = math.inf                             # a wake the skipped changes ask for
        self._free_matters = free_matters
        self._margin = margin
        self._spare: dict[str, int] = {}                 # busy node -> its free cores (if > 0)
        self._spare_sum = 0
        self._spare_hist: Counter[int] = Counter()      # ... counted by free cores
        self._quiet0 = False                             # quiet() at L
        self._live = live
        self._running = running
        self._core_state = core_state
        self._core: dict[str, str] = {}                  # worker state -> core state
        self._marked = False
        self._since_mark: set[str] = set()               # nodes changed since the last mark
        self._base: dict[str, tuple[bool, ...]] = {}     # node -> its state at L
        self._free0: dict[str, int] = {}                 # node -> its free cores at L
        self._demand0: tuple[tuple[object, ...], ...] = ()
        self._differ: set[str] = set()                   # nodes whose state is not L's
        self._free_differ: set[str] = set()              # nodes whose free cores are not L's
        self._changed: set[str] = set()                  # nodes changed since last looked
        self._capnow: dict[str, Capacity | None] = {}   # live node -> its free capacity now
        # read from L's plan only when a check needs it (most cycles that run are never asked)
        self._plan: Plan | None = None
        self._held: bool | None = None                   # L held a node's want back
        self._cap: dict[str, Capacity | None] | None = None  # nodes left alone at L -> free capacity
        self._hist: Counter[Capacity] = Counter()       # ... counted by capacity

    def node_changed(self, node_id: str) -> None:
        """``node_id`` was launched, its VM started or stopped, or its startd changed."""
        self._changed.add(node_id)
        self.changes += 1

    def queue_changed(self) -> None:
        """A job was submitted (the other queue changes come with a node's: a start, an end, a kill)."""
        self.changes += 1

    def mark(self, plan: Plan) -> None:
        """Cycle L ran and planned ``plan``: the state now is what later cycles compare with."""
        self._absorb()
        base, free0, capnow = self._base, self._free0, self._capnow
        # a node's state changes only with a change reported for it: the others are as they were
        for nid in self._since_mark:
            if nid in self._live:
                base[nid] = self._state(nid)
                free0[nid] = self._free(nid)
            else:
                base.pop(nid, None)
                free0.pop(nid, None)
                capnow.pop(nid, None)
        self._since_mark.clear()
        self._marked = True
        self._changes_at_mark = self.changes
        self.soon = math.inf
        demand = self._pool.demand()
        self._demand0 = _shape(demand)
        self._quiet0 = self.quiet(demand)
        self._differ.clear()
        self._free_differ.clear()
        self._plan = plan
        self._held = None
        self._cap = None

    def _held_back(self) -> bool:
        """L held back a node's want: by demand, or by anything the demand might replace (it could
        go once the demand changes: then only an unchanged queue allows a skip)."""
        if self._held is None:
            plan = self._plan
            self._held = plan is None or any(e.action is None and e.blocked_by is not None
                                             and e.matrix_action is not Action.NONE for e in plan.nodes)
        return self._held

    def _left_alone(self) -> Counter[Capacity]:
        """The free capacity now of the busy and idle nodes L left alone (and held nothing back
        for), and of the nodes booting at L that the matrix leaves alone (``booting``: a size's
        capacity), counted by capacity; kept up to date by :meth:`_absorb` once built. A booting
        node stays booting until it joins or goes, which runs a cycle (its VM coming up does not)."""
        if self._cap is None:
            self._cap, self._hist = {}, Counter()
            base, capnow, core, booting = self._base, self._capnow, self._core, self._booting
            for e in self._plan.nodes if self._plan is not None else ():
                if e.action is None and e.blocked_by is None and e.node_id in base:
                    ws = e.tuple.worker_state
                    cs = core.get(ws)
                    if cs is None:
                        cs = core[ws] = self._core_state(ws)
                    if cs in (IDLE, BUSY):
                        cap = capnow.get(e.node_id)
                        self._cap[e.node_id] = cap
                        if cap is not None:
                            self._hist[cap] += 1
                    elif (cs == UNPAIRED and e.tuple.boot_grace != BOOT_EXCEEDED
                          and e.matrix_action is Action.NONE and e.size in booting):
                        self._hist[booting[e.size]] += 1
        return self._hist

    def unchanged(self) -> bool:
        """True if a cycle now cannot plan anything that cycle L did not (so it may be skipped)."""
        if not self._marked:
            return False
        if self.changes == self._changes_at_mark:
            return True                                  # no input changed since L
        self._absorb()
        if self._differ and not self._settled():
            return False
        demand = self._pool.demand()
        # free cores read with nothing queued, unless consolidation relabels nothing at L or now
        free_read = self._free_matters and not (self._quiet0 and self.quiet(demand))
        if free_read and self._free_differ:
            return False
        if _shape(demand) == self._demand0 and (not demand or not self._free_differ):
            return True
        if free_read:
            return False  # whether anything is queued decides which nodes are underused
        return not self._held_back() and self.fits(demand)

    def _settled(self) -> bool:
        """Every node whose state is not L's only had its VM come up (no startd yet: unpaired and
        booting as before, the core tells pending from running only for spot reclaims), or went
        from idle to busy or from busy to idle (none draining) and the matrix leaves it alone in
        its new state (:class:`Settles`) while no node's want was held back at L (freeing or
        taking capacity then changes nothing but placement, which the queue test covers). A node
        that went idle moves :attr:`soon` to its idle grace's end (from
        :attr:`SimStartd.idle_since`, as the plan counts it)."""
        rules = self._settles
        if rules is None:
            return False
        base, soon = self._base, self.soon
        for nid in self._differ:
            st = self._pool.startd(nid)
            was = base.get(nid)
            if st is None:
                if was == _LAUNCHED and nid in self._running and nid in self._live:
                    continue
                return False
            if (not st.alive or st.draining or st.drain_complete or st.reclaim_deadline is not None
                    or self._held_back()):
                return False
            if st.dslots:
                if not rules.busy or was != _IDLE_STATE:
                    return False
            elif rules.idle_wait and was == _BUSY_STATE:
                soon = min(soon, st.idle_since + rules.idle_grace)
            else:
                return False
        self.soon = soon
        return True

    def quiet(self, demand: Sequence[Demand]) -> bool:
        """Consolidation (with ``margin``) is sure to relabel no node now, whatever the free cores'
        other changes: jobs queue, or the busy nodes' free cores leave no node spare
        (:func:`no_spare`). False without ``margin``."""
        if self._margin is None:
            return False
        return any(d.count > 0 for d in demand) or no_spare(self._spare_sum, self._spare_hist,
                                                            self._margin)

    def fits(self, demand: Sequence[Demand]) -> bool:
        """Every job of ``demand`` is sure to be placed on the nodes the plan left alone at L."""
        return fits(demand, self._left_alone())

    def wake(self, plan: Plan, now: float, reads: Mapping[str, frozenset[str]], boot_grace: float,
             cloud_node: Callable[[str], CloudNode | None]) -> float:
        """The earliest time after ``now`` at which a node's tuple changes by time alone in a way
        the plan reads (inf: none), for a ``plan`` just made; ``reads``: :func:`time_reads`.
        A change due at ``now`` itself (a window opening at this very instant is still "closed"
        by the strict test) is looked at just after."""
        soon = math.inf
        for e in plan.nodes:
            at = e.next_change
            if at is not None and at < soon:
                at = self._read_change(e, at, reads, boot_grace, cloud_node, now)
                if at is not None and at < soon:
                    soon = at
        return max(soon, now + 1e-6)

    def _read_change(self, e: NodeExplanation, at: float, reads: Mapping[str, frozenset[str]],
                     boot_grace: float, cloud_node: Callable[[str], CloudNode | None],
                     now: float) -> float | None:
        """When ``e``'s tuple next changes in a dimension the plan reads, if it is sure to be no
        earlier than ``e``'s next change ``at`` (else ``at``): none if it reads no time
        dimension, its boot grace's end if that is all it reads (what the core's facts compute).
        Only without a drain on the node: a foreign drain's reclaim time may hide behind ``at``."""
        read = reads.get(e.tuple.worker_state)
        if read is None or e.next_change_what not in _TIME_CHANGES or not read <= BOOT:
            return at
        st = self._pool.startd(e.node_id)
        if st is not None and st.draining:
            return at
        if not read:
            return None
        node = cloud_node(e.node_id)
        return at if node is None else boot_grace_state(node.launched_at, now, boot_grace).next_change

    # ---- keeping up with the pool -----------------------------------------------------------

    def _absorb(self) -> None:
        touched = self._changed
        if not touched:
            return
        self._since_mark |= touched
        base, free0, capnow = self._base, self._free0, self._capnow
        cap = self._cap if self._cap is not None else {}
        for nid in touched:
            live = nid in self._live
            state = self._state(nid) if live else None
            if state != base.get(nid):
                self._differ.add(nid)
            else:
                self._differ.discard(nid)
            if self._free(nid) != free0.get(nid):
                self._free_differ.add(nid)
            else:
                self._free_differ.discard(nid)
            if self._margin is not None:
                self._count_spare(nid, live)
            new = self._capacity(nid) if live else None
            capnow[nid] = new
            if nid in cap:
                old = cap[nid]
                if new != old:
                    if old is not None:
                        self._hist[old] -= 1
                        if not self._hist[old]:
                            del self._hist[old]
                    if new is not None:
                        self._hist[new] += 1
                    cap[nid] = new
        touched.clear()

    def _count_spare(self, nid: str, live: bool) -> None:
        """Keep the busy nodes' free cores (what consolidation counts spare) up to date for ``nid``:
        a live node running jobs, neither draining nor reclaimed (a superset of consolidation's
        candidates, which only makes :func:`no_spare` say False more often)."""
        st = self._pool.startd(nid) if live else None
        new = (st.free_cpus if st is not None and st.alive and st.dslots and not st.draining
               and st.reclaim_deadline is None else 0)
        old = self._spare.pop(nid, 0)
        if old > 0:
            self._spare_sum -= old
            self._spare_hist[old] -= 1
            if not self._spare_hist[old]:
                del self._spare_hist[old]
        if new > 0:
            self._spare[nid] = new
            self._spare_sum += new
            self._spare_hist[new] += 1

    def _state(self, nid: str) -> tuple[bool, ...]:
        st = self._pool.startd(nid)
        if st is None:
            return (nid in self._running,)
        return (bool(st.dslots), st.draining, st.drain_complete, st.reclaim_deadline is not None)

    def _free(self, nid: str) -> int:
        st = self._pool.startd(nid)
        return -1 if st is None else st.free_cpus

    def _capacity(self, nid: str) -> Capacity | None:
        """What the placement counts free on the node: all of an idle one, the cores no job holds
        on a busy one (and the memory in proportion); None if it offers nothing."""
        st = self._pool.startd(nid)
        if st is None or not st.alive or st.draining or st.cpus <= 0 or st.reclaim_deadline is not None:
            return None
        free = st.free_cpus if not st.dslots or st.free_cpus < st.cpus else 0
        return (free, st.cpus, st.memory) if free > 0 else None


_LAUNCHED = (False,)                         # CycleWatch._state of a VM not up yet
_BUSY_STATE = (True, False, False, False)    # ... of a busy node not draining
_IDLE_STATE = (False, False, False, False)   # ... of an idle one


def _shape(demand: Sequence[Demand]) -> tuple[tuple[object, ...], ...]:
    return tuple((d.cpus, d.ram_mb, d.count, d.gpus, d.sizes, d.walltime, d.user, d.name, d.runtime) for d in demand)
