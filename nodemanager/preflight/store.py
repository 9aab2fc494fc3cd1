"""The store in the preflight checklist: opened read-only, its schema version against this
daemon's, where it is kept and whether the service can write there (SQLite) or reach it
(PostgreSQL), and its size. Nothing is created or changed."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from typing import Any, Iterator

from nodemanager.preflight.checklist import Check

__all__ = ["store_checks"]

NAME = "store"


def store_checks(settings: Any) -> Iterator[Check]:
    """One check of the store ``settings`` name."""
    from nodemanager.store import StoreError, open_store
    from nodemanager.store.schema import LATEST, stored_version

    try:
        store = open_store(settings, read_only=True)
    except StoreError as exc:
        yield Check(NAME, False, str(exc), "install psycopg 3, or remove [Store] url to keep the store in SQLite")
        return
    sqlite = not settings.store.url
    try:
        if sqlite and not os.path.exists(store.path):
            yield _sqlite_absent(store.path, settings.manage.state_dir)
            return
        try:
            version = stored_version(store)
            size = store.size_bytes()
        except StoreError as exc:
            yield _unreadable(store, str(exc.__cause__ or exc), sqlite)
            return
    finally:
        store.close()
    where = _sqlite_where(store.path, settings.manage.state_dir) if sqlite else (None, "reachable")
    versions = f"schema version {version}, this daemon's {LATEST}"
    if version > LATEST:
        yield Check(NAME, False, f"{store.name}: {versions}: written by a newer release; the daemon refuses "
                    "to start on it", "run the nodemanager release that wrote it (or a later one); or restore a "
                    "backup this release wrote")
        return
    said = "upgraded at start" if version < LATEST else "current"
    problem, place = where
    yield Check(NAME, problem is None, f"{store.name}: {versions} ({said}), {_mb(size)}, {problem or place}",
                "" if problem is None else f"give the service user the store and its directory: chown -R "
                f"{_owner_name(settings.manage.state_dir)} {settings.manage.state_dir}")


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _sqlite_absent(path: str, state_dir: str) -> Check:
    from nodemanager.store.schema import LATEST
    problem, place = _sqlite_where(path, state_dir)
    return Check(NAME, problem is None, f"{path}: not there yet; the daemon creates it at start (schema version "
                 f"{LATEST}), {problem or place}", "" if problem is None else
                 f"create {state_dir} for the service user, or set [Manage] state_dir")


def _unreadable(store: Any, why: str, sqlite: bool) -> Check:
    if sqlite:
        return Check(NAME, None, f"{store.name}: cannot be read ({why}); a file that is not a database is set aside "
                     "at start and a new store started (its records are not read)",
                     "restore the store from a backup (docs/operations.md), or let the daemon start a new one")
    return Check(NAME, False, f"{store.name}: cannot be reached ({why})", "start the PostgreSQL server or correct "
                 "[Store] url (the daemon starts without it, keeping what it learns in memory up to [Store] buffer)")


def _owner_name(path: str) -> str:
    """The user who owns ``path`` (the service user: the daemon made its state_dir), or this user."""
    try:
        uid = os.stat(path).st_uid if os.path.exists(path) else os.geteuid()
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _writable_by(path: str, user: str) -> bool:
    """True when ``user`` may write ``path`` (a directory: and enter it), from its mode bits."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return os.access(path, os.W_OK)
    if entry.pw_uid == 0:
        return True
    st = os.stat(path)
    groups = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}
    shift = 6 if st.st_uid == entry.pw_uid else 3 if st.st_gid in groups else 0
    need = 0o3 if stat.S_ISDIR(st.st_mode) else 0o2
    return (st.st_mode >> shift) & need == need


def _sqlite_where(path: str, state_dir: str) -> tuple[str | None, str]:
    """(why the service user cannot write the store, or None; where it is said to be kept). The
    service user is the owner of ``state_dir`` (the daemon made it, or systemd's StateDirectory)."""
    folder = os.path.dirname(os.path.abspath(path))
    probe = folder
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    user = _owner_name(probe)
    for f in (probe, *(p for p in (path, path + "-wal", path + "-shm") if os.path.exists(p))):
        if not _writable_by(f, user):
            return f"{f} is not writable by {user}, the owner of {probe} (the service user)", ""
    return None, f"{folder} writable by {user}"
