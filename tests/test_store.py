"""The store of what the daemon remembers (SQLite by default): its schema versions, the spend
query against the attribution rule, the import of the JSON files today's release writes, and the
`cost` / `history` commands reading it read-only while the daemon runs."""

from __future__ import annotations

import json
import pathlib
import random
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from nodemanager.actors.clock import ManualClock
from nodemanager.cli import main
from nodemanager.configuration.config import load
from nodemanager.console.admin import AdminState
from nodemanager.console.history import NodeHistory
from nodemanager.console.spend_ledger import SpendLedger
from nodemanager.core.attribution import BY, NodeUse, attribute
from nodemanager.core.breaker import Breaker
from nodemanager.cycle.breakers import Breakers
from nodemanager.cycle.memories import Memories
from nodemanager.model import Size
from nodemanager.store import Changes, Life, schema, start
from nodemanager.cycle.store_keeper import AdminBacking, StoreKeeper
from nodemanager.store.sqlite import SqliteStore
from tests.fixtures.base_release import run_base
from tests.test_daemon import daemons, run_for, write_config  # noqa: F401  (daemons: a fixture)

NOW = 1_000_000.0
SIZES = (Size("small", cores=2, ram_mb=4096, price=0.1), Size("big", cores=8, ram_mb=16384, price=0.5))


def _config(tmp_path, extra=""):
    cfg = write_config(tmp_path / "nm.ini", extra=extra)
    text = pathlib.Path(cfg).read_text().replace("spend_ledger = false", "spend_ledger = true")
    pathlib.Path(cfg).write_text(text.replace("\nstate_file =\n", "\nstate_file = admin.json\n"))
    return cfg


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_newer_daemon_upgrades_an_older_store_and_one_newer_than_itself_is_refused(tmp_path, monkeypatch, capsys):
    cfg = _config(tmp_path)
    db = str(tmp_path / "state" / "demo.db")
    store = SqliteStore(db)
    assert store.ready() == 0                       # made afresh at the current version
    use = NodeUse(node_id="i-1", size="small", price=0.1, start=NOW, end=NOW + 3600, shares={("ann", "phys"): 7200})
    store.apply(Changes(lives={"i-1": Life(use=use, closed=True)}))
    store.close()
    newer = ((schema.LATEST + 1, ("CREATE INDEX node_life_size ON node_life (size)",)),)
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + newer)
    monkeypatch.setattr(schema, "LATEST", schema.LATEST + 1)
    upgraded = SqliteStore(db)
    assert upgraded.ready() == schema.LATEST - 1    # brought up one version, its records kept
    assert upgraded.mark("schema") == str(schema.LATEST)
    assert upgraded.uses(0, 2e9) == [use]
    upgraded.close()
    monkeypatch.undo()
    run = subprocess.run([sys.executable, "-m", "nodemanager", "run", "--config", cfg], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2
    err = run.stderr
    assert f"{db}: the store has schema version {schema.LATEST + 1}, newer than this daemon's {schema.LATEST}" in err
    code, _, err = _run(capsys, "cost", "--config", cfg)
    assert code == 1 and "use the release that wrote it" in err


def test_the_stores_spend_query_is_the_attribution_of_the_same_lives(tmp_path) -> None:
    check_spend_query(SqliteStore(str(tmp_path / "s.db")))


def check_spend_query(store) -> None:
    """The store's `cost` query over random lives equals :func:`attribute` of them, by every key."""
    rnd = random.Random(7)
    uses = []
    for i in range(300):
        start_at = NOW + rnd.uniform(0, 86400 * 3)
        end = start_at + rnd.choice([0.0, rnd.uniform(60, 86400)])
        people = rnd.sample([("ann", "phys"), ("bob", "chem"), ("cy", "(none)"), ("dee", "phys")], rnd.randint(0, 3))
        uses.append(NodeUse(node_id=f"i-{i}", size=rnd.choice(["small", "big"]), price=rnd.choice([0.1, 0.5]),
                            start=start_at, end=end, shares={k: rnd.uniform(1, 1e5) for k in people}))
    store.ready()
    store.apply(Changes(lives={u.node_id: Life(use=u, closed=True) for u in uses}))
    for since, until in ((0, 2e9), (NOW + 86400, NOW + 2 * 86400), (NOW + 5e5, NOW + 6e5)):
        for by in BY:
            want = {r.name: r for r in attribute(uses, since, until, by)}
            got = {r.name: r for r in store.spend(since, until, by)}
            assert set(got) == set(want), by
            for name, r in want.items():
                assert (got[name].node_hours, got[name].money, got[name].core_hours) == pytest.approx(
                    (r.node_hours, r.money, r.core_hours), rel=1e-9, abs=1e-9), (by, name)


def test_json_files_written_by_todays_release_are_imported_once_and_left_in_place(tmp_path, capsys):
    cfg = _config(tmp_path)
    settings = load(cfg)
    state = pathlib.Path(settings.manage.state_dir)
    state.mkdir()
    # the files as the release before the store wrote them, with its own classes
    run_base(f"""
from nodemanager.console.spend_ledger import SpendLedger, _Live
from nodemanager.console.history import NodeHistory
from nodemanager.console.admin import AdminState
from nodemanager.core.attribution import NodeUse
from nodemanager.core.breaker import Breaker
from nodemanager.cycle.breakers import Breakers
from nodemanager.cycle.memories import Memories
from nodemanager.model import Size
NOW = {NOW!r}
ledger = SpendLedger([Size(name="small", cores=2, ram_mb=4096, price=0.1),
                      Size(name="big", cores=8, ram_mb=16384, price=0.5)], {str(state / "demo.spend.json")!r})
ledger._closed.append(NodeUse(node_id="i-1", size="small", price=0.1, start=NOW - 7200, end=NOW - 3600,
                              shares={{("ann", "phys"): 3600 * 2}}))
live = ledger._live["i-2"] = _Live("big", 0.5, NOW - 1800)
live.end, live.shares = NOW, {{("bob", "chem"): 1800 * 8}}
ledger.save()
history = NodeHistory({str(state / "demo.history.json")!r})
history.add("i-1", NOW - 7000, "decision", "boot for 1 queued job")
history.add("i-1", NOW - 3600, "outcome", "destroy ok")
history.gone("i-1", NOW - 3600, {{"name": "nm-1", "size": "small"}})
history.add("i-2", NOW - 1700, "state", "idle -> busy")
history.save()
breakers = Breakers()
breakers.restore({{"big": Breaker(failures=3, until=NOW + 600, error="InsufficientInstanceCapacity")}}, NOW)
Memories({str(state)!r}, "demo", breakers=breakers).save(NOW)
AdminState(path={str(tmp_path / "admin.json")!r}).hold("i-2")
""")
    files = {p.name: p.read_bytes() for p in [*state.iterdir(), tmp_path / "admin.json"]}
    assert {"demo.spend.json", "demo.history.json", "demo.breakers.json", "admin.json"} <= set(files)

    def open_all(now):
        clock = ManualClock(now)
        store, writer = start(settings, clock)
        writer.start()
        spend = SpendLedger.for_settings(settings, store, writer.submit)
        history = NodeHistory(store, writer.submit, legacy=str(state / "demo.history.json"), started=now)
        ec2 = replace(settings, cloud=replace(settings.cloud, driver="ec2"))   # memories of a real cloud
        kept = Breakers()
        Memories.for_settings(ec2, kept, now, StoreKeeper(store, writer.submit, clock))
        admin = AdminState(store=AdminBacking(store, clock, settings.manage.state_file))
        admin.reload()
        assert writer.stop(10.0)
        return spend, history, kept, admin

    spend, history, kept, admin = open_all(NOW)
    assert {r.name: round(r.node_hours, 3) for r in spend.spend(0, NOW, "node")} == {"i-1": 1.0, "i-2": 0.5}
    assert [t for _, _, t in history.events("i-2")] == ["idle -> busy"]
    assert kept.records()["big"].failures == 3
    assert admin.held == frozenset({"i-2"})
    code, out, err = _run(capsys, "history", "i-1", "--config", cfg)
    assert code == 0, err
    assert out.splitlines()[0].endswith("decision  boot for 1 queued job") and "destroy ok" in out
    since = datetime.fromtimestamp(NOW - 3700, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    code, out, _ = _run(capsys, "history", "i-1", "--config", cfg, "--since", since)
    assert out.splitlines() == [line for line in out.splitlines() if "destroy ok" in line] and out
    code, out, _ = _run(capsys, "cost", "--config", cfg, "--since", "1970-01-01", "--by", "user", "--format", "json")
    assert {r["user"]: r["node_hours"] for r in json.loads(out)["rows"]} == {"ann": 1.0, "bob": 0.5}
    # left in place, unchanged; a later start reads the store, not the files
    assert {p.name: p.read_bytes() for p in [*state.iterdir(), tmp_path / "admin.json"] if p.name in files} == files
    (state / "demo.spend.json").write_text(json.dumps({"version": 1, "nodes": [], "live": []}))
    (tmp_path / "admin.json").write_text(json.dumps({"held": {}, "forced_drains": {}}))
    spend, history, kept, admin = open_all(NOW + 60)
    assert {r.name for r in spend.spend(0, NOW, "node")} == {"i-1", "i-2"}
    assert admin.held == frozenset({"i-2"}) and kept.records()["big"].failures == 3


def test_cost_and_history_read_the_store_while_the_daemon_runs_without_its_lock(tmp_path, daemons, capsys):  # noqa: F811
    cfg = _config(tmp_path)
    d = daemons(cfg).start()
    run_for(d, 600)                       # nodes booted, jobs ran, some given back
    assert d.store_writer.flush(10.0)
    code, out, err = _run(capsys, "cost", "--config", cfg, "--since", "1970-01-01", "--by", "node", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows and all(r["node"].startswith("sim-") and r["node_hours"] > 0 for r in rows)
    until = datetime.fromtimestamp(d.clock() - 300, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    code, out, _ = _run(capsys, "cost", "--config", cfg, "--since", "1970-01-01", "--until", until,
                        "--by", "node", "--format", "json")
    assert sum(r["node_hours"] for r in json.loads(out)["rows"]) < sum(r["node_hours"] for r in rows)
    code, out, _ = _run(capsys, "history", "sim-000099", "--config", cfg)
    assert code == 0 and out.strip() == "sim-000099: no events recorded"


def test_each_kind_is_pruned_past_its_own_retention_in_small_batches(tmp_path, daemons):  # noqa: F811
    cfg = _config(tmp_path, extra="\n[Store]\nkeep_events = 1d\nkeep_gone = 2d\n")
    db = str(tmp_path / "state" / "demo.db")
    now = 1_000_000.0 + 400 * 86400
    store = SqliteStore(db)
    store.ready()
    old = Changes(events=[(f"i-{i}", now - 2 * 86400, "decision", "old") for i in range(1200)]
                  + [("i-new", now - 3600, "decision", "recent")],
                  gone={"i-gone-old": (now - 3 * 86400, "{}"), "i-gone-new": (now - 86400, "{}")})
    for i, end in enumerate((now - 401 * 86400, now - 399 * 86400)):
        use = NodeUse(node_id=f"i-life-{i}", size="small", price=0.1, start=end - 3600, end=end,
                      shares={("ann", "phys"): 3600})
        old.lives[use.node_id] = Life(use=use, closed=True)
    store.apply(old)
    assert store.prune("events", now - 86400, 500) == 500        # one batch is one small transaction
    store.close()
    d = daemons(cfg, clock=ManualClock(now)).start()
    run_for(d, 10)
    assert d.store_writer.flush(10.0)
    assert [e[2] for e in store.events("i-new")] == ["recent"] and store.events("i-3") == []
    assert [n for n, _, _ in store.gone_since(0)] == ["i-gone-new"]
    assert {u.node_id for u in store.uses(0, now) if u.node_id.startswith("i-life")} == {"i-life-1"}
    assert store.counts()["events"] < 1200
