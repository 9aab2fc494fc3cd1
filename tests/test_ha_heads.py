"""What the heads of an HA pair say about each other, through in-process daemons on one simulated
world, their status pages and metrics, and a real etcd: heads that would decide differently are
reported on both pages, in a metric and at the takeover; a second leader (another election key
on the same etcd) is caught by the check that stops a second controller.

Every clock is one ManualClock the test advances (tests/test_ha_admin.py)."""

from __future__ import annotations

import logging
import pathlib

import requests

from nodemanager.actors.clock import ManualClock
from nodemanager.configuration.config import load
from nodemanager.core.identity import Identity
from nodemanager.daemon import Daemon
from nodemanager.ha.wiring import HighAvailability
from tests.test_ha_admin import ha_config, heads, run_for  # noqa: F401  (the fixture)


def page(d: Daemon, path: str = "/status.json") -> requests.Response:
    return requests.get(d.status_server.url + path, timeout=5)


def test_heads_with_other_caps_are_reported_on_both_pages_in_a_metric_and_at_takeover(
        tmp_path, etcd, heads, caplog) -> None:  # noqa: F811
    caplog.set_level(logging.INFO, "nodemanager.ha")
    clock = ManualClock(1_000_000.0)
    a = heads(ha_config(tmp_path / "a.ini", etcd.url, max_nodes=2), "head1:1", clock)
    a.ha.lease.step()
    b = heads(ha_config(tmp_path / "b.ini", etcd.url, max_nodes=5), "head2:2", clock,
              ports=(a.world.cloud, a.world.scheduler, a.world))
    a.start(), b.start()
    for d in (a, b, a):
        d.ha.heads.step()                      # publish this head's digest, read the others'
    run_for(clock, [a, b], 10)
    for me, other in ((a, "head2:2"), (b, "head1:1")):
        lines = page(me).json()["ha_mismatch"]
        assert len(lines) == 1 and lines[0].startswith(f"{other} decides with another max_nodes"), lines
        html = page(me, "/").text
        assert "data-ha-mismatch" in html and f"{other} decides with another max_nodes" in html
        assert "nodemanager_ha_config_mismatch 1.0" in page(me, "/metrics").text
    a.stop()                                   # b takes over, and says what changes with it
    b.ha.lease.step()
    run_for(clock, [b], 10)
    assert "taking over: head1:1 decided with another max_nodes" in caplog.text
    assert page(b).json()["ha"].startswith("leader")


def test_heads_with_one_configuration_report_no_difference(tmp_path, etcd, heads) -> None:  # noqa: F811
    clock = ManualClock(1_000_000.0)
    a = heads(ha_config(tmp_path / "a.ini", etcd.url), "head1:1", clock)
    b = heads(ha_config(tmp_path / "b.ini", etcd.url), "head2:2", clock,
              ports=(a.world.cloud, a.world.scheduler, a.world))
    a.start(), b.start()
    for d in (a, b, a):
        d.ha.heads.step()
    assert a.ha.heads.heads() == ("head2:2",) and b.ha.heads.heads() == ("head1:1",)
    assert page(a).json()["ha_mismatch"] == [] and page(b).json()["ha_mismatch"] == []
    assert "nodemanager_ha_config_mismatch 0.0" in page(a, "/metrics").text


def second_leader(cfg: str, me: str, clock: ManualClock, key: str, ports=None) -> Daemon:
    """A head elected under its own ``election_key`` on the shared etcd, with the deployment id
    and identity ``nodemanager run`` gives it (its marks on the VMs name it)."""
    path = pathlib.Path(cfg)
    path.write_text(path.read_text() + f"election_key = /{key}/leader\nadmin_key = /{key}/admin\n")
    settings = load(cfg)
    ha = HighAvailability(settings.ha, me=me, clock=clock, wall=clock, deployment_id=settings.cloud.deployment_id)
    identity = Identity(deployment=settings.cloud.deployment_id, created_at=0.0, controller=f"{me}:0",
                        started_at=clock(), one_controller=False)
    return Daemon(settings, config_path=cfg, clock=clock, stop_timeout=5.0, ports=ports, ha=ha, identity=identity)


def test_two_leaders_under_other_election_keys_both_stop_and_say_so(tmp_path, etcd) -> None:
    clock = ManualClock(1_000_000.0)
    a = second_leader(ha_config(tmp_path / "a.ini", etcd.url, max_nodes=3), "head1:1", clock, "site-a")
    b = second_leader(ha_config(tmp_path / "b.ini", etcd.url, max_nodes=3), "head2:2", clock, "site-a-new",
                      ports=(a.world.cloud, a.world.scheduler, a.world))
    try:
        assert a.ha.lease.step().leading and b.ha.lease.step().leading   # two elections: both won
        for d in (a, b, a):
            d.ha.heads.step()
        a.start(), b.start()
        queued = run_for(clock, [a, b], 60)
        assert queued > 0                                                  # there was work to boot for...
        assert a.world.sim_cloud.live_count() == 0                         # ...and neither booted
        for me, other in ((a, "head2:2"), (b, "head1:1")):
            doc = page(me).json()
            assert f"STOPPED, another leader: {other} leads too" in doc["ha"]
            assert f"{other} leads too" in page(me, "/").text
            assert "nodemanager_ha_other_leaders 1.0" in page(me, "/metrics").text
    finally:
        a.stop()
        b.stop()
