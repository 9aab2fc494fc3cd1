"""The store in one SQLite file (``<state_dir>/<cluster>.db``, WAL): nothing to install, readers
(``nodemanager cost``, ``history``) open it read-only while the daemon writes."""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import Any, Callable

from nodemanager.store import state_files
from nodemanager.store.port import StoreError
from nodemanager.store.sql import SqlStore

__all__ = ["SqliteStore", "MEMORY", "set_aside"]

log = logging.getLogger("nodemanager.store")

MEMORY = ":memory:"
BUSY_TIMEOUT = 1.0      # seconds a write waits for another process's lock before it is retried later


class SqliteStore(SqlStore):
    """The store in the SQLite file ``path`` (:data:`MEMORY`: in this process only)."""

    words = {"float": "REAL", "serial": "INTEGER PRIMARY KEY", "least": "MIN", "greatest": "MAX"}
    errors = (sqlite3.Error,)

    def __init__(self, path: str, read_only: bool = False) -> None:
        super().__init__(read_only)
        self.path = path
        self.name = "in-memory store" if path == MEMORY else path

    def shared_reader(self) -> bool:
        return self.path == MEMORY

    def connect(self, write: bool) -> Any:
        if self.path == MEMORY:
            return sqlite3.connect(MEMORY, isolation_level=None, check_same_thread=False)
        if not write or self.read_only:
            if not os.path.exists(self.path):
                raise sqlite3.OperationalError("no such file (the daemon has not written its store yet)")
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=BUSY_TIMEOUT)
            return conn
        os.makedirs(os.path.dirname(self.path) or ".", mode=0o700, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT)
        try:
            os.chmod(self.path, 0o600)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")     # a commit is on disk before it is acknowledged
        except BaseException:
            conn.close()
            raise
        return conn

    def has_table(self, cur: Any, table: str) -> bool:
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
        return cur.fetchone() is not None

    def size_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in self.files() if os.path.exists(p))

    def files(self) -> tuple[str, ...]:
        """The database file and the WAL files beside it."""
        return (self.path, self.path + "-wal", self.path + "-shm")

    def begin(self, conn: Any) -> None:
        if self.read_only:
            raise sqlite3.OperationalError("opened read-only")
        conn.execute("BEGIN IMMEDIATE")


def unreadable(exc: BaseException) -> bool:
    """True when ``exc`` says the file is not a usable database (not when it is only locked or the
    disk is full: those pass)."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    return (isinstance(cause, sqlite3.DatabaseError) and not isinstance(cause, sqlite3.OperationalError)) \
        or "malformed" in str(cause) or "not a database" in str(cause)


def set_aside(path: str, why: str, clock: Callable[[], float]) -> str | None:
    """Set the unreadable store at ``path`` aside by the daemon's one rule for unreadable state
    (:func:`nodemanager.store.state_files.set_aside`), its WAL files beside it; the new name, or
    None when it could not be moved (then it is never written)."""
    target = state_files.set_aside(path, why, "store", clock=clock)
    if target is not None:
        for suffix in ("-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.rename(path + suffix, target + suffix)
    return target
