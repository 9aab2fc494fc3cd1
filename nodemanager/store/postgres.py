"""The store in PostgreSQL (``[Store] url = postgresql://...``), through psycopg 3: one database
shared by an HA pair, so a new leader continues the old one's ledger, histories and memories."""

from __future__ import annotations

import re
from typing import Any

from nodemanager.store.sql import SqlStore

__all__ = ["PostgresStore", "shown"]

CONNECT_TIMEOUT = 5      # seconds to reach the server
STATEMENT_TIMEOUT = 10_000   # milliseconds a statement may run (a lock held elsewhere ends in an error)


def shown(url: str) -> str:
    """``url`` without its password (for logs and the page)."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", url)


class PostgresStore(SqlStore):
    """The store in the PostgreSQL database at ``url`` (shared: with ``[HA]`` only the leader writes)."""

    shared = True

    words = {"float": "DOUBLE PRECISION", "serial": "BIGSERIAL PRIMARY KEY", "least": "LEAST",
             "greatest": "GREATEST"}
    named = "%({})s"

    def __init__(self, url: str, read_only: bool = False) -> None:
        import psycopg
        super().__init__(read_only)
        self.url = url
        self.name = shown(url)
        self.errors = (psycopg.Error, OSError)

    def lock_schema(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(738201)")   # any fixed number, this schema's own

    def has_table(self, cur: Any, table: str) -> bool:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
        return bool(cur.fetchone()[0])

    def size_bytes(self) -> int:
        with self.reading() as cur:
            cur.execute("SELECT pg_database_size(current_database())")
            return int(cur.fetchone()[0])

    def connect(self, write: bool) -> Any:
        import psycopg
        conn = psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT,
                               options=f"-c statement_timeout={STATEMENT_TIMEOUT}")
        if not write or self.read_only:
            conn.read_only = True
        return conn
