"""The daemon's store, wired: opened (in memory for a dry run, which may run beside the real
daemon), its writer, its metrics, and who may write: with ``[HA]`` on a store both heads share,
the leader only; a new leader goes on with the old one's live ledger and memories."""

from __future__ import annotations

import logging
from typing import Any, Callable

from nodemanager.console.admin import AdminState
from nodemanager.console.history import NodeHistory
from nodemanager.console.spend_ledger import SpendLedger
from nodemanager.core.rate_history import HOUR
from nodemanager.store import Changes, StoreError, start
from nodemanager.cycle.store_keeper import AdminBacking, StoreKeeper
from nodemanager.store.metrics import StoreCollector
from nodemanager.store.sqlite import MEMORY, SqliteStore

__all__ = ["DaemonStore"]

log = logging.getLogger("nodemanager.store")


class DaemonStore:
    """``store`` and its ``writer`` for a daemon with ``settings``; ``ha``: its HighAvailability."""

    def __init__(self, settings: Any, clock: Callable[[], float], registry: Any, ha: Any = None,
                 dry_run: bool = False) -> None:
        self.clock, self.ha = clock, ha
        self.store, self.writer = start(settings, clock, SqliteStore(MEMORY) if dry_run else None)
        self.shared = ha is not None and self.store.shared
        registry.register(StoreCollector(self.writer.health))

    def submit(self, changes: Changes) -> None:
        """Hand the writer what changed (on a shared store: while this head leads)."""
        if not self.shared or self.ha.lease.acting():
            self.writer.submit(changes)

    def keeper(self) -> StoreKeeper:
        return StoreKeeper(self.store, self.submit, self.clock)

    def admin_state(self, state_file: str) -> AdminState:
        """The operators' holds, drains and pause: with ``[HA]`` in etcd, for whichever head leads
        (read when it does); else in the store, read now (``state_file``: an older release's, imported)."""
        if self.ha is not None:
            return AdminState(clock=self.clock, store=self.ha.admin_store)
        admin = AdminState(clock=self.clock, store=AdminBacking(self.store, self.clock, state_file))
        admin.reload()
        return admin

    def history_and_ledger(self, settings: Any, registry: Any) -> tuple[NodeHistory, SpendLedger]:
        """Each node's events and who spent what, kept here."""
        return (NodeHistory.for_settings(settings, self.store, self.submit, self.clock()),
                SpendLedger.for_settings(settings, self.store, self.submit, registry, self.clock))

    def keep_actions(self, actuator: Any) -> None:
        """Keep ``actuator``'s destroys and boots in the store, and give it those kept by the process
        before (the rate budgets count them: a cloud that drops a destroyed VM at once forgets them)."""
        actuator.keep_action = lambda kind, key, at: self.submit(Changes(actions={(kind, key): at}))
        self._restore_actions(actuator)

    def _restore_actions(self, actuator: Any) -> None:
        try:
            kept = self.store.actions(self.clock() - HOUR)
        except StoreError as exc:
            log.warning("the last hour's destroys and boots cannot be read from the store (%s): the rate "
                        "budgets count what the cloud lists", exc)
            return
        actuator.restore_actions(kept)

    def new_leader(self, spend: Any, memories: Any, actuator: Any = None) -> None:
        """This head now leads: on a shared store, take the old leader's live ledger, memories and
        the last hour's destroys and boots."""
        if self.shared:
            spend.resume()
            memories.load(self.clock())
            if actuator is not None:
                self._restore_actions(actuator)
