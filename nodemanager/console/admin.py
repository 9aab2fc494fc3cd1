"""What operators asked for through the admin API: held nodes, forced drains, cancels, a pause.

One :class:`AdminState` per daemon, shared by the status server (which writes it) and the
controller (which reads it once per cycle). Every method is thread-safe.

How the controller uses it, each cycle::

    snapshot = dataclasses.replace(snapshot, **admin.snapshot_fields())   # held, forced_drains, paused
    cancels = admin.take_cancels()   # node ids whose drain of ours the operator wants cancelled:
                                     # plan a CANCEL_DRAIN for each (once; they are removed here)
    admin.forget(gone)               # node ids that no longer exist in the cloud

A node is named by what the operator typed; the status server resolves names (cloud name,
worker name) to the cloud node id before calling in, so the sets hold node ids whenever the node
was known.

With a ``path`` (``[Manage] state_file``), held nodes, forced drains and the pause are written to
that JSON file after every change (a temporary file, fsync, rename: a crash leaves the old or the
new state, never half of one) and read back at start, so a restart keeps them. A file that cannot
be read back is an :class:`AdminStateError` naming it (the daemon does not start without the holds
it was given); a change that cannot be saved still applies, and its answer says it was not saved.
Pending cancels are not kept: they are carried out on the next cycle.

With a ``store`` instead (``[HA]``: :class:`nodemanager.ha.admin_store.EtcdAdminStore`), the same
JSON goes to the store (``read()`` / ``write(text)``, ``name`` for messages) and :meth:`reload`
reads it back (a new HA leader does, so holds, drains and a pause survive a failover). A store
with ``check_writable()`` may refuse operator changes (an HA standby): they then raise
:class:`AdminRefused` and change nothing.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

__all__ = ["AdminState", "AdminChange", "AdminRefused", "AdminStateError", "ADMIN_ACTIONS"]

log = logging.getLogger("nodemanager.admin")

ADMIN_ACTIONS = ("hold", "release", "drain", "cancel", "pause", "resume")


@dataclass(frozen=True, slots=True)
class AdminChange:
    """The answer to one admin request: what it changed, in words, for the log and the caller.

    ``changed`` is False when the request asked for the state things were already in.
    """

    action: str
    node: str | None
    changed: bool
    detail: str
    at: float
    by: str = ""

    def to_json(self) -> dict[str, object]:
        return {"action": self.action, "node": self.node, "changed": self.changed,
                "detail": self.detail, "at": self.at, "by": self.by}


class AdminStateError(ValueError):
    """The state file cannot be read back; the message names the file (and the place in it)."""


class AdminRefused(Exception):
    """A change this process may not make (an HA standby): nothing was changed; ``leader`` names
    the process that can make it (None when nobody leads now)."""

    def __init__(self, message: str, leader: str | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class AdminState:
    """Held nodes, forced drains, pending cancels and the pause reason, behind one lock; kept in
    the JSON file ``path`` when given (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.time, path: str | None = None,
                 store: Any = None) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}
        self._drains: dict[str, float] = {}
        self._cancels: dict[str, float] = {}
        self._paused: str | None = None
        self._paused_at: float | None = None
        self._reasons: dict[str, str] = {}   # node id -> the operator's reason for its hold or drain
        self._history: list[AdminChange] = []
        self.path = path or None
        self.store = store
        if self.path:
            self._load(self.path)

    def reload(self) -> None:
        """Read the state back from the store (or file); raises :class:`AdminStateError`, keeping
        the state held now, if it cannot be read."""
        if self.store is None:
            if self.path:
                self._load(self.path)
            return
        try:
            text = self.store.read()
        except OSError as exc:
            raise AdminStateError(f"{self.store.name}: cannot read the admin state: {exc}") from None
        if text is not None:
            with self._lock:
                self._parse(text, self.store.name)

    # -- what the controller reads ------------------------------------------------------------
    def snapshot_fields(self) -> dict[str, object]:
        """``held``, ``forced_drains`` and ``paused`` for ``dataclasses.replace(snapshot, ...)``."""
        with self._lock:
            return {"held": frozenset(self._held), "forced_drains": frozenset(self._drains),
                    "paused": self._paused}

    def take_cancels(self) -> frozenset[str]:
        """Node ids whose drain the operator asked to cancel since the last call (then forgotten)."""
        with self._lock:
            taken = frozenset(self._cancels)
            self._cancels.clear()
            return taken

    def forget(self, nodes: Iterable[str]) -> None:
        """Drop every entry for ``nodes`` (destroyed nodes), so their holds and drains do not linger."""
        with self._lock:
            kept = False
            for node in nodes:
                kept |= self._held.pop(node, None) is not None
                kept |= self._drains.pop(node, None) is not None
                self._cancels.pop(node, None)
                self._reasons.pop(node, None)
            if kept:
                self._save()

    @property
    def held(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._held)

    @property
    def forced_drains(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._drains)

    @property
    def paused(self) -> str | None:
        with self._lock:
            return self._paused

    def history(self) -> tuple[AdminChange, ...]:
        """The last admin changes, oldest first (at most 100)."""
        with self._lock:
            return tuple(self._history)

    def reason(self, node: str) -> str | None:
        """The operator's reason for holding or draining ``node`` (None: none given)."""
        with self._lock:
            return self._reasons.get(node)

    def to_json(self) -> dict[str, object]:
        with self._lock:
            return {"held": sorted(self._held), "forced_drains": sorted(self._drains),
                    "pending_cancels": sorted(self._cancels), "paused": self._paused,
                    "paused_at": self._paused_at, "reasons": dict(sorted(self._reasons.items()))}

    # -- what the operator asks -----------------------------------------------------------------
    def hold(self, node: str, by: str = "", reason: str = "") -> AdminChange:
        """Never act on ``node`` (no drain, no destroy, no cancel) until released; ``reason`` is
        shown on the page and in the audit line."""
        self._check_writable()
        with self._lock:
            if node in self._held:
                return self._record("hold", node, self._give_reason(node, reason),
                                    "already held" + _because(self._reasons.get(node)), by)
            self._held[node] = self._clock()
            self._give_reason(node, reason)
            return self._record("hold", node, True, "held: no action will be taken on it"
                                + _because(reason), by)

    def release(self, node: str, by: str = "") -> AdminChange:
        """Undo :meth:`hold`."""
        self._check_writable()
        with self._lock:
            if self._held.pop(node, None) is None:
                return self._record("release", node, False, "was not held", by)
            if node not in self._drains:
                self._reasons.pop(node, None)
            return self._record("release", node, True, "released: the matrix decides again", by)

    def drain(self, node: str, by: str = "", reason: str = "") -> AdminChange:
        """Drain ``node`` now (the controller schedules it; budgets and holds still apply);
        ``reason`` is shown on the page and in the audit line."""
        self._check_writable()
        with self._lock:
            self._cancels.pop(node, None)
            if node in self._drains:
                return self._record("drain", node, self._give_reason(node, reason),
                                    "drain already requested" + _because(self._reasons.get(node)), by)
            self._drains[node] = self._clock()
            self._give_reason(node, reason)
            return self._record("drain", node, True, "drain requested: planned next cycle"
                                + _because(reason), by)

    def _give_reason(self, node: str, reason: str) -> bool:
        """Keep ``reason`` for ``node`` (lock held); True when it changed one kept before."""
        reason = reason.strip()
        if not reason or self._reasons.get(node) == reason:
            return False
        self._reasons[node] = reason
        return True

    def cancel(self, node: str, by: str = "") -> AdminChange:
        """Cancel a drain of ours on ``node``: withdraws a forced drain and asks the controller for
        a CANCEL_DRAIN (see :meth:`take_cancels`)."""
        self._check_writable()
        with self._lock:
            forced = self._drains.pop(node, None) is not None
            if node not in self._held:
                self._reasons.pop(node, None)
            self._cancels[node] = self._clock()
            detail = ("forced drain withdrawn; " if forced else "") + \
                "cancel of our drain requested: planned next cycle"
            return self._record("cancel", node, True, detail, by)

    def pause(self, reason: str = "", by: str = "") -> AdminChange:
        """Freeze every action (drain, cancel, destroy, boot) until :meth:`resume`."""
        self._check_writable()
        reason = reason.strip() or "paused by operator"
        with self._lock:
            if self._paused is not None:
                old = self._paused
                self._paused = reason
                return self._record("pause", None, old != reason,
                                    f"already paused; reason now {reason!r} (was {old!r})", by)
            self._paused = reason
            self._paused_at = self._clock()
            return self._record("pause", None, True, f"all actions paused: {reason!r}", by)

    def resume(self, by: str = "") -> AdminChange:
        """Undo :meth:`pause`."""
        self._check_writable()
        with self._lock:
            if self._paused is None:
                return self._record("resume", None, False, "was not paused", by)
            old, self._paused, self._paused_at = self._paused, None, None
            return self._record("resume", None, True, f"actions resumed (pause was {old!r})", by)

    def _check_writable(self) -> None:
        """Raise :class:`AdminRefused` when the store takes no changes from this process."""
        check = getattr(self.store, "check_writable", None)
        if check is not None:
            check()

    def _record(self, action: str, node: str | None, changed: bool, detail: str,
                by: str) -> AdminChange:
        error = self._save() if changed else None
        if error:
            detail = f"{detail} (NOT SAVED, lost at restart: {error})"
        change = AdminChange(action, node, changed, detail, self._clock(), by)
        self._history.append(change)
        del self._history[:-100]
        return change

    # -- the state file -------------------------------------------------------------------------
    def _save(self) -> str | None:
        """Write the state file (lock held); return why it failed, or None."""
        data = {"held": self._held, "forced_drains": self._drains, "paused": self._paused,
                "paused_at": self._paused_at, "reasons": self._reasons}
        if self.store is not None:
            try:
                self.store.write(json.dumps(data, sort_keys=True))
            except OSError as exc:
                log.warning("admin state not saved to %s: %s", self.store.name, exc)
                return f"{self.store.name}: {exc}"
            return None
        if not self.path:
            return None
        tmp = f"{self.path}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("admin state not saved to %s: %s; it holds until this process stops",
                        self.path, exc.strerror or exc)
            return f"{self.path}: {exc.strerror or exc}"
        return None

    def _load(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            raise AdminStateError(f"{path}: cannot read the admin state: {exc}") from None
        self._parse(text, path)

    def _parse(self, text: str, path: str) -> None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AdminStateError(f"{path}:{exc.lineno}:{exc.colno}: the admin state is not JSON: "
                                  f"{exc.msg}") from None
        if not isinstance(data, dict):
            raise AdminStateError(f"{path}: the admin state must be a JSON object")
        held = _node_times(path, data, "held")
        drains = _node_times(path, data, "forced_drains")
        paused, paused_at = data.get("paused"), data.get("paused_at")
        reasons = data.get("reasons", {})
        if not isinstance(reasons, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in reasons.items()):
            raise AdminStateError(f"{path}: \"reasons\" must map node ids to reasons (text)")
        if paused is not None and not isinstance(paused, str):
            raise AdminStateError(f"{path}: \"paused\" must be a reason (text) or null")
        if paused_at is not None and not _is_time(paused_at):
            raise AdminStateError(f"{path}: \"paused_at\" must be a time (seconds) or null")
        self._held, self._drains, self._paused = held, drains, paused
        self._reasons = {k: v for k, v in reasons.items() if k in held or k in drains}
        self._paused_at = float(paused_at) if paused is not None and paused_at is not None else None
        log.info("admin state from %s: %d node(s) held, %d forced drain(s)%s", path, len(held),
                 len(drains), f", PAUSED: {paused}" if paused is not None else "")


def _because(reason: str | None) -> str:
    return f" (reason: {reason})" if reason else ""


def _is_time(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _node_times(path: str, data: dict[str, Any], key: str) -> dict[str, float]:
    value = data.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(k, str) and _is_time(v) for k, v in value.items()):
        raise AdminStateError(f"{path}: \"{key}\" must map node ids to times (seconds)")
    return {k: float(v) for k, v in value.items()}
