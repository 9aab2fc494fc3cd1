"""One election per deployment, whatever its settings, and nothing of it lost with etcd's data: a
real etcd on loopback (tests/fixtures/etcd.py, restarted on an empty data directory to lose its
data), the daemon as ``nodemanager run`` builds it, injected clocks, each head its own state_dir."""

from __future__ import annotations

import pathlib
import shutil

from nodemanager.actors.clock import ManualClock
from nodemanager.configuration.config import load
from nodemanager.daemon import Daemon
from nodemanager.ha.etcd import EtcdClient
from nodemanager.ha.lease import LeaderLease
from nodemanager.ha.local import HeadRecords
from nodemanager.ha.wiring import HighAvailability
from nodemanager.configuration.settings import HASettings
from tests.fixtures.daemon import Time
from tests.test_ha_admin import ha_config, heads, ids, post, run_for  # noqa: F401  (the fixture)

TTL, MARGIN = 2.0, 0.5


def lose_etcd_data(etcd) -> None:
    """etcd restarted on an empty data directory: every key gone, revisions from 1 again."""
    etcd.stop()
    shutil.rmtree(etcd.workdir / "data")
    etcd.start()


def config(tmp_path: pathlib.Path, name: str, etcd_url: str, cluster: str, state: str, ha: str = "") -> str:
    path = tmp_path / f"{name}.ini"
    text = pathlib.Path(ha_config(path, etcd_url)).read_text()
    text = (text.replace("\ncluster = demo\n", f"\ncluster = {cluster}\n")
            .replace(f"\nstate_dir = {path.name}-state\n", f"\nstate_dir = {state}\n"))
    path.write_text(text + ha)
    return str(path)


def built(cfg: str) -> Daemon:
    """The daemon as ``nodemanager run --config cfg`` builds it (its HA from [HA] and state_dir)."""
    return Daemon(load(cfg), config_path=cfg, clock=ManualClock(1_000_000.0), status=False)


def test_renaming_the_cluster_on_a_standby_keeps_it_in_the_same_election(tmp_path, etcd) -> None:
    a = built(config(tmp_path, "a", etcd.url, "demo", "a-state"))
    b = built(config(tmp_path, "b", etcd.url, "demo", "b-state"))     # both heads ran before...
    assert a.ha.lease.step().leading and not b.ha.lease.step().leading
    renamed = built(config(tmp_path, "b2", etcd.url, "demo-renamed", "b-state"))  # ...then b's rename
    assert not renamed.ha.lease.step().leading
    assert renamed.ha.describe().startswith("standby; leader is ")
    assert renamed.ha.settings.election_key == a.ha.settings.election_key


def test_heads_of_one_deployment_id_share_one_election_whatever_their_names(tmp_path, etcd) -> None:
    """The election follows the identity the VMs carry ([Cloud] deployment_id), not a free-text
    name: two heads whose [HA] deployment differs by a word never both lead."""
    a = built(config(tmp_path, "a", etcd.url, "demo", "a-state", ha="deployment = site-a\n"))
    b = built(config(tmp_path, "b", etcd.url, "demo", "b-state", ha="deployment = site-a-new\n"))
    assert a.ha.lease.step().leading and not b.ha.lease.step().leading
    assert b.ha.describe().startswith("standby; leader is ")
    other = config(tmp_path, "c", etcd.url, "other", "c-state")      # another deployment: its own election
    pathlib.Path(other).write_text(pathlib.Path(other).read_text().replace(
        "deployment_id = ha-admin-test", "deployment_id = another-site"))
    assert built(other).ha.lease.step().leading


def test_a_head_of_an_earlier_version_leading_under_its_old_key_keeps_this_one_standby(tmp_path, etcd) -> None:
    """A rolling upgrade: the old head leads under /nodemanager/<[HA] deployment>/leader."""
    old = HASettings(lease_ttl=TTL, stop_margin=MARGIN, election_key="/nodemanager/site-a/leader", timeout=1.0)
    earlier = LeaderLease(EtcdClient((etcd.url,), timeout=1.0), old, "old:1", clock=Time(), wall=lambda: 1.7e9)
    assert earlier.step().leading
    new = built(config(tmp_path, "a", etcd.url, "demo", "a-state", ha="deployment = site-a\n"))
    assert not new.ha.lease.step().leading
    assert "old:1 since" in new.ha.describe() and "earlier version" in new.ha.describe()
    earlier.stop()
    assert new.ha.lease.step().leading


def lease(url: str, me: str, clock: Time, state: pathlib.Path) -> LeaderLease:
    ha = HASettings(lease_ttl=TTL, stop_margin=MARGIN, election_key="/nodemanager/e/leader", timeout=1.0)
    return LeaderLease(EtcdClient((url,), timeout=1.0), ha, me, clock=clock, wall=lambda: 1.7e9,
                       records=HeadRecords(str(state)))


def test_after_etcd_loses_its_data_fences_never_repeat_and_no_two_heads_act_at_once(tmp_path, etcd) -> None:
    clock = Time()
    a = lease(etcd.url, "head1:1", clock, tmp_path / "a")
    b = lease(etcd.url, "head2:2", clock, tmp_path / "b")
    for _ in range(3):                                     # some history: fences above etcd's restart
        assert a.step().leading
        a.stop()
        a = lease(etcd.url, "head1:1", clock, tmp_path / "a")
    assert a.step().leading and not b.step().leading
    old_fence = a.fence
    lose_etcd_data(etcd)
    seen = []
    for _ in range(int(2 * TTL / 0.25)):
        b.step()                                           # the standby finds no key: elected at once...
        if a.view().leading:
            a.step()                                       # ...while the old leader may act to its deadline
        assert not (a.acting() and b.acting()), f"two heads act at {clock.now}"
        seen.append(b.acting())
        clock.advance(0.25)
    assert b.view().leading and b.acting() and seen[0] is False   # it waited one TTL, then acted
    assert b.fence > old_fence
    b.stop()
    assert a.step().leading and a.fence > old_fence + 1   # the next term is above both, at once
    assert a.acting()


def test_holds_and_a_pause_survive_etcd_losing_its_data(tmp_path, etcd, heads) -> None:  # noqa: F811
    clock = ManualClock(1_000_000.0)
    a = heads(ha_config(tmp_path / "a.ini", etcd.url), "head1:1", clock)
    a.ha.lease.step()
    b = heads(ha_config(tmp_path / "b.ini", etcd.url), "head2:2", clock,
              ports=(a.world.cloud, a.world.scheduler, a.world))
    a.start(), b.start()
    run_for(clock, [a, b], 100)
    held = ids(a.world, live=True)
    for node in held:
        assert post(a, f"/admin/hold/{node}").status_code == 200
    assert post(a, "/admin/pause", json={"reason": "maintenance"}).status_code == 200
    run_for(clock, [a, b], 10)                             # the standby keeps its copy
    a.stop()
    lose_etcd_data(etcd)
    before = ids(a.world)
    run_for(clock, [b], 200)                               # b is elected, waits a TTL, then acts
    assert b.ha.lease.acting()
    assert b.admin.paused == "maintenance" and b.admin.held == held
    assert ids(a.world) == before                          # nothing booted while paused
    assert EtcdClient((etcd.url,)).get(b.ha.settings.admin_key) is not None   # published again
