"""Each node's last events (decisions, scheduler state changes, outcomes): the last :data:`RING`
of each in memory for the page, and every one in the store for ``nodemanager history``.

The controller adds an event only when something changed (the same place that decides to log a
decision line), so a quiet pool of 50,000 nodes costs nothing per cycle. A node that leaves the
cloud listing moves to a "recent" list, kept :data:`KEEP_GONE` seconds on the page.

With a ``store`` (:meth:`NodeHistory.for_settings`), what was added since the last
:meth:`flush` (the daemon flushes after each cycle) goes to the store through ``submit`` (its
writer: never waits), kept there ``[Store] keep_events``; at start the recent list is read back,
and a node's events from before the start are read when the page first asks for them. A history
file of an older release (``<cluster>.history.json``) is imported into the store once and left in
place (one that cannot be read is set aside, never overwritten). A store that cannot be read is logged and the history starts empty: it never stops the
daemon.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Callable, Iterable

from nodemanager.store.state_files import read_state
from nodemanager.store.port import Changes, StoreError

__all__ = ["NodeHistory", "Event", "RING", "KEEP_GONE", "EVENT_KINDS", "IMPORTED"]

log = logging.getLogger("nodemanager.history")

Event = tuple[float, str, str]          # (epoch, kind, text)
_Stored = tuple[float, str, object]     # text: a str, or an object whose str() is the text
EVENT_KINDS = ("decision", "state", "outcome")
RING = 20                               # events kept per node in memory
KEEP_GONE = 3600.0                      # seconds a destroyed node stays in the recent list
_MAX_TEXT = 240
IMPORTED = "imported:history"           # the store's mark: the JSON history was imported


class NodeHistory:
    """Per node the last :data:`RING` events, and the nodes gone within :data:`KEEP_GONE`.
    Thread-safe: the controller writes, the status server reads."""

    def __init__(self, store: Any = None, submit: Callable[[Changes], None] | None = None, *,
                 legacy: str | None = None, started: float = 0.0) -> None:
        self.store = store
        self._submit = submit or (store.apply if store is not None else None)
        self.started = started           # events before this are the store's, read when asked
        self._lock = threading.Lock()
        self._events: dict[str, list[_Stored]] = {}
        self._gone: dict[str, tuple[float, dict[str, Any]]] = {}
        self._read: set[str] = set()     # nodes whose earlier events were read from the store
        self._new: list[tuple[str, _Stored]] = []
        self._new_gone: dict[str, tuple[float, dict[str, Any]]] = {}
        if store is not None:
            self._resume(legacy)

    @classmethod
    def for_settings(cls, settings: Any, store: Any = None, submit: Callable[[Changes], None] | None = None,
                     started: float = 0.0) -> NodeHistory:
        """The history of ``settings``' cluster, kept in ``store``; in memory only for a cloud that
        lives in this process (its nodes die with it), as the reservation journal does."""
        from nodemanager.configuration.kinds import in_process
        if store is None or in_process(settings.cloud.driver):
            return cls()
        legacy = (os.path.join(settings.manage.state_dir, f"{settings.cloud.cluster}.history.json")
                  if settings.manage.state_dir else None)
        return cls(store, submit, legacy=legacy, started=started)

    def add(self, node_id: str, at: float, kind: str, text: object) -> None:
        """Append one event to ``node_id``'s ring (the oldest drops out past :data:`RING`).
        ``text`` may be any object whose ``str()`` is the text: it is made only when read or
        written, so 50,000 first-seen nodes cost no string in the cycle."""
        event = (at, kind, text)
        with self._lock:
            ring = self._events.get(node_id)
            if ring is None:
                self._events[node_id] = [event]
            else:
                ring.append(event)
                if len(ring) > RING:
                    del ring[0]
            if self._submit is not None:
                self._new.append((node_id, event))

    def gone(self, node_id: str, at: float, info: dict[str, Any] | None = None) -> None:
        """``node_id`` left the cloud listing at ``at``: move it, with ``info`` (name, size,
        launched_at...) and its events, to the recent list."""
        with self._lock:
            self._gone[node_id] = (at, {**(info or {}), "events": self._events.pop(node_id, [])})
            if self._submit is not None:
                self._new_gone[node_id] = (at, dict(info or {}))

    def flush(self) -> None:
        """Hand the store what was added since the last flush (the writer writes it off this thread)."""
        with self._lock:
            new, gone = self._new, self._new_gone
            self._new, self._new_gone = [], {}
        if self._submit is None or not (new or gone):
            return
        changes = Changes(events=[(n, at, kind, _text(text)) for n, (at, kind, text) in new],
                          gone={n: (at, json.dumps(info, separators=(",", ":"), default=str))
                                for n, (at, info) in gone.items()})
        try:
            self._submit(changes)
        except StoreError as exc:
            log.warning("node history: %d event(s) not written: %s", len(new), exc)

    def events(self, node_id: str) -> list[Event]:
        """``node_id``'s events, oldest first (also of a node in the recent list, or from before
        this process started)."""
        self._read_earlier(node_id)
        with self._lock:
            ring = self._events.get(node_id)
            if ring is None and node_id in self._gone:
                ring = self._gone[node_id][1]["events"]
            return [_event(ev) for ev in ring or ()]

    def recent(self, now: float) -> list[dict[str, Any]]:
        """The nodes gone within :data:`KEEP_GONE` of ``now``, latest first, each with
        ``node_id``, ``gone_at``, its ``info`` keys and ``events``."""
        with self._lock:
            for k in [k for k, (at, _) in self._gone.items() if now - at > KEEP_GONE]:
                del self._gone[k]
            items = sorted(self._gone.items(), key=lambda kv: -kv[1][0])
            return [{"node_id": k, "gone_at": at, **info,
                     "events": [_event(ev) for ev in info["events"]]} for k, (at, info) in items]

    # -- the store ---------------------------------------------------------------------------
    def _read_earlier(self, node_id: str) -> None:
        """Put ``node_id``'s events from before this process started in front of its ring, once."""
        with self._lock:
            if self.store is None or node_id in self._read:
                return
            self._read.add(node_id)
            ring = self._events.get(node_id)
            if ring is None and node_id in self._gone:
                ring = self._gone[node_id][1]["events"]
            if ring is not None and len(ring) >= RING:
                return
        try:
            earlier = [e for e in self.store.events(node_id, limit=RING) if e[0] < self.started]
        except StoreError as exc:
            log.warning("node history of %s: the store cannot be read: %s", node_id, exc)
            return
        with self._lock:
            ring = self._events.get(node_id)
            if ring is None and node_id in self._gone:
                ring = self._gone[node_id][1]["events"]
            if ring is None:
                self._events[node_id] = ring = []
            ring[:0] = earlier[len(earlier) + len(ring) - RING:] if len(earlier) + len(ring) > RING else earlier

    def _resume(self, legacy: str | None) -> None:
        try:
            imported = self.store.mark(IMPORTED) is not None
            gone = self.store.gone_since(self.started - KEEP_GONE)
        except StoreError as exc:
            log.warning("node history: the store cannot be read (%s): starting with an empty history", exc)
            return
        if not imported and legacy and os.path.exists(legacy):
            self._import(legacy)
            return
        if not imported and self._submit is not None:
            self._submit(Changes(marks={IMPORTED: ""}))   # nothing to import: a file appearing later is not read
        for node_id, at, info in gone:
            self._gone[node_id] = (at, {**info, "events": []})

    def _import(self, path: str) -> None:
        """The older release's history file into the store (its rings and recent list)."""
        loaded = read_state(path, _parse, "node history")
        if loaded is None:
            return
        events, gone = loaded
        changes = Changes(events=[(n, *ev) for n, ring in events.items() for ev in ring]
                          + [(n, *ev) for n, (_, _, ring) in gone.items() for ev in ring],
                          gone={n: (at, json.dumps(info, default=str)) for n, (at, info, _) in gone.items()},
                          marks={IMPORTED: path})
        self._events = {n: list(ring) for n, ring in events.items()}
        self._gone = {n: (at, {**info, "events": list(ring)}) for n, (at, info, ring) in gone.items()}
        self._read.update(self._events, self._gone)
        if self._submit is not None:
            try:
                self._submit(changes)
            except StoreError as exc:
                log.warning("node history %s not imported: %s", path, exc)
                return
        log.info("node history %s imported into %s: %d node(s) (the file stays, no longer read)", path,
                 self.store.name, len(events) + len(gone))


def _parse(text: str) -> tuple[dict[str, list[Event]], dict[str, tuple[float, dict[str, Any], list[Event]]]]:
    """The rings and the recent list of an older release's history file; ValueError (or
    KeyError...) when it is not one."""
    doc = json.loads(text)
    events = {str(k): list(_events(v)) for k, v in doc["nodes"].items()}
    gone = {str(k): (float(v["gone_at"]), {i: v[i] for i in v if i not in ("gone_at", "events")},
                     list(_events(v.get("events", ())))) for k, v in doc.get("gone", {}).items()}
    return events, gone


def _text(text: object) -> str:
    return (text if type(text) is str else str(text))[:_MAX_TEXT]


def _event(ev: _Stored) -> Event:
    at, kind, text = ev
    return (at, kind, _text(text))


def _events(items: Iterable[Any]) -> list[Event]:
    return [(float(at), str(kind), str(text)[:_MAX_TEXT]) for at, kind, text in list(items)[-RING:]]
