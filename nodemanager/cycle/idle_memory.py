"""The controller's memory for break-even idle timing (``idle_grace_mode = break-even``): per
size, the recent boot+join times and how the recent idle periods ended. Kept in memory only: a
restart starts from the configured ``idle_grace`` again.

Read from each plan's node explanations (the core classified the nodes):

- boot+join: a node first listed without a worker in boot wait, later seen with one: the seconds
  from its launch time to the first cycle it had a worker;
- an idle period starts the first cycle a node is seen idle (not draining by us); it ends
  *re-used* the first cycle the node is busy (after how long), or *given back* when the node
  leaves the listing, is gone or drained by us. A given-back period is re-used by the next boot
  of its size within ``idle_grace`` of its start (that node could have run the job: after how
  long), else never.

Everything is decided at the cycle an event is seen (not by time alone), so a replay that skips
quiet cycles remembers the same. Bounded: the last :data:`KEEP_PERIODS` periods and
:data:`KEEP_JOINS` joins of a size within :data:`KEEP_SECONDS`.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from nodemanager.core.idle_timing import break_even_grace
from nodemanager.configuration.settings import CoreSettings
from nodemanager.model import CloudNode, NodeExplanation, Plan, Size, Snapshot, Worker, frozen_map
from nodemanager.text import duration
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, IDLE, UNPAIRED

__all__ = ["IdleMemory", "FirstIdle", "KEEP_PERIODS", "KEEP_JOINS", "KEEP_SECONDS"]

log = logging.getLogger("nodemanager.decisions")

KEEP_PERIODS = 50
KEEP_JOINS = 20
KEEP_SECONDS = 86400.0


class IdleMemory:
    """Per size: recent boot+join times and idle periods; :meth:`graces` turns them into each
    size's idle grace (:func:`nodemanager.core.idle_timing.break_even_grace`)."""

    def __init__(self) -> None:
        self._listed: set[str] = set()
        self._booting: dict[str, tuple[str, float]] = {}    # node -> (size, launched_at)
        self._idle: dict[str, tuple[str, float]] = {}       # node -> (size, idle since)
        self._given_back: dict[str, list[float]] = {}       # size -> idle-since of nodes given back
        self._joins: dict[str, deque[tuple[float, float]]] = {}   # size -> (at, boot+join seconds)
        self._periods: dict[str, deque[tuple[float, float]]] = {}  # size -> (at, seconds to re-use)
        self._graces: dict[str, tuple[float, str]] = {}
        self._for: tuple[object, ...] | None = None    # (idle_grace, sizes) _graces were made for

    def joins(self, size: str) -> list[float]:
        """The remembered boot+join times of ``size``, oldest first."""
        return [b for _, b in self._joins.get(size, ())]

    def periods(self, size: str) -> list[float]:
        """The remembered ended idle periods of ``size``: seconds until re-use (inf: never)."""
        return [x for _, x in self._periods.get(size, ())]

    def observe(self, nodes: Sequence[NodeExplanation], cloud_nodes: Iterable[CloudNode], now: float,
                core_state: Callable[[str], str], horizon: float) -> bool:
        """Take in one plan's node explanations (``cloud_nodes``: the snapshot's, for launch times);
        ``horizon`` is the configured idle_grace. True when some size's history changed."""
        changed: set[str] = set()
        listed = {e.node_id for e in nodes if not e.gone}
        new = listed - self._listed
        launched = {n.id: n.launched_at for n in cloud_nodes if n.id in new} if new else {}
        for e in nodes:
            nid, size = e.node_id, e.size
            ws = core_state(e.tuple.worker_state)
            if nid in new:
                self._reboot(size, launched.get(nid, now), horizon)
                changed.add(size)
                if ws == UNPAIRED and e.tuple.boot_grace != BOOT_EXCEEDED:
                    self._booting[nid] = (size, launched.get(nid, now))
            booting = self._booting.get(nid)
            if booting is not None and (ws != UNPAIRED or e.gone or e.tuple.boot_grace == BOOT_EXCEEDED):
                del self._booting[nid]
                if ws != UNPAIRED and not e.gone:
                    self._add(self._joins, size, now, now - booting[1])
                    changed.add(size)
            idle = self._idle.get(nid)
            given_back = e.gone or e.our_drain_since is not None
            if idle is None:
                if ws == IDLE and not given_back:
                    self._idle[nid] = (size, now)
            elif ws == BUSY and not given_back:
                del self._idle[nid]
                self._add(self._periods, size, now, now - idle[1])
                changed.add(size)
            elif given_back:
                del self._idle[nid]
                self._give_back(size, idle[1], now, horizon)
                changed.add(size)
            elif ws != IDLE:  # down, unpaired: no evidence either way
                del self._idle[nid]
        for nid in self._listed - listed:
            self._booting.pop(nid, None)
            idle = self._idle.pop(nid, None)
            if idle is not None:
                self._give_back(idle[0], idle[1], now, horizon)
                changed.add(idle[0])
        self._listed = listed
        if changed:
            self._for = None
        return bool(changed)

    def graces(self, configured: float, sizes: Sequence[Size]) -> Mapping[str, tuple[float, str]]:
        """Size name -> (idle grace seconds, the words a node's why shows), for ``sizes`` and every
        size remembered."""
        by_name = {s.name: s for s in sizes}
        names = tuple(sorted(set(by_name) | set(self._periods) | set(self._joins)))
        key = (configured, names, tuple((s.name, s.billing_period, s.min_charge) for s in sizes))
        if self._for != key:
            self._graces = {}
            for name in names:
                size = by_name.get(name)
                self._graces[name] = break_even_grace(
                    self.joins(name), self.periods(name), configured,
                    billing_period=size.billing_period if size else 0.0,
                    min_charge=size.min_charge if size else 0.0)
            self._for = key
        return self._graces

    def _add(self, store: dict[str, deque[tuple[float, float]]], size: str, at: float, value: float) -> None:
        q = store.get(size)
        if q is None:
            q = store[size] = deque(maxlen=KEEP_PERIODS if store is self._periods else KEEP_JOINS)
        q.append((at, value))
        while q and at - q[0][0] > KEEP_SECONDS:
            q.popleft()

    def _expire(self, size: str, at: float, horizon: float) -> list[float]:
        """The size's given-back periods still waiting for a re-boot at ``at``; older ones end
        never re-used."""
        waiting = []
        for since in self._given_back.get(size, ()):
            if at - since <= horizon:
                waiting.append(since)
            else:
                self._add(self._periods, size, at, math.inf)
        self._given_back[size] = waiting
        return waiting

    def _give_back(self, size: str, since: float, at: float, horizon: float) -> None:
        self._expire(size, at, horizon).append(since)

    def _reboot(self, size: str, at: float, horizon: float) -> None:
        waiting = self._expire(size, at, horizon)
        if waiting:
            self._add(self._periods, size, at, max(0.0, at - waiting.pop(0)))

    def for_plan(self, core: CoreSettings) -> Mapping[str, tuple[float, str]]:
        """Each size's idle grace to plan with (empty unless ``idle_grace_mode = break-even``)."""
        if core.idle_grace_mode != "break-even":
            return frozen_map(None)
        return frozen_map(self.graces(core.idle_grace, core.sizes))

    def watch(self, snap: Snapshot, plan: Plan, now: float, matrix: Any,
              core: CoreSettings) -> Mapping[str, tuple[float, str]] | None:
        """Feed ``plan`` to the memory (break-even mode only; ``matrix`` tells the core states);
        the idle graces to plan with now when one changed (one log line per size), else None
        (new words wait for the next cycle)."""
        if core.idle_grace_mode != "break-even" or not self.observe(
                plan.nodes, snap.cloud_nodes, now, matrix.vocabulary.core_state, core.idle_grace):
            return None
        graces = self.for_plan(core)
        changed = False
        for size, (grace, why) in graces.items():
            before = snap.idle_graces.get(size, (core.idle_grace, ""))[0]
            if before != grace:
                log.info("size %s: %s (was %.0fs)", size, why.strip()[1:-1], before)
                changed = True
        return graces if changed else None


class FirstIdle:
    """When this controller first saw each worker report an idle-since later than now (a scheduler
    clock ahead of ours): such a worker counts as idle since then, not since the future time (the
    core would cap it at now on every refresh, and its idle grace would never end). The idle-since
    stays while the scheduler reports the same time; a new one starts the count again."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[float, float]] = {}   # worker name -> (reported idle-since, first seen at)

    def workers(self, workers: tuple[Worker, ...], now: float) -> tuple[tuple[Worker, ...], float | None]:
        """``workers`` with each future idle-since replaced by when it was first seen, and how far
        ahead of ``now`` the furthest one is (None: none in the future)."""
        seen: dict[str, tuple[float, float]] = {}
        out: list[Worker] | None = None
        ahead: float | None = None
        for i, w in enumerate(workers):
            c = w.classified
            if c is None or c.idle_since is None or c.idle_since <= now:
                continue
            ahead = max(ahead or 0.0, c.idle_since - now)
            before = self._seen.get(w.name)
            first = before[1] if before is not None and before[0] == c.idle_since else now
            seen[w.name] = (c.idle_since, first)
            if out is None:
                out = list(workers)
            out[i] = replace(w, classified=replace(c, idle_since=first))
        if seen.keys() - self._seen.keys():
            log.warning("scheduler clock %s ahead of ours: worker(s) %s report an idle-since in the future; "
                        "counted idle from when first seen so", duration(ahead or 0.0),
                        ", ".join(sorted(seen.keys() - self._seen.keys())[:5]))
        self._seen = seen
        return (workers if out is None else tuple(out)), ahead
