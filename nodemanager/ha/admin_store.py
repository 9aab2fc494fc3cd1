"""The admin state (holds, forced drains, pause) kept in etcd under ``[HA] admin_key``, so a new
leader reads what operators asked of the old one; with a copy in each head's ``state_dir``
(:class:`~nodemanager.ha.local.HeadRecords`), re-published by a leader that finds etcd empty, so
the state survives etcd losing its data."""

from __future__ import annotations

import logging
from typing import Callable

from nodemanager.console.admin import AdminRefused
from nodemanager.ha.etcd import EtcdClient, EtcdError
from nodemanager.ha.local import HeadRecords

__all__ = ["EtcdAdminStore"]

log = logging.getLogger("nodemanager.ha")


class EtcdAdminStore:
    """``read()``/``write(text)`` of one etcd key for :class:`nodemanager.console.admin.AdminState`.

    Only the acting leader writes (``acting()``): a change asked of a standby is refused with the
    leader's name, since the leader would overwrite it with its own state."""

    def __init__(self, client: EtcdClient, key: str, acting: Callable[[], bool],
                 leader: Callable[[], str | None], records: HeadRecords | None = None) -> None:
        self.client, self.key, self._acting, self._leader = client, key, acting, leader
        self.records = records or HeadRecords("")
        self.name = f"etcd key {key}"

    def read(self) -> str | None:
        """The state in etcd (kept as the local copy); when etcd has none, the local copy, which
        the acting leader publishes again."""
        try:
            kv = self.client.get(self.key)
        except EtcdError as exc:
            raise OSError(str(exc)) from None
        if kv is not None:
            self.records.keep_admin(kv.value)
            return kv.value
        copy = self.records.admin_copy()
        if copy is not None and self._acting():
            log.warning("HA: %s is missing (etcd lost its data?): the copy kept on this head is "
                        "published again", self.name)
            try:
                self.client.put(self.key, copy)
            except EtcdError as exc:
                raise OSError(str(exc)) from None
        return copy

    def check_writable(self) -> None:
        """Raise :class:`AdminRefused`, naming the leader, unless this process is the acting leader."""
        if not self._acting():
            leader = self._leader()
            raise AdminRefused(f"this node manager is a standby: make the change on the leader "
                               f"({leader or 'none now'})", leader)

    def write(self, text: str) -> None:
        if not self._acting():
            raise OSError(f"this node manager is a standby: make the change on the leader "
                          f"({self._leader() or 'none now'})")
        try:
            self.client.put(self.key, text)
        except EtcdError as exc:
            raise OSError(str(exc)) from None
        self.records.keep_admin(text)
