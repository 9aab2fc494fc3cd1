"""What operators asked for through the admin API: held nodes, forced drains, cancels, a pause.

One :class:`AdminState` per daemon, shared by the status server (which writes it) and the
controller (which reads it once per cycle). Every method is thread-safe.

How the controller uses it, each cycle::

    snapshot = dataclasses.replace(snapshot, **admin.snapshot_fields())   # held, forced_drains, paused
    cancels = admin.pending_cancels()   # node ids whose drain of ours the operator wants cancelled:
                                        # plan a CANCEL_DRAIN for each while the drain lasts
    admin.cancels_done(ended)           # those with no drain of ours left: forgotten (and saved)
    admin.forget(gone)                  # node ids that no longer exist in the cloud

A node is named by what the operator typed; the status server resolves names (cloud name,
worker name) to the cloud node id before calling in, so the sets hold node ids whenever the node
was known.

With a ``path`` (``[Manage] state_file``), held nodes, forced drains, pending cancels and the
pause are written to that JSON file after every change (a temporary file, fsync, rename: a crash
leaves the old or the new state, never half of one) and read back at start, so a restart keeps
them. A file that cannot be read back is an :class:`AdminStateError` naming it (the daemon does
not start without the holds it was given); a change that cannot be saved to the file still
applies, and its answer says it was not saved.

With a ``store`` instead (``[HA]``: :class:`nodemanager.ha.admin_store.EtcdAdminStore`), the same
JSON goes to the store (``read()`` / ``write(text)``, ``name`` for messages) and :meth:`reload`
reads it back (a new HA leader does, so holds, drains, cancels and a pause survive a failover).
There a change is applied only once the store has it: one the store could not save raises
:class:`AdminNotSaved` and changes nothing (another head would not know it). A store with
``check_writable()`` may refuse operator changes (an HA standby): they then raise
:class:`AdminRefused` and change nothing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from nodemanager.console.admin_doc import AdminDoc, AdminStateError, log_loaded, parse_admin

__all__ = ["AdminState", "AdminChange", "AdminRefused", "AdminNotSaved", "AdminStateError", "StoreConflict",
           "ADMIN_ACTIONS"]

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


class AdminRefused(Exception):
    """A change this process may not make (an HA standby): nothing was changed; ``leader`` names
    the process that can make it (None when nobody leads now)."""

    def __init__(self, message: str, leader: str | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class AdminNotSaved(Exception):
    """A change the store could not save: it was not applied either."""


class StoreConflict(OSError):
    """The store holds another state than the one this process last read or wrote (another head
    wrote it): the change was not saved; the state is read again."""


class AdminState:
    """Held nodes, forced drains, pending cancels and the pause reason, behind one lock; kept in
    the JSON file ``path`` or the ``store`` when given (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.time, path: str | None = None,
                 store: Any = None) -> None:
        self._clock = clock
        self._lock = threading.Lock()         # the state in memory
        self._write_lock = threading.Lock()   # one change (copy, save, install) at a time
        self._doc = AdminDoc()
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
                with self._write_lock:
                    self._load(self.path)
            return
        with self._write_lock:
            try:
                text = self.store.read()
            except OSError as exc:
                raise AdminStateError(f"{self.store.name}: cannot read the admin state: {exc}") from None
            if text is not None:
                doc = parse_admin(text, self.store.name)
                with self._lock:
                    before, self._doc = self._doc, doc
                if before != doc:
                    log_loaded(self.store.name, doc)

    # -- what the controller reads ------------------------------------------------------------
    def snapshot_fields(self) -> dict[str, object]:
        """``held``, ``forced_drains`` and ``paused`` for ``dataclasses.replace(snapshot, ...)``."""
        with self._lock:
            return {"held": frozenset(self._doc.held), "forced_drains": frozenset(self._doc.drains),
                    "paused": self._doc.paused}

    def pending_cancels(self) -> frozenset[str]:
        """Node ids whose drain the operator asked to cancel (kept until :meth:`cancels_done`)."""
        with self._lock:
            return frozenset(self._doc.cancels)

    def cancels_done(self, nodes: Iterable[str]) -> None:
        """Forget the cancels of ``nodes``: no drain of ours is left on them."""
        self._quiet_change(lambda doc: any(doc.cancels.pop(n, None) is not None for n in list(nodes)))

    def forget(self, nodes: Iterable[str]) -> None:
        """Drop every entry for ``nodes`` (destroyed nodes), so their holds and drains do not linger."""
        gone = list(nodes)

        def edit(doc: AdminDoc) -> bool:
            kept = False
            for node in gone:
                kept |= doc.held.pop(node, None) is not None
                kept |= doc.drains.pop(node, None) is not None
                kept |= doc.cancels.pop(node, None) is not None
                kept |= doc.reasons.pop(node, None) is not None
            return kept
        self._quiet_change(edit)

    @property
    def held(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._doc.held)

    @property
    def forced_drains(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._doc.drains)

    @property
    def paused(self) -> str | None:
        with self._lock:
            return self._doc.paused

    def history(self) -> tuple[AdminChange, ...]:
        """The last admin changes, oldest first (at most 100)."""
        with self._lock:
            return tuple(self._history)

    def reason(self, node: str) -> str | None:
        """The operator's reason for holding or draining ``node`` (None: none given)."""
        with self._lock:
            return self._doc.reasons.get(node)

    def to_json(self) -> dict[str, object]:
        with self._lock:
            doc = self._doc
            return {"held": sorted(doc.held), "forced_drains": sorted(doc.drains),
                    "pending_cancels": sorted(doc.cancels), "paused": doc.paused,
                    "paused_at": doc.paused_at, "reasons": dict(sorted(doc.reasons.items()))}

    # -- what the operator asks -----------------------------------------------------------------
    def hold(self, node: str, by: str = "", reason: str = "") -> AdminChange:
        """Never act on ``node`` (no drain, no destroy, no cancel) until released; ``reason`` is
        shown on the page and in the audit line."""
        def edit(doc: AdminDoc) -> tuple[bool, str]:
            if node in doc.held:
                return _give_reason(doc, node, reason), "already held" + _because(doc.reasons.get(node))
            doc.held[node] = self._clock()
            _give_reason(doc, node, reason)
            return True, "held: no action will be taken on it" + _because(reason.strip())
        return self._change("hold", node, by, edit)

    def release(self, node: str, by: str = "") -> AdminChange:
        """Undo :meth:`hold`."""
        def edit(doc: AdminDoc) -> tuple[bool, str]:
            if doc.held.pop(node, None) is None:
                return False, "was not held"
            if node not in doc.drains:
                doc.reasons.pop(node, None)
            return True, "released: the matrix decides again"
        return self._change("release", node, by, edit)

    def drain(self, node: str, by: str = "", reason: str = "") -> AdminChange:
        """Drain ``node`` now (the controller schedules it; budgets and holds still apply);
        ``reason`` is shown on the page and in the audit line."""
        def edit(doc: AdminDoc) -> tuple[bool, str]:
            withdrawn = doc.cancels.pop(node, None) is not None
            if node in doc.drains:
                changed = _give_reason(doc, node, reason)
                return withdrawn or changed, "drain already requested" + _because(doc.reasons.get(node))
            doc.drains[node] = self._clock()
            _give_reason(doc, node, reason)
            return True, "drain requested: planned next cycle" + _because(reason.strip())
        return self._change("drain", node, by, edit)

    def cancel(self, node: str, by: str = "") -> AdminChange:
        """Cancel a drain of ours on ``node``: withdraws a forced drain and asks the controller for
        a CANCEL_DRAIN while the drain lasts (see :meth:`pending_cancels`)."""
        def edit(doc: AdminDoc) -> tuple[bool, str]:
            forced = doc.drains.pop(node, None) is not None
            if node not in doc.held:
                doc.reasons.pop(node, None)
            doc.cancels[node] = self._clock()
            return True, ("forced drain withdrawn; " if forced else "") + \
                "cancel of our drain requested: planned next cycle"
        return self._change("cancel", node, by, edit)

    def pause(self, reason: str = "", by: str = "") -> AdminChange:
        """Freeze every action (drain, cancel, destroy, boot) until :meth:`resume`."""
        reason = reason.strip() or "paused by operator"

        def edit(doc: AdminDoc) -> tuple[bool, str]:
            if doc.paused is not None:
                old, doc.paused = doc.paused, reason
                return old != reason, f"already paused; reason now {reason!r} (was {old!r})"
            doc.paused, doc.paused_at = reason, self._clock()
            return True, f"all actions paused: {reason!r}"
        return self._change("pause", None, by, edit)

    def resume(self, by: str = "") -> AdminChange:
        """Undo :meth:`pause`."""
        def edit(doc: AdminDoc) -> tuple[bool, str]:
            if doc.paused is None:
                return False, "was not paused"
            old, doc.paused, doc.paused_at = doc.paused, None, None
            return True, f"actions resumed (pause was {old!r})"
        return self._change("resume", None, by, edit)

    def _check_writable(self) -> None:
        """Raise :class:`AdminRefused` when the store takes no changes from this process."""
        check = getattr(self.store, "check_writable", None)
        if check is not None:
            check()

    def _change(self, action: str, node: str | None, by: str,
                edit: Callable[[AdminDoc], tuple[bool, str]]) -> AdminChange:
        """Apply ``edit`` to a copy, save it, then install it; with a store, raise
        :class:`AdminNotSaved` (nothing changed) when the store did not take it. When another
        head changed the store, the edit is made again on the state read from it."""
        self._check_writable()
        with self._write_lock:
            for again in (True, False):
                with self._lock:
                    doc = self._doc.copy()
                changed, detail = edit(doc)
                try:
                    error = self._save(doc) if changed else None
                except StoreConflict as exc:
                    if self._reread() and again:
                        continue
                    error = f"{self.store.name}: {exc}"
                break
            if error is not None and self.store is not None:
                what = f"{action} {node}" if node else action
                raise AdminNotSaved(f"{what} not saved, so not applied: {error}")
            if error:
                detail = f"{detail} (NOT SAVED, lost at restart: {error})"
            with self._lock:
                self._doc = doc
                change = AdminChange(action, node, changed, detail, self._clock(), by)
                self._history.append(change)
                del self._history[:-100]
                return change

    def _quiet_change(self, edit: Callable[[AdminDoc], bool]) -> None:
        """A change the controller makes (no answer, no history): applied once saved; a store
        that is not ours to write (an HA standby) or did not take it leaves it for a later cycle."""
        if self.store is not None:
            try:
                self._check_writable()
            except AdminRefused:
                return
        with self._write_lock:
            with self._lock:
                doc = self._doc.copy()
            if not edit(doc):
                return
            try:
                failed = self._save(doc) is not None
            except StoreConflict:
                self._reread()
                return
            if failed and self.store is not None:
                return
            with self._lock:
                self._doc = doc

    # -- the state file -------------------------------------------------------------------------
    def _save(self, doc: AdminDoc) -> str | None:
        """Write ``doc`` to the store or the state file; return why it failed, or None."""
        if self.store is not None:
            try:
                self.store.write(doc.to_text())
            except StoreConflict:
                raise
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
                fh.write(doc.to_text())
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("admin state not saved to %s: %s; it holds until this process stops",
                        self.path, exc.strerror or exc)
            return f"{self.path}: {exc.strerror or exc}"
        return None

    def _reread(self) -> bool:
        """After a conflict (write lock held): the store's state replaces ours; False when it
        cannot be read."""
        try:
            text = self.store.read()
            doc = parse_admin(text, self.store.name) if text is not None else AdminDoc()
        except (OSError, AdminStateError) as exc:
            log.warning("admin state: %s cannot be read again: %s", self.store.name, exc)
            return False
        with self._lock:
            self._doc = doc
        log_loaded(self.store.name, doc)
        return True

    def _load(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            raise AdminStateError(f"{path}: cannot read the admin state: {exc}") from None
        doc = parse_admin(text, path)
        with self._lock:
            self._doc = doc
        log_loaded(path, doc)


def _give_reason(doc: AdminDoc, node: str, reason: str) -> bool:
    """Keep ``reason`` for ``node`` in ``doc``; True when it changed what was kept."""
    reason = reason.strip()
    if not reason or doc.reasons.get(node) == reason:
        return False
    doc.reasons[node] = reason
    return True


def _because(reason: str | None) -> str:
    return f" (reason: {reason})" if reason else ""
