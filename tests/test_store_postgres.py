"""The store in a real PostgreSQL (``[Store] url``), started by the test on loopback: the same port
as SQLite, a daemon writing to it, `cost` and `history` reading it, a server that goes down and
comes back under a running daemon, and the copy of a SQLite store into it."""

from __future__ import annotations

import json

import pytest

from nodemanager.cli import main
from nodemanager.core.attribution import NodeUse
from nodemanager.store import Changes, Life
from nodemanager.store.postgres import PostgresStore, shown
from tests.fixtures.postgres import running_postgres
from tests.test_daemon import daemons, run_for, write_config  # noqa: F401  (daemons: a fixture)
from tests.test_store import _config, check_spend_query
from tests.test_store_faults import _cycles_go_on_while, _store_state, _wait

pytestmark = pytest.mark.postgres


def _cost(capsys, cfg, *more):
    assert main(["cost", "--config", cfg, "--since", "1970-01-01", "--by", "node", "--format", "json", *more]) == 0
    return {r["node"]: r["node_hours"] for r in json.loads(capsys.readouterr().out)["rows"]}


def test_the_spend_query_in_postgresql_is_the_attribution_of_the_same_lives(postgres_url):
    check_spend_query(PostgresStore(postgres_url))


def test_a_daemon_keeps_what_it_remembers_in_postgresql_and_cost_reads_it(tmp_path, postgres_url, daemons, capsys):  # noqa: F811
    cfg = _config(tmp_path, extra=f"\n[Store]\nurl = {postgres_url}\n")
    d = daemons(cfg).start()
    run_for(d, 600)
    assert d.store_writer.flush(10.0)
    assert d.store_writer.health().name == postgres_url
    assert shown("postgresql://nm:s3cret@db.example.org/nm") == "postgresql://nm:***@db.example.org/nm"
    live = _cost(capsys, cfg)
    assert live and all(h > 0 for h in live.values())
    assert not (tmp_path / "state" / "demo.db").exists()          # nothing in SQLite
    d.stop()
    again = daemons(cfg).start()                                 # a restart goes on with the same records
    assert set(_cost(capsys, cfg)) >= set(live)
    again.stop()


@pytest.fixture
def own_postgres():
    """A PostgreSQL of this test alone (it is stopped and started again)."""
    with running_postgres() as server:
        yield server


def test_postgresql_down_holds_up_no_cycle_and_what_waited_is_written_when_it_is_back(tmp_path, own_postgres, daemons, capsys):  # noqa: F811
    url = own_postgres.create_database()
    cfg = _config(tmp_path, extra=f"\n[Store]\nurl = {url}\n")
    d = daemons(cfg).start()
    run_for(d, 60)
    assert d.store_writer.flush(10.0)
    own_postgres.stop()
    _cycles_go_on_while(d, 1800)
    _wait(lambda: not d.store_writer.health().ok)
    store, page, ok, pending = _store_state(d)
    assert ok == 0 and pending > 0 and "cannot write" in store["problem"] and "id='store'" in page
    own_postgres.start()
    _wait(lambda: d.store_writer.health().ok and not d.store_writer.health().pending, deadline=60.0)
    d.stop()
    assert _cost(capsys, cfg)


def test_store_copy_moves_a_sqlite_store_into_postgresql(tmp_path, postgres_url, capsys):
    cfg = _config(tmp_path)
    from nodemanager.configuration.config import load
    from nodemanager.store import start
    settings = load(cfg)
    store, writer = start(settings, lambda: 1e6)
    use = NodeUse(node_id="i-1", size="small", price=0.1, start=1e6, end=1e6 + 3600, shares={("ann", "phys"): 7200})
    store.apply(Changes(lives={"i-1": Life(use=use, closed=True)}, events=[("i-1", 1e6, "decision", "boot")],
                        memories={"admin": ('{"held": {"i-1": 1}}', 1e6)}))
    store.close()
    assert main(["store-copy", "--config", cfg, "--to", postgres_url]) == 0
    assert "1 node_life, 1 node_share, 1 node_event" in capsys.readouterr().out
    target = PostgresStore(postgres_url)
    assert target.uses(0, 2e9) == [use] and target.events("i-1") == [(1e6, "decision", "boot")]
    assert target.memory("admin") == '{"held": {"i-1": 1}}'
    assert main(["store-copy", "--config", cfg, "--to", postgres_url]) == 1      # never into records
    assert "already holds" in capsys.readouterr().err
    pg_cfg = _config(tmp_path, extra=f"\n[Store]\nurl = {postgres_url}\n")
    assert _cost(capsys, pg_cfg) == {"i-1": 1.0}
