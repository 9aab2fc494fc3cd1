"""The admin state (holds, forced drains, cancels, pause) kept in etcd under ``[HA] admin_key``, so
a new leader reads what operators asked of the old one; with a copy in each head's ``state_dir``
(:class:`~nodemanager.ha.local.HeadRecords`), re-published by a leader that finds etcd empty, so
the state survives etcd losing its data.

A change is saved, or known not to be, before anyone is answered: every write is a
compare-and-set on the key's last revision, so a request etcd applies late (it was frozen when
the answer timed out) can never land after a later write. A write whose outcome is unknown is
read back and tried again until etcd says, for up to ``window`` seconds and while this head
leads; past that, the change is refused and marked in doubt. Before the next write or action the
doubt is settled: the state before it is written again, undoing the refused change if etcd
applied it after all, so what was refused is never in force.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from nodemanager.console.admin import AdminRefused, StoreConflict
from nodemanager.ha.etcd import EtcdClient, EtcdError, KeyValue
from nodemanager.ha.local import HeadRecords

__all__ = ["EtcdAdminStore"]

log = logging.getLogger("nodemanager.ha")

EMPTY_STATE = "{}"   # what "no admin state" is written as when a refused first write must be undone


class EtcdAdminStore:
    """``read()``/``write(text)`` of one etcd key for :class:`nodemanager.console.admin.AdminState`.

    Only the acting leader writes (``acting()``): a change asked of a standby is refused with the
    leader's name, since the leader would overwrite it with its own state."""

    def __init__(self, client: EtcdClient, key: str, acting: Callable[[], bool],
                 leader: Callable[[], str | None], records: HeadRecords | None = None, *,
                 window: float = 15.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client, self.key, self._acting, self._leader = client, key, acting, leader
        self.records = records or HeadRecords("")
        self.name = f"etcd key {key}"
        self.window, self.clock, self.sleep = window, clock, sleep
        self._lock = threading.Lock()
        self._known: tuple[int, str | None] | None = None   # (mod_revision, text) last read or written
        self._doubt: str | None = None       # a write refused while etcd may still apply it

    def in_doubt(self) -> str | None:
        """Why the state in etcd is not known now (a refused write etcd may have applied), or None."""
        return (f"a refused admin change may have reached {self.name}; it is undone before this "
                "head acts") if self._doubt is not None else None

    def read(self) -> str | None:
        """The state in etcd (kept as the local copy), after settling a write in doubt; when etcd
        has none, the local copy, which the acting leader publishes again."""
        with self._lock:
            try:
                kv = self.client.get(self.key)
                if self._doubt is not None and self._acting():
                    kv = self._settle(kv)
            except EtcdError as exc:
                raise OSError(str(exc)) from None
            if kv is not None:
                self._known = (kv.mod_revision, kv.value)
                self.records.keep_admin(kv.value)
                return kv.value
            self._known = (0, None)
            copy = self.records.admin_copy()
            if copy is not None and self._acting():
                log.warning("HA: %s is missing (etcd lost its data?): the copy kept on this head is "
                            "published again", self.name)
                try:
                    ok, revision = self.client.put_if(self.key, copy, 0)
                except EtcdError as exc:
                    raise OSError(str(exc)) from None
                if ok:
                    self._known = (revision, copy)
            return copy

    def check_writable(self) -> None:
        """Raise :class:`AdminRefused`, naming the leader, unless this process is the acting leader."""
        if not self._acting():
            leader = self._leader()
            raise AdminRefused(f"this node manager is a standby: make the change on the leader "
                               f"({leader or 'none now'})", leader)

    def write(self, text: str) -> None:
        """Save ``text``; return only once etcd has it. OSError: not saved (StoreConflict: another
        head changed the key since this one read it)."""
        if not self._acting():
            raise OSError(f"this node manager is a standby: make the change on the leader "
                          f"({self._leader() or 'none now'})")
        with self._lock:
            if self._known is None or self._doubt is not None:
                try:
                    kv = self.client.get(self.key)
                    kv = self._settle(kv) if self._doubt is not None else kv
                except EtcdError as exc:
                    raise OSError(f"etcd did not answer ({exc})") from None
                before = self._known
                self._known = (kv.mod_revision, kv.value) if kv is not None else (0, None)
                if before is None or before != self._known:
                    raise StoreConflict("the state in etcd was not the one this head held: read again")
            self._write(text)
        self.records.keep_admin(text)

    def _write(self, text: str) -> None:
        """Compare-and-set ``text`` on the known revision; read back and try again while the
        outcome is unknown (lock held)."""
        assert self._known is not None
        base = self._known[0]
        end = self.clock() + self.window
        unsure = False        # an attempt may have been applied: read before trying again
        while True:
            try:
                if unsure:
                    kv = self.client.get(self.key)
                    revision = kv.mod_revision if kv is not None else 0
                    if revision != base:
                        self._known = (revision, kv.value if kv is not None else None)
                        if kv is not None and kv.value == text:
                            return                                  # an earlier attempt landed
                        raise StoreConflict("another head changed the admin state in etcd: read again")
                    unsure = False                                  # not applied: try again
                if not self._acting():
                    raise OSError("this head stopped leading before etcd answered")
                unsure = True
                ok, revision = self.client.put_if(self.key, text, base)
                if ok:
                    self._known = (revision, text)
                    return
            except EtcdError as exc:
                lost = not self._acting()
                if lost or self.clock() >= end:
                    if unsure:
                        self._doubt = text
                    why = ("this head's lease ran out first" if lost else f"not within {self.window:g}s")
                    raise OSError(f"etcd did not answer, {why} ({exc})") from None
                self.sleep(0.2)

    def _settle(self, kv: KeyValue | None) -> KeyValue | None:
        """End the doubt of a refused write (lock held, acting): write the state before it again
        (undoing it if etcd applied it late), so it can never land later; the key as it is then."""
        assert self._doubt is not None and self._known is not None
        base, before = self._known
        revision = kv.mod_revision if kv is not None else 0
        if revision != base and (kv is None or kv.value != self._doubt):
            self._doubt = None                          # another head wrote since: it can never land
            return kv
        if revision != base:
            log.warning("HA: an admin change refused while etcd did not answer reached %s later; "
                        "undone", self.name)
        restored = before if before is not None else EMPTY_STATE
        ok, new = self.client.put_if(self.key, restored, revision)
        if not ok:
            return self._settle(self.client.get(self.key))
        self._doubt = None
        return KeyValue(key=self.key, value=restored, create_revision=0, mod_revision=new, lease=0)
