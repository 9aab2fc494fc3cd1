"""`nodemanager check` checks the store: opened read-only, its schema version against this daemon's
(a newer one fails, naming the fix), who can write it (SQLite) or whether it can be reached
(PostgreSQL), and its size; nothing is created or changed."""

from __future__ import annotations

import json
import os
import pwd

import pytest

from nodemanager.cli import main
from nodemanager.core.attribution import NodeUse
from nodemanager.store import Changes, Life, schema
from nodemanager.store.postgres import PostgresStore
from nodemanager.store.sqlite import SqliteStore
from tests.fixtures.slurm import _free_ports
from tests.test_preflight import _example

NOW = 1_700_000_000.0


def _postgres(tmp_path, url):
    config = _example(tmp_path)
    config.write_text(config.read_text() + f"\n[Store]\nurl = {url}\n")
    return config


def _store_check(capsys, config) -> tuple[int, dict]:
    code = main(["check", "--config", str(config), "--format", "json"])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    return code, checks["store"]


def _filled(path: str) -> None:
    store = SqliteStore(path)
    store.ready()
    use = NodeUse(node_id="i-1", size="small", price=0.1, start=NOW, end=NOW + 3600, shares={("ann", "phys"): 7200})
    store.apply(Changes(lives={"i-1": Life(use=use, closed=True)}))
    store.close()


def test_no_store_yet_is_said_to_be_created_at_start_and_nothing_is_made(tmp_path, capsys):
    code, check = _store_check(capsys, _example(tmp_path))
    db = tmp_path / "state" / "demo.db"
    assert code == 0 and check["ok"] is True
    assert check["detail"] == (f"{db}: not there yet; the daemon creates it at start (schema version {schema.LATEST}), "
                               f"{tmp_path / 'state'} writable by {pwd.getpwuid(os.geteuid()).pw_name}")
    assert not db.exists() and not (tmp_path / "state").exists()


def test_a_current_store_shows_its_version_and_size(tmp_path, capsys):
    (tmp_path / "state").mkdir()
    db = str(tmp_path / "state" / "demo.db")
    _filled(db)
    before = os.path.getmtime(db), os.path.getsize(db)
    code, check = _store_check(capsys, _example(tmp_path))
    assert code == 0 and check["ok"] is True
    size = sum(os.path.getsize(db + s) for s in ("", "-wal", "-shm") if os.path.exists(db + s))
    assert check["detail"].startswith(f"{db}: schema version {schema.LATEST}, this daemon's {schema.LATEST} "
                                      f"(current), {size / 1e6:.1f} MB, ")
    assert (os.path.getmtime(db), os.path.getsize(db)) == before


def test_an_older_store_is_said_to_be_upgraded_at_start(tmp_path, capsys, monkeypatch):
    (tmp_path / "state").mkdir()
    db = str(tmp_path / "state" / "demo.db")
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
    monkeypatch.setattr(schema, "LATEST", 1)
    _filled(db)
    monkeypatch.undo()
    code, check = _store_check(capsys, _example(tmp_path))
    assert code == 0 and check["ok"] is True
    assert f"{db}: schema version 1, this daemon's {schema.LATEST} (upgraded at start)" in check["detail"]
    assert SqliteStore(db, read_only=True).mark("schema") == "1"        # the check upgraded nothing


def test_a_store_newer_than_the_daemon_fails_naming_the_fix(tmp_path, capsys, monkeypatch):
    (tmp_path / "state").mkdir()
    db = str(tmp_path / "state" / "demo.db")
    newer = ((schema.LATEST + 1, ("CREATE INDEX node_life_size ON node_life (size)",)),)
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + newer)
    monkeypatch.setattr(schema, "LATEST", schema.LATEST + 1)
    _filled(db)
    monkeypatch.undo()
    code, check = _store_check(capsys, _example(tmp_path))
    assert code == 1 and check["ok"] is False
    assert check["detail"] == (f"{db}: schema version {schema.LATEST + 1}, this daemon's {schema.LATEST}: written by "
                               "a newer release; the daemon refuses to start on it")
    assert check["fix"].startswith("run the nodemanager release that wrote it")


def test_a_store_the_service_user_cannot_write_fails_naming_the_owner(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the state directory to another user")
    state = tmp_path / "state"
    state.mkdir()
    db = str(state / "demo.db")
    _filled(db)                                    # made by root (mode 600), as `nodemanager run` as root would
    os.chmod(tmp_path, 0o755)
    nobody = pwd.getpwnam("nobody")
    os.chown(state, nobody.pw_uid, nobody.pw_gid)   # the service user's directory
    code, check = _store_check(capsys, _example(tmp_path))
    assert code == 1 and check["ok"] is False
    assert f"{db} is not writable by nobody, the owner of {state} (the service user)" in check["detail"]
    assert check["fix"] == f"give the service user the store and its directory: chown -R nobody {state}"
    os.chown(db, nobody.pw_uid, nobody.pw_gid)
    code, check = _store_check(capsys, _example(tmp_path))
    assert code == 0 and check["ok"] is True and check["detail"].endswith(f"{state} writable by nobody")


def test_a_file_that_is_not_a_database_is_a_warning(tmp_path, capsys):
    (tmp_path / "state").mkdir()
    db = tmp_path / "state" / "demo.db"
    db.write_bytes(b"this is not a database" * 100)
    code, check = _store_check(capsys, _example(tmp_path))
    assert check["ok"] is None and code == 0
    assert check["detail"].startswith(f"{db}: cannot be read (file is not a database)")
    assert db.read_bytes() == b"this is not a database" * 100


@pytest.mark.postgres
def test_a_postgresql_store_is_reached_read_only_and_its_size_shown(tmp_path, capsys, postgres_url):
    store = PostgresStore(postgres_url)
    store.ready()
    store.close()
    code, check = _store_check(capsys, _postgres(tmp_path, postgres_url))
    assert code == 0 and check["ok"] is True
    assert check["detail"].startswith(f"{postgres_url}: schema version {schema.LATEST}, this daemon's "
                                      f"{schema.LATEST} (current), ")
    assert check["detail"].endswith(" MB, reachable")


@pytest.mark.postgres
def test_a_postgresql_store_that_cannot_be_reached_fails(tmp_path, capsys):
    (port,) = _free_ports(1)
    url = f"postgresql://nm@127.0.0.1:{port}/nm"
    code, check = _store_check(capsys, _postgres(tmp_path, url))
    assert code == 1 and check["ok"] is False
    assert check["detail"].startswith(f"{url}: cannot be reached (")
    assert check["fix"].startswith("start the PostgreSQL server or correct [Store] url")
