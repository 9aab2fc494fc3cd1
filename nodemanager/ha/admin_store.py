"""The admin state (holds, forced drains, pause) kept in etcd under ``[HA] admin_key``, so a new
leader reads what operators asked of the old one."""

from __future__ import annotations

from typing import Callable

from nodemanager.ha.etcd import EtcdClient, EtcdError

__all__ = ["EtcdAdminStore"]


class EtcdAdminStore:
    """``read()``/``write(text)`` of one etcd key for :class:`nodemanager.console.admin.AdminState`.

    Only the acting leader writes (``acting()``): a change asked of a standby is refused with the
    leader's name, since the leader would overwrite it with its own state."""

    def __init__(self, client: EtcdClient, key: str, acting: Callable[[], bool],
                 leader: Callable[[], str | None]) -> None:
        self.client, self.key, self._acting, self._leader = client, key, acting, leader
        self.name = f"etcd key {key}"

    def read(self) -> str | None:
        try:
            kv = self.client.get(self.key)
        except EtcdError as exc:
            raise OSError(str(exc)) from None
        return kv.value if kv is not None else None

    def write(self, text: str) -> None:
        if not self._acting():
            raise OSError(f"this node manager is a standby: make the change on the leader "
                          f"({self._leader() or 'none now'})")
        try:
            self.client.put(self.key, text)
        except EtcdError as exc:
            raise OSError(str(exc)) from None
