"""The store's schema, one version after another: a newer daemon brings an older store up to
:data:`LATEST` on start (each step in its own transaction), and refuses a store newer than itself.

Statements name their column types through the dialect (``{float}``, ``{serial}``), the only
words SQLite and PostgreSQL spell differently here.
"""

from __future__ import annotations

from typing import Any

from nodemanager.store.port import StoreError, StoreTooNew

__all__ = ["MIGRATIONS", "LATEST", "TABLES", "migrate", "stored_version"]

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        "CREATE TABLE node_life (node_id TEXT PRIMARY KEY, size TEXT NOT NULL, price {float} NOT NULL, "
        "start_at {float} NOT NULL, end_at {float} NOT NULL, closed INTEGER NOT NULL, "
        "total {float} NOT NULL, jobs TEXT NOT NULL)",
        "CREATE INDEX node_life_end ON node_life (end_at)",
        "CREATE INDEX node_life_open ON node_life (closed) WHERE closed = 0",
        # a share carries its life's times, price, size and total: `cost` reads one table
        "CREATE TABLE node_share (node_id TEXT NOT NULL, user_name TEXT NOT NULL, group_name TEXT NOT NULL, "
        "core_seconds {float} NOT NULL, size TEXT NOT NULL, price {float} NOT NULL, start_at {float} NOT NULL, "
        "end_at {float} NOT NULL, total {float} NOT NULL, closed INTEGER NOT NULL, PRIMARY KEY (node_id, user_name, group_name))",
        "CREATE INDEX node_share_start ON node_share (start_at)",
        "CREATE INDEX node_share_open ON node_share (closed) WHERE closed = 0",
        "CREATE INDEX node_life_start ON node_life (start_at)",
        # the closed nodes' spend per UTC day and user, group or size: `cost` over months sums days
        "CREATE TABLE spend_day (by_key TEXT NOT NULL, day INTEGER NOT NULL, name TEXT NOT NULL, "
        "node_hours {float} NOT NULL, money {float} NOT NULL, core_hours {float} NOT NULL, "
        "PRIMARY KEY (by_key, day, name))",
        "CREATE TABLE node_event (id {serial}, node_id TEXT NOT NULL, at {float} NOT NULL, kind TEXT NOT NULL, "
        "text TEXT NOT NULL)",
        "CREATE INDEX node_event_node ON node_event (node_id, at)",
        "CREATE INDEX node_event_at ON node_event (at)",
        "CREATE TABLE node_gone (node_id TEXT PRIMARY KEY, at {float} NOT NULL, info TEXT NOT NULL)",
        "CREATE INDEX node_gone_at ON node_gone (at)",
        "CREATE TABLE memory (kind TEXT PRIMARY KEY, doc TEXT NOT NULL, at {float} NOT NULL)",
    )),
    (2, (
        # the actuator's destroys and boots of the last hours: the rate budgets survive a restart
        "CREATE TABLE action_time (kind TEXT NOT NULL, key TEXT NOT NULL, at {float} NOT NULL, "
        "PRIMARY KEY (kind, key))",
        "CREATE INDEX action_time_at ON action_time (at)",
    )),
)
LATEST = MIGRATIONS[-1][0]
# every table's columns at LATEST, as `nodemanager store-copy` copies them (node_event's id is the target's own)
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("node_life", ("node_id", "size", "price", "start_at", "end_at", "closed", "total", "jobs")),
    ("node_share", ("node_id", "user_name", "group_name", "core_seconds", "size", "price", "start_at", "end_at",
                    "total", "closed")),
    ("node_event", ("node_id", "at", "kind", "text")),
    ("node_gone", ("node_id", "at", "info")),
    ("memory", ("kind", "doc", "at")),
    ("spend_day", ("by_key", "day", "name", "node_hours", "money", "core_hours")),
    ("action_time", ("kind", "key", "at")),
    ("meta", ("key", "value")),
)


def migrate(store: Any) -> int:
    """Bring ``store`` (a :class:`nodemanager.store.sql.SqlStore`) to :data:`LATEST`, each version
    in one transaction; the version it had. Raises :class:`StoreTooNew` for a store written by a
    newer daemon. A read-only store is only checked: it must be at :data:`LATEST`."""
    if store.read_only:
        with store.reading() as cur:
            cur.execute("SELECT value FROM meta WHERE key = 'schema'")
            row = cur.fetchone()
        had = int(row[0]) if row else 0
        if had != LATEST:
            raise (StoreTooNew if had > LATEST else StoreError)(
                f"{store.name}: the store has schema version {had}, this nodemanager reads {LATEST}"
                + (": use the release that wrote it" if had > LATEST else ": start the daemon once to upgrade it"))
        return had
    with store.transaction() as cur:
        store.lock_schema(cur)
        cur.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        had = _version(cur)
    if had > LATEST:
        raise StoreTooNew(f"{store.name}: the store has schema version {had}, newer than this daemon's "
                          f"{LATEST}: run the nodemanager release that wrote it (or a later one)")
    for version, statements in MIGRATIONS:
        if version > had:
            with store.transaction() as cur:
                store.lock_schema(cur)      # two heads starting at once: one upgrades, the other sees it done
                if _version(cur) >= version:
                    continue
                for sql in statements:
                    cur.execute(sql.format(**store.words))
                cur.execute(store.sql("INSERT INTO meta (key, value) VALUES ('schema', :v) "
                                      "ON CONFLICT (key) DO UPDATE SET value = excluded.value"), {"v": str(version)})
    return had


def stored_version(store: Any) -> int:
    """The schema version ``store`` holds (0: none yet), read without writing anything."""
    with store.reading() as cur:
        if not store.has_table(cur, "meta"):
            return 0
        return _version(cur)


def _version(cur: Any) -> int:
    cur.execute("SELECT value FROM meta WHERE key = 'schema'")
    row = cur.fetchone()
    return int(row[0]) if row else 0
