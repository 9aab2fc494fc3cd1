"""The admin state under [HA], through in-process daemons on the embedded simulated world, their
admin HTTP API and a real etcd (tests/fixtures/etcd.py): a standby refuses operator changes, and a
new leader plans with the pause and holds it has read before its first action.

Every clock (the daemons' and the leases') is one ManualClock the test advances, renewing the
leases by hand after each step, so nothing sleeps."""

from __future__ import annotations

import pathlib

import pytest
import requests

from nodemanager.actors.clock import ManualClock
from nodemanager.cloud.port import TAG_DESTROY, TAG_DRAIN
from nodemanager.configuration.config import load
from nodemanager.daemon import Daemon
from nodemanager.ha.wiring import HighAvailability
from tests.test_daemon import REPO

TOKEN = "ha-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def ha_config(path: pathlib.Path, etcd_url: str, *, burst: int = 12, every: str = "3m",
              max_nodes: int = 8) -> str:
    """The embedded default world with a status server, an admin token and [HA] on the test etcd."""
    text = (REPO / "config.example.ini").read_text()
    text = (text.replace("port = 8989", "port = 0").replace("\ntoken =\n", f"\ntoken = {TOKEN}\n")
            .replace("\nstate_dir =\n", f"\nstate_dir = {path.name}-state\n")
            .replace("\nburst_size = 12\n", f"\nburst_size = {burst}\n")
            .replace("\nburst_every = 3m\n", f"\nburst_every = {every}\n")
            .replace("\nmax_nodes = 8\n", f"\nmax_nodes = {max_nodes}\n")
            .replace("\n# deployment_id =\n", "\ndeployment_id = ha-admin-test\n"))  # both heads: one deployment
    path.write_text(text + f"\n[HA]\nendpoints = {etcd_url}\nlease_ttl = 60s\nstop_margin = 5s\n")
    return str(path)


@pytest.fixture
def heads():
    """``make(cfg, me, clock, ports=None)``: a daemon with its own HA head on a frozen lease clock."""
    made: list[Daemon] = []

    def make(cfg: str, me: str, clock: ManualClock, ports=None) -> Daemon:
        settings = load(cfg)
        ha = HighAvailability(settings.ha, me=me, clock=clock, wall=clock)
        d = Daemon(settings, config_path=cfg, clock=clock, stop_timeout=5.0, ports=ports, ha=ha)
        made.append(d)
        return d
    yield make
    for d in made:
        d.stop()


def run_for(clock: ManualClock, heads: list[Daemon], seconds: float, step: float = 5.0) -> int:
    """Advance every head by ``seconds``; each lease is kept alive (or campaigns) after each step.
    Returns the most jobs the last head saw queued."""
    queued = 0
    for _ in range(int(seconds / step)):
        clock.advance(step)
        for d in heads:
            d.ha.lease.step()
            assert d.system.settle(10.0)
        report = heads[-1].last_report
        queued = max(queued, sum(d.count for d in report.snapshot.demand) if report else 0)
    return queued


def post(d: Daemon, path: str, **kw) -> requests.Response:
    return requests.post(d.status_server.url + path, headers=AUTH, timeout=5, **kw)


def test_a_standby_refuses_admin_writes_naming_the_leader_and_changes_nothing(tmp_path, etcd, heads) -> None:
    clock = ManualClock(1_000_000.0)
    a = heads(ha_config(tmp_path / "a.ini", etcd.url), "head1:1", clock)
    a.ha.lease.step()                                      # head1 leads
    b = heads(ha_config(tmp_path / "b.ini", etcd.url), "head2:2", clock,
              ports=(a.world.cloud, a.world.scheduler, a.world))
    a.start(), b.start()
    run_for(clock, [a], 100)
    reply = post(b, "/admin/pause", json={"reason": "kernel upgrade"})
    assert reply.status_code == 409
    assert reply.json()["leader"].startswith("head1:1 since ")
    assert "standby" in reply.json()["error"] and "head1:1" in reply.json()["error"]
    node = a.world.sim_cloud.list_nodes()[0].id
    assert post(b, f"/admin/hold/{node}").status_code == 409
    state = requests.get(b.status_server.url + "/status.json", timeout=5).json()["admin"]
    assert state["paused"] is None and state["held"] == []
    # the standby takes over: it acts on what the leader holds, not on what it was asked
    a.stop()
    b.ha.lease.step()
    run_for(clock, [b], 30)
    assert b.admin.paused is None and b.admin.held == frozenset()
    assert post(b, "/admin/pause", json={"reason": "now on the leader"}).status_code == 200
    assert b.admin.paused == "now on the leader"


def ids(world, live: bool = False) -> set[str]:
    return {n.id for n in world.sim_cloud.list_nodes() if not live or n.state != "terminated"}


def take_over_cold(tmp_path, etcd, heads, clock: ManualClock, world, **config) -> Daemon:
    """A second head starting cold after the first released its lease: elected at once."""
    b = heads(ha_config(tmp_path / "b.ini", etcd.url, **config), "head2:2", clock,
              ports=(world.cloud, world.scheduler, world))
    b.ha.lease.step()
    assert b.ha.lease.acting()
    return b.start()


def test_a_new_leader_obeys_the_stored_pause_from_its_first_cycle(tmp_path, etcd, heads) -> None:
    clock = ManualClock(1_000_000.0)
    a = heads(ha_config(tmp_path / "a.ini", etcd.url, burst=60), "head1:1", clock)
    a.ha.lease.step()
    a.start()
    run_for(clock, [a], 100)                               # nodes booted, running jobs
    assert post(a, "/admin/pause", json={"reason": "maintenance"}).status_code == 200
    a.stop()                                               # releases the lease
    world = a.world
    before, live = ids(world), ids(world, live=True)
    b = take_over_cold(tmp_path, etcd, heads, clock, world, burst=60, max_nodes=16)  # room to boot
    queued = run_for(clock, [b], 600)                      # bursts of up to 60 jobs every 3 minutes
    assert b.admin.paused == "maintenance"
    assert queued > 0                                      # there was work to boot for...
    assert ids(world) == before and ids(world, live=True) == live   # ...nothing booted or destroyed


def test_a_new_leader_never_drains_a_node_held_on_the_old_leader(tmp_path, etcd, heads) -> None:
    clock = ManualClock(1_000_000.0)
    a = heads(ha_config(tmp_path / "a.ini", etcd.url, every="1d"), "head1:1", clock)  # one burst
    a.ha.lease.step()
    a.start()
    run_for(clock, [a], 100)                               # nodes booted, running the burst
    held = ids(a.world, live=True)
    assert held
    for node in held:
        assert post(a, f"/admin/hold/{node}").status_code == 200
    run_for(clock, [a], 300)                               # the jobs ended: idle past idle_grace
    a.stop()
    world = a.world
    b = take_over_cold(tmp_path, etcd, heads, clock, world, every="1d")
    run_for(clock, [b], 120)
    assert b.admin.held == held
    for node in held:
        n = world.sim_cloud.node(node)
        assert n.state != "terminated" and not n.tags.get(TAG_DRAIN) and not n.tags.get(TAG_DESTROY)
