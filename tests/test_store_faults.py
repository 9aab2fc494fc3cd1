"""The store failing under a running daemon: a lock held by another process, a full disk, a file
that is not a database, a kill -9. The controller keeps deciding and acting, what it could not
write waits in memory (said on the page and in /metrics) and is written when the store is back;
what was committed survives a kill."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from nodemanager.cli import main
from nodemanager.console.page import render_html
from nodemanager.console.status_document import status_document
from tests.test_daemon import REPO, daemons, run_for, write_config  # noqa: F401  (daemons: a fixture)
from tests.test_daemon_cli import Proc


def _config(tmp_path):
    cfg = write_config(tmp_path / "nm.ini")
    text = pathlib.Path(cfg).read_text().replace("spend_ledger = false", "spend_ledger = true")
    pathlib.Path(cfg).write_text(text)
    return cfg


def _wait(what, deadline=40.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if what():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {deadline}s")


def _nodes_in_store(cfg, capsys=None):
    if capsys is not None:
        assert main(["cost", "--config", cfg, "--since", "1970-01-01", "--by", "node", "--format", "json"]) == 0
        return {r["node"]: r["node_hours"] for r in json.loads(capsys.readouterr().out)["rows"]}
    run = subprocess.run([sys.executable, "-m", "nodemanager", "cost", "--config", cfg, "--since", "1970-01-01",
                          "--by", "node", "--format", "json"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr
    return {r["node"]: r["node_hours"] for r in json.loads(run.stdout)["rows"]}


def _store_state(d):
    doc = status_document(d.status_view(), d.admin, d.clock())
    reg = d.metrics.registry
    return (doc["store"], render_html(doc), reg.get_sample_value("nodemanager_store_ok"),
            reg.get_sample_value("nodemanager_store_pending_records"))


def _cycles_go_on_while(d, seconds):
    """Run ``seconds`` of cycles: each one's wall time stays short (the store never holds one up)
    and the controller still acts (boots, drains, destroys)."""
    before, walls, outcomes = d.counters["cycles"], [], []
    for _ in range(int(seconds / 5)):
        t = time.monotonic()
        run_for(d, 5)
        walls.append(time.monotonic() - t)
        outcomes += d.last_report.outcomes
    assert d.counters["cycles"] >= before + seconds / 5 - 1
    assert max(walls) < 1.0                           # below the store's own 1 s wait for a lock
    assert outcomes


def test_a_locked_store_holds_up_no_cycle_and_what_waited_is_written_when_it_is_released(tmp_path, daemons, capsys):  # noqa: F811
    cfg = _config(tmp_path)
    d = daemons(cfg).start()
    run_for(d, 60)
    assert d.store_writer.flush(10.0)
    other = sqlite3.connect(str(tmp_path / "state" / "demo.db"), isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")                  # another process holds the write lock
    _cycles_go_on_while(d, 1800)
    _wait(lambda: not d.store_writer.health().ok)
    store, page, ok, pending = _store_state(d)
    assert ok == 0 and pending > 0 and store["pending"] == pending
    assert "cannot write" in store["problem"] and "database is locked" in store["problem"]
    assert "id='store'" in page and "kept in memory until it can" in page
    other.execute("ROLLBACK")
    other.close()
    _wait(lambda: d.store_writer.health().ok and not d.store_writer.health().pending)
    store, page, ok, pending = _store_state(d)
    assert ok == 1 and pending == 0 and store["problem"] == "" and "id='store'" not in page
    d.stop()
    kept = _nodes_in_store(cfg, capsys)
    assert set(kept) == {n.id for n in d.world.sim_cloud.list_nodes()} | set(kept) and kept


@pytest.fixture
def small_disk(tmp_path):
    """``tmp_path/state`` on its own 2 MB tmpfs (skipped where mounting is not allowed)."""
    where = tmp_path / "state"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_holds_up_no_cycle_and_what_waited_is_written_when_space_is_back(tmp_path, small_disk, daemons, capsys):  # noqa: F811
    cfg = _config(tmp_path)
    d = daemons(cfg).start()
    run_for(d, 30)
    assert d.store_writer.flush(10.0)
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)    # fill the disk to the last byte
    for chunk in (65536, 4096, 1):
        try:
            while True:
                os.write(fd, b"\0" * chunk)
        except OSError:
            pass
    os.close(fd)
    _cycles_go_on_while(d, 1800)
    _wait(lambda: not d.store_writer.health().ok)
    store, page, ok, pending = _store_state(d)
    assert ok == 0 and pending > 0 and "full" in store["problem"] + store.get("name", "")
    filler.unlink()
    _wait(lambda: d.store_writer.health().ok and not d.store_writer.health().pending)
    assert _store_state(d)[2] == 1
    d.stop()
    assert _nodes_in_store(cfg, capsys)


def test_a_store_that_is_not_a_database_is_set_aside_and_a_new_one_started(tmp_path, daemons, capsys):  # noqa: F811
    cfg = _config(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    garbage = b"this is not a database " * 400
    (state / "demo.db").write_bytes(garbage)
    d = daemons(cfg).start()
    run_for(d, 60)
    aside = [p for p in state.iterdir() if p.name.startswith("demo.db.unreadable-")]
    assert len(aside) == 1 and aside[0].read_bytes() == garbage      # kept, never replaced
    store, page, _, _ = _store_state(d)
    assert f"set aside as {aside[0]}" in store["problem"] and "id='store'" in page
    d.stop()
    assert _nodes_in_store(cfg, capsys)


def test_what_the_store_acknowledged_survives_a_kill_9(tmp_path):
    cfg = _config(tmp_path)
    proc = Proc("run", "--config", cfg)
    try:
        proc.wait_for("outcome boot")
        seen: dict[str, float] = {}
        deadline = time.monotonic() + 150
        while not seen and time.monotonic() < deadline:
            seen = _nodes_in_store(cfg)               # committed: a reader sees it
            time.sleep(1.0)
        assert seen
        os.kill(proc.p.pid, signal.SIGKILL)
        proc.p.wait(10)
    finally:
        if proc.p.poll() is None:
            proc.p.kill()
            proc.p.wait()
    after = _nodes_in_store(cfg)
    assert set(seen) <= set(after)
    assert all(after[n] >= h for n, h in seen.items())
    check = sqlite3.connect(str(tmp_path / "state" / "demo.db"))
    assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_past_its_bound_the_buffer_drops_the_oldest_events_and_says_how_many(tmp_path):
    from nodemanager.console.status_document import store_json
    from nodemanager.store import Changes
    from nodemanager.store.sqlite import SqliteStore
    from nodemanager.store.writer import StoreWriter
    db = str(tmp_path / "s.db")
    store = SqliteStore(db)
    store.ready()
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    writer = StoreWriter(store, bound=1000, retry=(0.1, 0.2)).start()
    for k in range(15):
        writer.submit(Changes(events=[("i-1", float(100 * k + i), "state", f"e{100 * k + i}") for i in range(100)]))
    _wait(lambda: not writer.health().ok)
    h = writer.health()
    assert h.pending <= 1000 and h.dropped == 500
    assert "500 event(s) dropped" in store_json(h, 0.0)["problem"]
    other.execute("ROLLBACK")
    other.close()
    _wait(lambda: writer.health().ok and not writer.health().pending)
    assert writer.stop(5.0)
    kept = SqliteStore(db).events("i-1")
    assert [t for _, _, t in kept] == [f"e{i}" for i in range(500, 1500)]   # the newest, in order
