"""The who-spent-what ledger (``[Manage] spend_ledger``): per node, its life and the core-seconds
each (user, group) ran on it, from every cycle's listing and poll; the attribution itself is
:mod:`nodemanager.core.attribution`.

Each cycle, the time since a node was last seen is charged to the jobs that ran on it then (the
scheduler's ``Worker.jobs_by``), and the node's life is extended to now; a node no longer listed
(or listed terminated) is closed at the last time it was seen. Only the live nodes are held here;
a closed node goes to the store (:mod:`nodemanager.store`) at once; a live one when it is first
seen, when its jobs change, and otherwise in turn, the :data:`ROLL`-th of them with the oldest
record each cycle (so a cycle's writes stay small at any pool size), and all of them at a stop.
A restart resumes them: time the daemon was down is
charged, at the next cycle, to the jobs last seen. The store keeps closed nodes ``[Store]
keep_ledger`` (400 days). A ledger file of an older release (``<cluster>.spend.json``) is imported
into the store once and left in place; one that cannot be read is set aside, never
overwritten (:mod:`nodemanager.store.state_files`), and nothing is imported.
"""

from __future__ import annotations

import heapq
import json
import logging
import math
import os
import threading
from typing import Any, Callable, Iterable

from nodemanager.core.attribution import NodeUse, SpendRow, accrue, attribute, merge
from nodemanager.store.state_files import read_state
from nodemanager.model import CycleReport, JobOwner, Size, is_gone
from nodemanager.store.port import Changes, Life, StoreError

__all__ = ["SpendLedger", "IMPORTED"]

log = logging.getLogger("nodemanager.spend")

_VERSION = 1
ROLL = 20     # cycles in which every live node is written at least once
IMPORTED = "imported:spend"      # the store's mark: the JSON ledger was imported


class _Live:
    __slots__ = ("size", "price", "start", "end", "shares", "jobs")

    def __init__(self, size: str, price: float, start: float) -> None:
        self.size, self.price, self.start, self.end = size, price, start, start
        self.shares: dict[tuple[str, str], float] = {}
        self.jobs: tuple[JobOwner, ...] = ()


def _use(node_id: str, e: _Live) -> NodeUse:
    return NodeUse(node_id=node_id, size=e.size, price=e.price, start=e.start, end=e.end, shares=dict(e.shares))


class SpendLedger:
    """Thread-safe: the controller's report callback writes, the status server and metrics read.
    ``store``: where closed nodes are kept and read (an in-memory one without); ``submit``: how
    changes reach it (the store's writer; without one, written at once)."""

    def __init__(self, sizes: Iterable[Size] = (), store: Any = None, submit: Callable[[Changes], None] | None = None,
                 *, legacy: str | None = None, enabled: bool = True) -> None:
        self.prices = {s.name: s.price for s in sizes}
        self.enabled = enabled      # False: ``spend_ledger`` off, every call does nothing
        if store is None and enabled:
            from nodemanager.store.sqlite import MEMORY, SqliteStore
            store = SqliteStore(MEMORY)
            store.ready()
        self.store = store
        self._submit = submit or (store.apply if store is not None else (lambda changes: None))
        self._lock = threading.Lock()
        self._live: dict[str, _Live] = {}
        self._written: dict[str, float] = {}     # live node -> when its record was last handed to the store
        if enabled:
            self._resume(legacy)

    @classmethod
    def for_settings(cls, settings: Any, store: Any = None, submit: Callable[[Changes], None] | None = None,
                     registry: Any = None, clock: Callable[[], float] | None = None) -> SpendLedger:
        """The ledger of ``settings``' cluster in ``store`` (doing nothing with ``spend_ledger``
        off), its metrics registered on ``registry``."""
        if not settings.manage.spend_ledger:
            return cls(enabled=False)
        ledger = cls(settings.core.sizes, store, submit, legacy=path_for(settings))
        if registry is not None and clock is not None:
            from nodemanager.console.spend_metrics import SpendCollector
            registry.register(SpendCollector(ledger, clock, settings.manage.spend_top))
        return ledger

    def cycle(self, report: CycleReport, now: float) -> None:
        """After each cycle: :meth:`observe` it and hand the store what changed."""
        if self.enabled:
            self.observe(report, now)

    def observe(self, report: CycleReport, now: float) -> None:
        """Charge the time since each node was last seen to the jobs seen on it then; close the nodes
        gone (written to the store at once); write the live nodes that are new, whose jobs changed,
        and the 1/:data:`ROLL` written longest ago."""
        workers = {w.name: w for w in report.snapshot.workers}
        paired = {e.node_id: e.worker for e in report.plan.nodes if e.worker is not None}
        changes = Changes()
        with self._lock:
            listed = set()
            due: dict[str, None] = {}       # insertion-ordered set
            for n in report.snapshot.cloud_nodes:
                if is_gone(n):
                    continue
                listed.add(n.id)
                e = self._live.get(n.id)
                if e is None:
                    e = self._live[n.id] = _Live(n.size, self.prices.get(n.size, 0.0), min(n.launched_at, now))
                    due[n.id] = None
                if now > e.end:
                    e.shares = accrue(e.shares, e.jobs, now - e.end)
                    e.end = now
                w = workers.get(paired.get(n.id) or "")
                jobs = w.jobs_by if w is not None else ()
                if jobs != e.jobs:
                    e.jobs = jobs
                    due[n.id] = None
            for node_id in [i for i in self._live if i not in listed]:
                changes.lives[node_id] = Life(use=_use(node_id, self._live.pop(node_id)), closed=True)
                self._written.pop(node_id, None)
            turn = -(-len(self._live) // ROLL)
            due.update(dict.fromkeys(heapq.nsmallest(turn, (i for i in self._live if i not in due),
                                                     key=lambda i: self._written.get(i, -math.inf))))
            for i in due:
                e = self._live[i]
                changes.lives[i] = Life(use=_use(i, e), closed=False, jobs=e.jobs)
                self._written[i] = now
        self._write(changes)

    def save(self) -> None:
        """Hand the store the live nodes now (a stop)."""
        if self.enabled:
            changes = Changes()
            with self._lock:
                self._live_changes(changes)
            self._write(changes)

    def resume(self) -> None:
        """Take the live nodes from the store again (a new HA leader goes on with the old one's)."""
        if self.enabled:
            with self._lock:
                self._live.clear()
                self._written.clear()
            self._resume(None)

    def spend(self, since: float, until: float, by: str) -> list[SpendRow]:
        """Node-hours and money per ``by`` over [``since``, ``until``]: the closed nodes summed by the
        store, the live ones here."""
        with self._lock:
            live = [_use(i, e) for i, e in self._live.items()]
        try:
            closed = self.store.spend(since, until, by, closed_only=True)
        except StoreError as exc:
            log.warning("spend: the closed nodes cannot be read (%s): the live ones only", exc)
            closed = []
        return merge(closed, attribute(live, since, until, by))

    def _live_changes(self, changes: Changes) -> None:
        for i, e in self._live.items():
            changes.lives[i] = Life(use=_use(i, e), closed=False, jobs=e.jobs)

    def _write(self, changes: Changes) -> None:
        if not len(changes):
            return
        try:
            self._submit(changes)
        except StoreError as exc:
            log.warning("spend ledger: %d node(s) not written: %s", len(changes.lives), exc)

    def _resume(self, legacy: str | None) -> None:
        """The live nodes from the store; the first time, from the older release's JSON ledger (all of
        it imported)."""
        try:
            imported = self.store.mark(IMPORTED) is not None
            lives = self.store.open_lives()
        except StoreError as exc:
            log.warning("spend ledger: the store cannot be read (%s): the live nodes start afresh", exc)
            return
        if not imported and legacy and os.path.exists(legacy):
            loaded = read_state(legacy, parse_ledger, "spend ledger")
            if loaded is None:
                return
            closed, live = loaded
            lives = [Life(use=u, closed=False, jobs=jobs) for u, jobs in live]
            changes = Changes(lives={u.node_id: Life(use=u, closed=True) for u in closed},
                              marks={IMPORTED: legacy})
            changes.lives.update({life.use.node_id: life for life in lives})
            self._write(changes)
            log.info("spend ledger %s imported into %s: %d closed and %d live node(s) (the file stays, no "
                     "longer read)", legacy, self.store.name, len(closed), len(live))
        elif not imported:
            self._write(Changes(marks={IMPORTED: ""}))   # nothing to import: a file appearing later is not read
        with self._lock:
            for life in lives:
                e = _Live(life.use.size, life.use.price, life.use.start)
                e.end, e.shares, e.jobs = life.use.end, dict(life.use.shares), life.jobs
                self._live[life.use.node_id] = e


def path_for(settings: Any) -> str | None:
    """``<state_dir>/<cluster>.spend.json``, an older release's ledger (None without a ``state_dir``)."""
    if not settings.manage.state_dir:
        return None
    return os.path.join(settings.manage.state_dir, f"{settings.cloud.cluster}.spend.json")


def _dump(u: NodeUse) -> dict[str, Any]:
    return {"id": u.node_id, "size": u.size, "price": u.price, "start": u.start, "end": u.end,
            "shares": [[k[0], k[1], cs] for k, cs in u.shares.items()]}


def _read(d: dict[str, Any]) -> NodeUse:
    return NodeUse(node_id=str(d["id"]), size=str(d["size"]), price=float(d["price"]), start=float(d["start"]),
                   end=float(d["end"]), shares={(str(u), str(g)): float(cs) for u, g, cs in d["shares"]})


def read_file(path: str) -> tuple[list[NodeUse], list[tuple[NodeUse, tuple[JobOwner, ...]]]]:
    """The closed and live nodes of a ledger file; ValueError names what is wrong."""
    with open(path) as f:
        return parse_ledger(f.read())


def parse_ledger(text: str) -> tuple[list[NodeUse], list[tuple[NodeUse, tuple[JobOwner, ...]]]]:
    """The closed and live nodes of a ledger file's text; ValueError names what is wrong."""
    doc = json.loads(text)
    try:
        if doc.get("version") != _VERSION:
            raise ValueError(f"version {doc.get('version')!r}, expected {_VERSION}")
        closed = [_read(d) for d in doc["nodes"]]
        live = [(_read(d), tuple(JobOwner(str(u), str(g), int(c)) for u, g, c in d.get("jobs", ())))
                for d in doc["live"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a spend ledger ({exc!r})") from None
    return closed, live

