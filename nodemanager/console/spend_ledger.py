"""The who-spent-what ledger (``[Manage] spend_ledger``): per node, its life and the core-seconds
each (user, group) ran on it, from every cycle's listing and poll; the attribution itself is
:mod:`nodemanager.core.attribution`.

Each cycle, the time since a node was last seen is charged to the jobs that ran on it then (the
scheduler's ``Worker.jobs_by``), and the node's life is extended to now; a node no longer listed
(or listed terminated) is closed at the last time it was seen. Closed nodes are kept
:data:`KEEP` seconds. The ledger is written to ``<state_dir>/<cluster>.spend.json`` (temporary
file, fsync, rename) at most every ``save_every`` seconds and on :meth:`SpendLedger.save`, and read
back at start: time the daemon was down is charged, at the next cycle, to the jobs last seen. A
file that cannot be read is set aside, never overwritten (:mod:`nodemanager.cycle.state_files`),
and the ledger starts empty.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Callable, Iterable

from nodemanager.core.attribution import NodeUse, accrue
from nodemanager.cycle.state_files import may_write, read_state
from nodemanager.model import CycleReport, JobOwner, Size, is_gone

__all__ = ["SpendLedger", "KEEP", "read_uses"]

log = logging.getLogger("nodemanager.spend")

KEEP = 400 * 86400.0        # seconds a closed node stays in the ledger
_VERSION = 1


class _Live:
    __slots__ = ("size", "price", "start", "end", "shares", "jobs")

    def __init__(self, size: str, price: float, start: float) -> None:
        self.size, self.price, self.start, self.end = size, price, start, start
        self.shares: dict[tuple[str, str], float] = {}
        self.jobs: tuple[JobOwner, ...] = ()


def _use(node_id: str, e: _Live) -> NodeUse:
    return NodeUse(node_id=node_id, size=e.size, price=e.price, start=e.start, end=e.end, shares=dict(e.shares))


class SpendLedger:
    """Thread-safe: the controller's report callback writes, the status server and metrics read."""

    def __init__(self, sizes: Iterable[Size] = (), path: str | None = None, *, save_every: float = 60.0,
                 enabled: bool = True) -> None:
        self.prices = {s.name: s.price for s in sizes}
        self.path = path
        self.save_every = save_every
        self.enabled = enabled      # False: ``spend_ledger`` off, every call does nothing
        self._lock = threading.Lock()
        self._live: dict[str, _Live] = {}
        self._closed: list[NodeUse] = []
        self._saved_at: float | None = None
        if path and enabled:
            self._load(path)

    @classmethod
    def for_settings(cls, settings: Any, registry: Any = None, clock: Callable[[], float] | None = None) -> SpendLedger:
        """The ledger of ``settings``' cluster (in memory only without a ``state_dir``; doing nothing
        with ``spend_ledger`` off), its metrics registered on ``registry``."""
        if not settings.manage.spend_ledger:
            return cls(enabled=False)
        ledger = cls(settings.core.sizes, path_for(settings))
        if registry is not None and clock is not None:
            from nodemanager.console.spend_metrics import SpendCollector
            registry.register(SpendCollector(ledger, clock, settings.manage.spend_top))
        return ledger

    def cycle(self, report: CycleReport, now: float) -> None:
        """After each cycle: :meth:`observe` it and :meth:`save_if_due`."""
        if self.enabled:
            self.observe(report, now)
            self.save_if_due(now)

    def observe(self, report: CycleReport, now: float) -> None:
        """Charge the time since each node was last seen to the jobs seen on it then; close the nodes
        gone."""
        workers = {w.name: w for w in report.snapshot.workers}
        paired = {e.node_id: e.worker for e in report.plan.nodes if e.worker is not None}
        with self._lock:
            listed = set()
            for n in report.snapshot.cloud_nodes:
                if is_gone(n):
                    continue
                listed.add(n.id)
                e = self._live.get(n.id)
                if e is None:
                    e = self._live[n.id] = _Live(n.size, self.prices.get(n.size, 0.0), min(n.launched_at, now))
                if now > e.end:
                    e.shares = accrue(e.shares, e.jobs, now - e.end)
                    e.end = now
                w = workers.get(paired.get(n.id) or "")
                e.jobs = w.jobs_by if w is not None else ()
            for node_id in [i for i in self._live if i not in listed]:
                self._closed.append(_use(node_id, self._live.pop(node_id)))
            self._closed = [u for u in self._closed if now - u.end < KEEP]

    def uses(self) -> list[NodeUse]:
        """Every node in the ledger, closed and live."""
        with self._lock:
            return [*self._closed, *(_use(i, e) for i, e in self._live.items())]

    def save_if_due(self, now: float) -> None:
        """Write the file if ``save_every`` seconds passed since the last write."""
        if self.path and (self._saved_at is None or now - self._saved_at >= self.save_every):
            self._saved_at = now
            self.save()

    def save(self) -> None:
        """Write the file now (temporary file, fsync, rename); a failure is logged."""
        if not (self.path and self.enabled and may_write(self.path)):
            return
        with self._lock:
            doc = {"version": _VERSION,
                   "nodes": [_dump(u) for u in self._closed],
                   "live": [{**_dump(_use(i, e)), "jobs": [list(j) for j in e.jobs]} for i, e in self._live.items()]}
        tmp = f"{self.path}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path) or ".", mode=0o700, exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(doc, f, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("spend ledger %s not written: %s", self.path, exc)

    def _load(self, path: str) -> None:
        loaded = read_state(path, parse_ledger, "spend ledger")
        if loaded is None:
            return
        closed, live = loaded
        self._closed = closed
        for u, jobs in live:
            e = _Live(u.size, u.price, u.start)
            e.end, e.shares, e.jobs = u.end, dict(u.shares), jobs
            self._live[u.node_id] = e


def path_for(settings: Any) -> str | None:
    """``<state_dir>/<cluster>.spend.json`` (None without a ``state_dir``)."""
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


def read_uses(path: str) -> list[NodeUse]:
    """Every node of a ledger file, closed and live (``nodemanager cost``)."""
    closed, live = read_file(path)
    return [*closed, *(u for u, _ in live)]
