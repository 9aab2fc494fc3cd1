"""State that cannot be read is kept, not overwritten: every file the daemon keeps in state_dir,
found unreadable, is set aside as <name>.unreadable-<time> with its bytes intact, named in one
ERROR line, on the status page, in a metric and in `nodemanager check`."""

import glob
import logging
import re

import pytest

from nodemanager.cli import main
from nodemanager.console.history import NodeHistory
from nodemanager.console.spend_ledger import SpendLedger
from nodemanager.console.status_document import status_document
from nodemanager.console.page import render_html
from nodemanager.core import Reservation, to_line
from nodemanager.cycle.consolidation_memory import ConsolidationMemory
from nodemanager.cycle.journal import ReservationJournal
from nodemanager.cycle.memories import Memories
from nodemanager.ha.local import HeadRecords
from nodemanager.store.sqlite import SqliteStore
from tests.test_daemon import daemons, run_for, write_config  # noqa: F401  (fixture)

GARBAGE = b'{"version": 1, "nodes": [{"id": "i-1", "size": "small", "pri'   # a torn write


def _aside(path):
    return glob.glob(f"{path}.unreadable-*")


def _journal(tmp_path):
    good = to_line(Reservation(token="t1", name="pool-small-1", size="small", at=1_000_000.0))
    path = tmp_path / "pool.reservations"
    path.write_bytes(f"{good}\nnot a reservation\n{good.replace('t1', 't2')}\n".encode())
    journal = ReservationJournal(str(path))
    assert [r.token for r in journal.load()] == ["t1", "t2"]   # the readable part still counts
    original = path.read_bytes()
    journal.keep([])
    return path, original


def _memories(name):
    def load(tmp_path):
        path = tmp_path / f"pool.{name}.json"
        path.write_bytes(GARBAGE)
        memories = Memories(str(tmp_path), "pool")
        memories.load(1_000_000.0)
        memories.save(1_000_000.0, force=True)
        return path, GARBAGE
    return load


def _simple(name, make, save):
    def load(tmp_path):
        path = tmp_path / name
        path.write_bytes(GARBAGE)
        owner = make(str(path))
        save(owner)
        return path, GARBAGE
    return load


def _fence(tmp_path):
    path = tmp_path / "ha-fence"
    path.write_bytes(b"12x\n")
    records = HeadRecords(str(tmp_path))
    assert records.fence == 0
    records.saw_fence(7)
    return path, b"12x\n"


def _admin_copy(tmp_path):
    path = tmp_path / "ha-admin.json"
    path.write_bytes(GARBAGE)
    records = HeadRecords(str(tmp_path))
    assert records.admin_copy() is None          # never published again to etcd
    records.keep_admin('{"held": {}}')
    return path, GARBAGE


def _imported(name, make):
    """A JSON file of an earlier release, imported once into a new store."""
    def load(tmp_path):
        path = tmp_path / name
        path.write_bytes(GARBAGE)
        store = SqliteStore(str(tmp_path / "pool.db"))
        store.ready()
        make(store, str(path))
        return path, GARBAGE
    return load


STATE_FILES = {
    "spend ledger": _imported("pool.spend.json", lambda store, p: SpendLedger(store=store, legacy=p)),
    "node history": _imported("pool.history.json", lambda store, p: NodeHistory(store, legacy=p)),
    "runtimes": _memories("runtimes"),
    "reclaim rates": _memories("reclaim"),
    "capacity breakers": _memories("breakers"),
    "consolidation back-off": _simple("pool.consolidation", ConsolidationMemory, lambda c: c._save(c.path or "")),
    "reservation journal": _journal,
    "HA fence": _fence,
    "HA admin copy": _admin_copy,
}


@pytest.mark.parametrize("what", sorted(STATE_FILES))
def test_an_unreadable_state_file_is_set_aside_intact_never_overwritten(what, tmp_path, caplog):
    caplog.set_level(logging.ERROR, "nodemanager")
    path, original = STATE_FILES[what](tmp_path)
    (kept,) = _aside(path)
    assert open(kept, "rb").read() == original
    assert re.search(rf"{re.escape(str(path))} cannot be read \(.+\): set aside as {re.escape(kept)}, kept "
                     "for you to look at", caplog.text), caplog.text
    assert not path.exists() or path.read_bytes() != original   # what was saved since is a new file


def test_the_daemon_keeps_an_unreadable_spend_ledger_and_says_so(tmp_path, daemons, capsys):  # noqa: F811
    cfg = write_config(tmp_path / "nm.ini")
    text = open(cfg).read().replace("spend_ledger = false", "spend_ledger = yes")
    open(cfg, "w").write(text)
    ledger = tmp_path / "state" / "demo.spend.json"
    ledger.parent.mkdir()
    ledger.write_bytes(GARBAGE)
    d = daemons(cfg).start()
    assert d.system.settle(10.0)
    run_for(d, 120)
    d.stop()
    (kept,) = _aside(ledger)
    assert open(kept, "rb").read() == GARBAGE                   # the cost history is still there
    assert not ledger.exists()                                  # the ledger is kept in the store now
    assert d.spend.spend(0.0, d.clock(), "size")                # and it is whole
    doc = status_document(d.status_view(), d.admin, d.clock())
    assert doc["state_set_aside"] == [kept]
    page = render_html(doc)
    assert "id='state-set-aside'>state that could not be read, set aside" in page and kept in page
    assert d.metrics.registry.get_sample_value("nodemanager_state_files_set_aside") == 1
    main(["check", "--config", cfg])
    out = capsys.readouterr().out
    assert re.search(rf"^\[warn\] state files set aside: {re.escape(kept)}$", out, re.M), out
