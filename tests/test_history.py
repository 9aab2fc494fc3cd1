"""Each node's last events: added by the controller only when something changed, bounded, kept
across a restart in the state directory, and a destroyed node kept an hour in the recent list."""

from __future__ import annotations

import json

import policy_matrix

from nodemanager.cycle.controller import Controller
from nodemanager.console.history import KEEP_GONE, RING, NodeHistory
from nodemanager.model import Outcome
from nodemanager.scheduler.port import SchedulerPoll
from nodemanager.store.sqlite import SqliteStore
from nodemanager.configuration.settings import Settings
from tests.core_world import NOW, node, settings, worker


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _cycle(ctl: Controller, clock: Clock, nodes, workers) -> None:
    ctl.cycle(nodes, clock.now, SchedulerPoll(workers=tuple(workers), demand=(), polled_at=clock.now))


def _controller(clock: Clock, history: NodeHistory) -> Controller:
    ctl = Controller(Settings(core=settings(min_nodes=1)), policy_matrix.load_default(), None,
                     clock=clock, dry_run=True)
    ctl.history = history
    return ctl


def test_events_are_added_on_change_only() -> None:
    clock, history = Clock(), NodeHistory()
    ctl = _controller(clock, history)
    nodes = [node("a", age=7200), node("b", age=7200)]
    busy = [worker("a", state="alloc"), worker("b", state="alloc")]
    for _ in range(3):
        _cycle(ctl, clock, nodes, busy)
        clock.now += 10
    assert [(k, t.split("; ")[1].split(" ")[0]) for _, k, t in history.events("a")] == [("decision", "(busy,")]
    _cycle(ctl, clock, nodes, [worker("a", idle_for=30), busy[1]])
    events = history.events("a")
    assert [k for _, k, _ in events] == ["decision", "state"]
    assert events[-1][2] == "busy -> idle (scheduler: idle)" and events[-1][0] == clock.now
    clock.now += 400   # past idle grace: the matrix wants a drain, min_nodes=1 lets one go
    _cycle(ctl, clock, nodes, [worker("a", idle_for=430), busy[1]])
    _, kind, text = history.events("a")[-1]
    assert kind == "decision" and "-> dry-run: would drain" in text and text.endswith("says START_DRAIN")
    assert len(history.events("b")) == 1


def test_outcomes_and_a_gone_node_move_to_recent() -> None:
    clock, history = Clock(), NodeHistory()
    ctl = _controller(clock, history)
    _cycle(ctl, clock, [node("a", age=7200)], [worker("a", state="alloc")])
    ctl.record([Outcome("destroy", "a", "ok", "destroyed", clock.now + 1),
                Outcome("boot", "nm-9", "ok", "booted", clock.now + 1, size="small")])
    clock.now += 60
    _cycle(ctl, clock, [], [])
    recent = history.recent(clock.now)
    assert [(r["node_id"], r["name"], r["size"], r["gone_at"]) for r in recent] == \
        [("a", "a", "small", clock.now)]
    assert recent[0]["events"][-1][1:] == ("outcome", "destroy ok: destroyed")
    assert history.events("nm-9") == []   # a boot's request name is no node
    assert history.recent(clock.now + KEEP_GONE + 1) == []


def test_the_ring_is_bounded_and_every_event_survives_a_restart_in_the_store(tmp_path) -> None:
    store = SqliteStore(str(tmp_path / "pool.db"))
    store.ready()
    history = NodeHistory(store, started=NOW)
    for i in range(RING + 5):
        history.add("a", NOW + i, "decision", f"event {i}")
    history.gone("b", NOW, {"name": "nm-b", "size": "small", "launched_at": NOW - 100})
    assert [t for _, _, t in history.events("a")] == [f"event {i}" for i in range(5, RING + 5)]
    history.flush()
    history.add("a", NOW + 100, "decision", "not flushed")
    again = NodeHistory(SqliteStore(str(tmp_path / "pool.db")), started=NOW + 200)
    assert [t for _, _, t in again.events("a")] == [f"event {i}" for i in range(5, RING + 5)]
    assert again.recent(NOW)[0]["name"] == "nm-b"
    # the store keeps every event, not the ring: `nodemanager history` reads them all
    assert len(store.events("a")) == RING + 5
    again.add("a", NOW + 300, "decision", "after the restart")
    assert [t for _, _, t in again.events("a")][-2:] == ["event 24", "after the restart"]


def test_a_broken_history_file_is_not_imported_and_says_which(tmp_path, caplog) -> None:
    path = tmp_path / "pool.history.json"
    path.write_text(json.dumps({"nodes": {"a": [[1, "decision"]]}}))
    store = SqliteStore(str(tmp_path / "pool.db"))
    store.ready()
    assert NodeHistory(store, legacy=str(path)).events("a") == []
    assert str(path) in caplog.text and "the node history starts empty" in caplog.text


def test_the_daemons_history_is_kept_in_the_store_but_not_for_an_in_process_cloud(tmp_path) -> None:
    from nodemanager.configuration.settings import CloudSettings, ManageSettings
    store = SqliteStore(str(tmp_path / "pool1.db"))
    store.ready()
    ec2 = Settings(cloud=CloudSettings(driver="ec2", cluster="pool1"),
                   manage=ManageSettings(state_dir=str(tmp_path)))
    assert NodeHistory.for_settings(ec2, store).store is store
    sim = Settings(cloud=CloudSettings(driver="simulated"), manage=ManageSettings(state_dir=str(tmp_path)))
    assert NodeHistory.for_settings(sim, store).store is None   # its nodes die with the process
