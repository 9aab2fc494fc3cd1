"""One store for what the daemon remembers: the spend ledger, node histories and their events, the
controller's memories and the admin state. SQLite in ``<state_dir>/<cluster>.db`` by default,
PostgreSQL with ``[Store] url`` (shared by an HA pair). Written by one writer thread off the
decision path (:mod:`.writer`); read by queries (:mod:`.sql`).

API note::

    store, writer = start(settings, clock)    # opened and upgraded; StoreTooNew: refuse to start
    writer.start(); writer.submit(changes)    # never waits on the store
    writer.health()                           # ok, pending, dropped: the page and the metrics
    reader = open_store(settings, read_only=True)   # `cost`, `history`: no lock, daemon running
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

from nodemanager.store.port import KINDS, Changes, Life, Store, StoreError, StoreTooNew
from nodemanager.store.writer import StoreHealth, StoreWriter

__all__ = ["Store", "Changes", "Life", "StoreError", "StoreTooNew", "StoreWriter", "StoreHealth", "KINDS",
           "open_store", "start", "store_path", "retention"]

log = logging.getLogger("nodemanager.store")

KEEP_ACTIONS = 86400.0   # seconds the actuator's destroy and boot times are kept (the budgets read the last hour)


def store_path(settings: Any) -> str:
    """``<state_dir>/<cluster>.db`` (the SQLite store)."""
    return os.path.join(settings.manage.state_dir, f"{settings.cloud.cluster}.db")


def open_store(settings: Any, read_only: bool = False) -> Any:
    """The store ``settings`` name (not connected yet): PostgreSQL with ``[Store] url``, else the
    SQLite file in ``state_dir`` (in this process only without one)."""
    if settings.store.url:
        try:
            from nodemanager.store.postgres import PostgresStore
            return PostgresStore(settings.store.url, read_only=read_only)
        except ImportError:
            raise StoreError("[Store] url: PostgreSQL needs psycopg 3 (pip install 'psycopg[binary]')") from None
    from nodemanager.store.sqlite import MEMORY, SqliteStore
    return SqliteStore(store_path(settings) if settings.manage.state_dir else MEMORY, read_only=read_only)


def retention(settings: Any) -> dict[str, float]:
    """Seconds each kind (:data:`KINDS`) is kept."""
    s = settings.store
    return {"ledger": s.keep_ledger, "events": s.keep_events, "gone": s.keep_gone, "actions": KEEP_ACTIONS}


def start(settings: Any, clock: Callable[[], float], store: Any = None) -> tuple[Any, StoreWriter]:
    """The daemon's store, created or upgraded, and its writer (not started). A SQLite file that is
    not a database is set aside under a new name (never replaced) and a new store started, which the
    page says; a store that cannot be reached now (locked, a full disk, PostgreSQL down) is tried
    again by the writer while the daemon runs. Raises :class:`StoreTooNew`."""
    from nodemanager.store.sqlite import SqliteStore, set_aside, unreadable
    try:
        store = store if store is not None else open_store(settings)
    except StoreError as exc:
        raise ValueError(str(exc)) from None      # a setup error: the daemon does not start
    note = ""
    try:
        store.ready()
    except StoreTooNew:
        store.close()
        raise
    except StoreError as exc:
        store.close()
        if isinstance(store, SqliteStore) and unreadable(exc) and os.path.exists(store.path):
            why = str(exc.__cause__ or exc)
            aside = set_aside(store.path, why, clock)
            if aside is None:
                note = f"{store.path} is unreadable ({why}) and could not be set aside: never written over"
                log.error("store %s", note)
            else:
                note = f"{store.path} was unreadable ({why}): set aside as {aside}; a new store started"
                log.error("store %s", note)
            try:
                if aside is None:
                    raise StoreError(note)
                store.ready()
            except StoreError as again:
                log.error("store %s: cannot be opened (%s); what the daemon learns is kept in memory until it "
                          "can", store.name, again)
        else:
            log.error("store %s: cannot be opened now (%s); what the daemon learns is kept in memory until it "
                      "can", store.name, exc)
    writer = StoreWriter(store, clock=clock, bound=settings.store.buffer, retention=retention(settings), note=note)
    return store, writer
