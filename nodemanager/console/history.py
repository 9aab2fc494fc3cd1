"""Each node's last events (decisions, scheduler state changes, outcomes) in a bounded ring.

The controller adds an event only when something changed (the same place that decides to log a
decision line), so a quiet pool of 50,000 nodes costs nothing per cycle. A node that leaves the
cloud listing moves to a "recent" list, kept :data:`KEEP_GONE` seconds.

With a ``path`` (``[Manage] state_dir``/``CLUSTER.history.json``, :meth:`NodeHistory.for_settings`) the rings are written there (temporary
file, fsync, rename) at most every ``save_every`` seconds and on :meth:`save`, and read back at
start, so a restart keeps them. The history is local to each head, also with ``[HA]`` (it is a
record of what this process saw, not state a new leader needs to act safely). A file that cannot
be read back is logged, naming it, and the history starts empty: it never stops the daemon.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Iterable

__all__ = ["NodeHistory", "Event", "RING", "KEEP_GONE", "EVENT_KINDS"]

log = logging.getLogger("nodemanager.history")

Event = tuple[float, str, str]          # (epoch, kind, text)
_Stored = tuple[float, str, object]     # text: a str, or an object whose str() is the text
EVENT_KINDS = ("decision", "state", "outcome")
RING = 20                               # events kept per node
KEEP_GONE = 3600.0                      # seconds a destroyed node stays in the recent list
_MAX_TEXT = 240


class NodeHistory:
    """Per node the last :data:`RING` events, and the nodes gone within :data:`KEEP_GONE`.
    Thread-safe: the controller writes, the status server reads."""

    def __init__(self, path: str | None = None, *, save_every: float = 60.0) -> None:
        self.path = path
        self.save_every = save_every
        self._lock = threading.Lock()
        self._events: dict[str, list[_Stored]] = {}
        self._gone: dict[str, tuple[float, dict[str, Any]]] = {}
        self._dirty = False
        self._saved_at: float | None = None
        if path:
            self._load(path)

    @classmethod
    def for_settings(cls, settings: Any) -> NodeHistory:
        """The history of ``settings``' cluster: ``<state_dir>/<cluster>.history.json``; kept in
        memory only without a ``state_dir`` or for a cloud that lives in this process (its nodes
        die with it), as the reservation journal does."""
        from nodemanager.configuration.kinds import in_process
        if not settings.manage.state_dir or in_process(settings.cloud.driver):
            return cls()
        return cls(os.path.join(settings.manage.state_dir, f"{settings.cloud.cluster}.history.json"))

    def add(self, node_id: str, at: float, kind: str, text: object) -> None:
        """Append one event to ``node_id``'s ring (the oldest drops out past :data:`RING`).
        ``text`` may be any object whose ``str()`` is the text: it is made only when read, so
        50,000 first-seen nodes cost no string each."""
        event = (at, kind, text)
        with self._lock:
            ring = self._events.get(node_id)
            if ring is None:
                self._events[node_id] = [event]
            else:
                ring.append(event)
                if len(ring) > RING:
                    del ring[0]
            self._dirty = True

    def gone(self, node_id: str, at: float, info: dict[str, Any] | None = None) -> None:
        """``node_id`` left the cloud listing at ``at``: move it, with ``info`` (name, size,
        launched_at...) and its events, to the recent list."""
        with self._lock:
            self._gone[node_id] = (at, {**(info or {}), "events": self._events.pop(node_id, [])})
            self._dirty = True

    def events(self, node_id: str) -> list[Event]:
        """``node_id``'s events, oldest first (also of a node in the recent list)."""
        with self._lock:
            ring = self._events.get(node_id)
            if ring is None and node_id in self._gone:
                ring = self._gone[node_id][1]["events"]
            return [_event(ev) for ev in ring or ()]

    def recent(self, now: float) -> list[dict[str, Any]]:
        """The nodes gone within :data:`KEEP_GONE` of ``now``, latest first, each with
        ``node_id``, ``gone_at``, its ``info`` keys and ``events``."""
        with self._lock:
            old = [k for k, (at, _) in self._gone.items() if now - at > KEEP_GONE]
            for k in old:
                del self._gone[k]
            self._dirty = self._dirty or bool(old)
            items = sorted(self._gone.items(), key=lambda kv: -kv[1][0])
            return [{"node_id": k, "gone_at": at, **info,
                     "events": [_event(ev) for ev in info["events"]]} for k, (at, info) in items]

    # -- the file ----------------------------------------------------------------------------
    def save_if_due(self, now: float) -> None:
        """Write the file when something changed and ``save_every`` seconds have passed."""
        if self.path and self._dirty and (self._saved_at is None or now - self._saved_at >= self.save_every):
            self._saved_at = now
            self.save()

    def save(self) -> None:
        """Write the file now (when there is a path and something changed); a failure is logged."""
        if not self.path or not self._dirty:
            return
        with self._lock:
            doc = {"version": 1,
                   "nodes": {k: [_event(ev) for ev in ring] for k, ring in self._events.items()},
                   "gone": {k: {"gone_at": at, **info, "events": [_event(ev) for ev in info["events"]]}
                            for k, (at, info) in self._gone.items()}}
            text = json.dumps(doc, separators=(",", ":"))
            self._dirty = False
        tmp = f"{self.path}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as err:
            self._dirty = True
            log.warning("node history not saved to %s: %s", self.path, err.strerror or err)

    def _load(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as err:
            log.warning("node history %s cannot be read (%s): starting with an empty history",
                        path, err)
            return
        try:
            events: dict[str, list[_Stored]] = {str(k): list(_events(v)) for k, v in doc["nodes"].items()}
            gone = {str(k): (float(v["gone_at"]), {**{i: v[i] for i in v if i not in ("gone_at", "events")},
                                                    "events": _events(v.get("events", []))})
                    for k, v in doc.get("gone", {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            log.warning("node history %s is not a history file (%s: %s): starting with an empty "
                        "history", path, type(err).__name__, err)
            return
        self._events, self._gone = events, gone


def _event(ev: _Stored) -> Event:
    at, kind, text = ev
    return (at, kind, (text if type(text) is str else str(text))[:_MAX_TEXT])


def _events(items: Iterable[Any]) -> list[Event]:
    return [(float(at), str(kind), str(text)[:_MAX_TEXT]) for at, kind, text in list(items)[-RING:]]
