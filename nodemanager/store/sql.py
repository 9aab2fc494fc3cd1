"""What SQLite and PostgreSQL share: the store's statements over a DB-API connection. A dialect
(:mod:`.sqlite`, :mod:`.postgres`) says how to connect, open a transaction and spell a few words.

One connection writes (the writer thread), another reads (the status server, ``cost``), each
behind its own lock, so a page view never waits for a write.
"""

from __future__ import annotations

import json
import math
import re
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from nodemanager.core.attribution import BY, DAY, NOBODY, NodeUse, SpendRow, by_day, merge
from nodemanager.model import JobOwner
from nodemanager.store.port import Changes, Life, StoreError

__all__ = ["SqlStore"]

_LIFE = ("node_id", "size", "price", "start_at", "end_at", "closed", "total", "jobs")
_NAME = {"user": "user_name", "group": "group_name", "size": "size", "node": "node_id"}
_PRUNE = {
    "ledger": ("node_life", "node_id", "closed = 1 AND end_at < :before"),
    "events": ("node_event", "id", "at < :before"),
    "gone": ("node_gone", "node_id", "at < :before"),
    "actions": ("action_time", "kind || ' ' || key", "at < :before"),
}


class SqlStore:
    """The :class:`~nodemanager.store.port.Store` over SQL; subclasses connect."""

    name = "store"
    words: Mapping[str, str] = {}        # {float}, {serial}, {least}, {greatest}
    errors: tuple[type[BaseException], ...] = ()
    named = ":{}"                        # how a named parameter is written
    shared = False                       # one database for every head of an HA pair

    def __init__(self, read_only: bool = False) -> None:
        self.read_only = read_only
        self._wlock, self._rlock = threading.Lock(), threading.Lock()
        self._writer: Any = None
        self._reader: Any = None
        self._ready = False

    def ready(self) -> int:
        """Create or upgrade the schema once (:func:`nodemanager.store.schema.migrate`); the version
        the store had. Raises :class:`StoreError` (or :class:`StoreTooNew`)."""
        from nodemanager.store.schema import LATEST, migrate
        if self._ready:
            return LATEST
        had = migrate(self)
        self._ready = True
        return had

    # -- what a dialect gives --------------------------------------------------------------------
    def connect(self, write: bool) -> Any:
        raise NotImplementedError

    def begin(self, conn: Any) -> None:
        """Open a write transaction on ``conn``."""

    def lock_schema(self, cur: Any) -> None:
        """Serialize schema upgrades between processes (SQLite's write transaction already does)."""

    def has_table(self, cur: Any, table: str) -> bool:
        """True when ``table`` exists (read on ``cur``)."""
        raise NotImplementedError

    def size_bytes(self) -> int:
        """What the store takes on disk."""
        raise NotImplementedError

    def shared_reader(self) -> bool:
        """True when reads must use the writing connection (an in-memory database)."""
        return False

    # -- plumbing ---------------------------------------------------------------------------------
    def sql(self, text: str) -> str:
        return re.sub(r"(?<!:):(\w+)", lambda m: self.named.format(m.group(1)), text.format(**self.words))

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A cursor in one write transaction: committed at the end, rolled back on an error
        (raised as :class:`StoreError` naming the store)."""
        with self._wlock:
            try:
                if self._writer is None:
                    self._writer = self.connect(write=True)
                conn = self._writer
                self.begin(conn)
                cur = conn.cursor()
                try:
                    yield cur
                    conn.commit()
                except BaseException:
                    conn.rollback()
                    raise
            except self.errors as exc:
                self._drop("_writer")
                raise StoreError(f"{self.name}: {exc}") from exc

    @contextmanager
    def reading(self) -> Iterator[Any]:
        if self.shared_reader():
            with self.transaction() as cur:
                yield cur
            return
        with self._rlock:
            try:
                if self._reader is None:
                    self._reader = self.connect(write=False)
                cur = self._reader.cursor()
                yield cur
                self._reader.rollback()   # end the read's snapshot
            except self.errors as exc:
                self._drop("_reader")
                raise StoreError(f"{self.name}: {exc}") from exc

    def _drop(self, which: str) -> None:
        conn = getattr(self, which)
        setattr(self, which, None)
        try:
            if conn is not None:
                conn.close()
        except self.errors:
            pass

    def close(self) -> None:
        with self._wlock:
            self._drop("_writer")
        with self._rlock:
            self._drop("_reader")

    # -- writes -----------------------------------------------------------------------------------
    def apply(self, changes: Changes) -> None:
        lives = list(changes.lives.values())
        with self.transaction() as cur:
            if lives:
                closing = self._newly_closed(cur, [life.use for life in lives if life.closed])
                cur.executemany(self.sql(
                    f"INSERT INTO node_life ({', '.join(_LIFE)}) VALUES ({', '.join(':' + c for c in _LIFE)}) "
                    "ON CONFLICT (node_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _LIFE[1:])),
                    [_life_row(life) for life in lives])
                cur.executemany(self.sql("DELETE FROM node_share WHERE node_id = :id"),
                                [{"id": life.use.node_id} for life in lives])
                cur.executemany(self.sql(
                    "INSERT INTO node_share (node_id, user_name, group_name, core_seconds, size, price, start_at, "
                    "end_at, total, closed) VALUES (:node_id, :user, :grp, :cs, :size, :price, :start_at, :end_at, :total, "
                    ":closed)"), [row for life in lives for row in _share_rows(life)])
                self._add_days(cur, closing)
            if changes.events:
                cur.executemany(self.sql("INSERT INTO node_event (node_id, at, kind, text) "
                                         "VALUES (:node, :at, :kind, :text)"),
                                [{"node": n, "at": at, "kind": k, "text": t} for n, at, k, t in changes.events])
            if changes.gone:
                cur.executemany(self.sql("INSERT INTO node_gone (node_id, at, info) VALUES (:node, :at, :info) "
                                         "ON CONFLICT (node_id) DO UPDATE SET at = excluded.at, info = excluded.info"),
                                [{"node": n, "at": at, "info": info} for n, (at, info) in changes.gone.items()])
            if changes.memories:
                cur.executemany(self.sql("INSERT INTO memory (kind, doc, at) VALUES (:kind, :doc, :at) "
                                         "ON CONFLICT (kind) DO UPDATE SET doc = excluded.doc, at = excluded.at"),
                                [{"kind": k, "doc": d, "at": at} for k, (d, at) in changes.memories.items()])
            if changes.actions:
                kept = [{"kind": k, "key": key, "at": at} for (k, key), at in changes.actions.items()
                        if at is not None]
                cur.executemany(self.sql("INSERT INTO action_time (kind, key, at) VALUES (:kind, :key, :at) "
                                         "ON CONFLICT (kind, key) DO UPDATE SET "
                                         "at = {least}(action_time.at, excluded.at)"), kept)
                cur.executemany(self.sql("DELETE FROM action_time WHERE kind = :kind AND key = :key"),
                                [{"kind": k, "key": key} for (k, key), at in changes.actions.items() if at is None])
            if changes.marks:
                cur.executemany(self.sql("INSERT INTO meta (key, value) VALUES (:key, :value) "
                                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
                                [{"key": k, "value": v} for k, v in changes.marks.items()])

    def _newly_closed(self, cur: Any, uses: list[NodeUse]) -> list[NodeUse]:
        """Of ``uses`` (closing now), those not closed in the store yet: each is summed into the
        days once."""
        done: set[str] = set()
        for i in range(0, len(uses), 500):
            chunk = [u.node_id for u in uses[i:i + 500]]
            cur.execute(self.sql("SELECT node_id FROM node_life WHERE closed = 1 AND node_id IN ("
                                 + ", ".join(f":n{k}" for k in range(len(chunk))) + ")"),
                        {f"n{k}": v for k, v in enumerate(chunk)})
            done.update(r[0] for r in cur.fetchall())
        return [u for u in uses if u.node_id not in done]

    def _add_days(self, cur: Any, uses: list[NodeUse]) -> None:
        """Add ``uses`` to the per-day sums, and keep the longest closed life (the window queries'
        reach back)."""
        if not uses:
            return
        days: dict[tuple[str, int, str], list[float]] = {}
        for u in uses:
            for day, by, name, h, m, c in by_day(u):
                s = days.setdefault((by, day, name), [0.0, 0.0, 0.0])
                s[0] += h
                s[1] += m
                s[2] += c
        cur.executemany(self.sql(
            "INSERT INTO spend_day (by_key, day, name, node_hours, money, core_hours) VALUES (:by, :day, :name, "
            ":h, :m, :c) ON CONFLICT (by_key, day, name) DO UPDATE SET node_hours = spend_day.node_hours + "
            "excluded.node_hours, money = spend_day.money + excluded.money, core_hours = spend_day.core_hours + "
            "excluded.core_hours"),
            [{"by": by, "day": day, "name": name, "h": s[0], "m": s[1], "c": s[2]} for (by, day, name), s in days.items()])
        longest = max(u.end - u.start for u in uses)
        cur.execute("SELECT value FROM meta WHERE key = 'max_life'")
        row = cur.fetchone()
        if row is None or float(row[0]) < longest:
            cur.execute(self.sql("INSERT INTO meta (key, value) VALUES ('max_life', :v) "
                                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value"), {"v": repr(longest)})

    def prune(self, kind: str, before: float, batch: int) -> int:
        table, key, where = _PRUNE[kind]
        if kind == "ledger":
            with self.transaction() as cur:
                cur.execute(self.sql("DELETE FROM spend_day WHERE day < :day"), {"day": int(before // DAY)})
        with self.transaction() as cur:
            cur.execute(self.sql(f"SELECT {key} FROM {table} WHERE {where} LIMIT :n"), {"before": before, "n": batch})
            keys = [{"k": r[0]} for r in cur.fetchall()]
            if kind == "ledger":
                cur.executemany(self.sql("DELETE FROM node_share WHERE node_id = :k"), keys)
            cur.executemany(self.sql(f"DELETE FROM {table} WHERE {key} = :k"), keys)
        return len(keys)

    def rows(self, table: str, columns: tuple[str, ...], batch: int = 5000) -> Iterator[list[tuple[Any, ...]]]:
        """Every row of ``table`` (one of :data:`nodemanager.store.schema.TABLES`), ``batch`` at a time."""
        with self.reading() as cur:
            cur.execute(f"SELECT {', '.join(columns)} FROM {table}")
            while True:
                chunk = cur.fetchmany(batch)
                if not chunk:
                    return
                yield [tuple(r) for r in chunk]

    def insert(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        """Add ``rows`` to ``table`` in one transaction (a row already there is replaced)."""
        keys = ", ".join(f":c{i}" for i in range(len(columns)))
        conflict = {"node_life": "node_id", "node_share": "node_id, user_name, group_name", "node_gone": "node_id",
                    "memory": "kind", "meta": "key", "spend_day": "by_key, day, name",
                    "action_time": "kind, key"}.get(table)
        tail = (f" ON CONFLICT ({conflict}) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in columns if c not in conflict.split(", "))) if conflict else ""
        with self.transaction() as cur:
            cur.executemany(self.sql(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({keys}){tail}"),
                            [{f"c{i}": v for i, v in enumerate(r)} for r in rows])

    # -- reads ------------------------------------------------------------------------------------
    def open_lives(self) -> list[Life]:
        with self.reading() as cur:
            cur.execute(f"SELECT {', '.join(_LIFE)} FROM node_life WHERE closed = 0")
            lives = cur.fetchall()
            shares = self._shares(cur, [r[0] for r in lives])
        return [_life(r, shares.get(r[0], {})) for r in lives]

    def uses(self, since: float, until: float) -> list[NodeUse]:
        with self.reading() as cur:
            cur.execute(self.sql(f"SELECT {', '.join(_LIFE)} FROM node_life "
                                 "WHERE end_at >= :since AND start_at <= :until"), {"since": since, "until": until})
            lives = cur.fetchall()
            shares = self._shares(cur, [r[0] for r in lives])
        return [_life(r, shares.get(r[0], {})).use for r in lives]

    def _shares(self, cur: Any, ids: list[str]) -> dict[str, dict[tuple[str, str], float]]:
        out: dict[str, dict[tuple[str, str], float]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            cur.execute(self.sql("SELECT node_id, user_name, group_name, core_seconds FROM node_share "
                                 f"WHERE node_id IN ({', '.join(f':n{k}' for k in range(len(chunk)))})"),
                        {f"n{k}": v for k, v in enumerate(chunk)})
            for node_id, user, group, cs in cur.fetchall():
                out.setdefault(node_id, {})[(user, group)] = cs
        return out

    def spend(self, since: float, until: float, by: str, closed_only: bool = False) -> list[SpendRow]:
        if by not in BY:
            raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
        if until <= since:
            return []
        first, last = math.ceil(since / DAY), math.floor(until / DAY)
        with self.reading() as cur:
            parts = [] if closed_only else [self._raw(cur, since, until, by, "closed = 0")]
            if by == "node" or first >= last:
                parts.append(self._raw(cur, since, until, by, "closed = 1"))
            else:      # whole days from their sums, the parts of a day at either end from the lives
                cur.execute(self.sql("SELECT name, SUM(node_hours), SUM(money), SUM(core_hours) FROM spend_day "
                                     "WHERE by_key = :by AND day >= :first AND day < :last GROUP BY name"),
                            {"by": by, "first": first, "last": last})
                parts.append(_rows(cur.fetchall()))
                parts.append(self._raw(cur, since, first * DAY, by, "closed = 1"))
                parts.append(self._raw(cur, last * DAY, until, by, "closed = 1"))
        return merge(*parts)

    def _raw(self, cur: Any, since: float, until: float, by: str, which: str) -> list[SpendRow]:
        """:func:`attribute` over [``since``, ``until``] of the lives ``which`` selects, summed here;
        closed ones are found by their start (no closed life is longer than ``max_life``)."""
        if until <= since:
            return []
        reach = ""
        if which == "closed = 1":
            cur.execute("SELECT value FROM meta WHERE key = 'max_life'")
            row = cur.fetchone()
            if row is None:
                return []
            reach = f" AND start_at >= {since - float(row[0]) - 1.0!r}"
        inside = "({least}(end_at, :until) - {greatest}(start_at, :since))"
        window = f"start_at < :until AND end_at > :since AND end_at > start_at AND {which}{reach}"
        nobody = ":nobody" if by in ("user", "group") else _NAME[by]
        cur.execute(self.sql(
            f"SELECT name, SUM(h), SUM(h * price), SUM(c) FROM ("
            f"SELECT {_NAME[by]} AS name, {inside} / 3600.0 * core_seconds / total AS h, price, "
            f"core_seconds * {inside} / (end_at - start_at) / 3600.0 AS c "
            f"FROM node_share WHERE {window} AND total > 0 "
            f"UNION ALL SELECT {nobody} AS name, {inside} / 3600.0 AS h, price, 0.0 AS c "
            f"FROM node_life WHERE {window} AND total <= 0) x GROUP BY name"),
            {"since": since, "until": until, "nobody": NOBODY})
        return _rows(cur.fetchall())

    def events(self, node_id: str, since: float | None = None,
               limit: int | None = None) -> list[tuple[float, str, str]]:
        with self.reading() as cur:
            cur.execute(self.sql("SELECT at, kind, text FROM node_event WHERE node_id = :node AND at >= :since "
                                 "ORDER BY at DESC, id DESC LIMIT :n"),
                        {"node": node_id, "since": -1e300 if since is None else since, "n": limit or 10 ** 9})
            rows = cur.fetchall()
        return [(float(at), str(k), str(t)) for at, k, t in reversed(rows)]

    def gone_since(self, since: float) -> list[tuple[str, float, dict[str, Any]]]:
        with self.reading() as cur:
            cur.execute(self.sql("SELECT node_id, at, info FROM node_gone WHERE at >= :since ORDER BY at DESC"),
                        {"since": since})
            return [(str(n), float(at), json.loads(info)) for n, at, info in cur.fetchall()]

    def memory(self, kind: str) -> str | None:
        with self.reading() as cur:
            cur.execute(self.sql("SELECT doc FROM memory WHERE kind = :kind"), {"kind": kind})
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def actions(self, since: float) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        with self.reading() as cur:
            cur.execute(self.sql("SELECT kind, key, at FROM action_time WHERE at >= :since"), {"since": since})
            for kind, key, at in cur.fetchall():
                out.setdefault(str(kind), {})[str(key)] = float(at)
        return out

    def mark(self, key: str) -> str | None:
        with self.reading() as cur:
            cur.execute(self.sql("SELECT value FROM meta WHERE key = :key"), {"key": key})
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def counts(self) -> Mapping[str, int]:
        out = {}
        with self.reading() as cur:
            for kind, table in (("lives", "node_life"), ("shares", "node_share"), ("events", "node_event"),
                                ("gone", "node_gone"), ("memories", "memory"), ("days", "spend_day")):
                cur.execute(f"SELECT COUNT(*) FROM {table}")
                out[kind] = int(cur.fetchone()[0])
        return out


def _rows(rows: list[tuple[Any, ...]]) -> list[SpendRow]:
    return [SpendRow(name=str(n), node_hours=float(h), money=float(m), core_hours=float(c)) for n, h, m, c in rows]


def _life_row(life: Life) -> dict[str, Any]:
    u = life.use
    return {"node_id": u.node_id, "size": u.size, "price": u.price, "start_at": u.start, "end_at": u.end,
            "closed": int(life.closed), "total": sum(u.shares.values()),
            "jobs": json.dumps([list(j) for j in life.jobs], separators=(",", ":"))}


def _share_rows(life: Life) -> list[dict[str, Any]]:
    u = life.use
    total = sum(u.shares.values())
    return [{"node_id": u.node_id, "user": user, "grp": group, "cs": cs, "size": u.size, "price": u.price,
             "start_at": u.start, "end_at": u.end, "total": total, "closed": int(life.closed)}
            for (user, group), cs in u.shares.items()]


def _life(row: tuple[Any, ...], shares: dict[tuple[str, str], float]) -> Life:
    node_id, size, price, start, end, closed, _total, jobs = row
    use = NodeUse(node_id=str(node_id), size=str(size), price=float(price), start=float(start), end=float(end),
                  shares={k: float(v) for k, v in shares.items()})
    return Life(use=use, closed=bool(closed),
                jobs=tuple(JobOwner(str(u), str(g), int(c)) for u, g, c in json.loads(jobs)))
