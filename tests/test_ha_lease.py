"""The leader lease against a real etcd on loopback (tests/fixtures/etcd.py), on injected clocks:
who leads, when a leader must stop acting, what a standby shows, and the fencing value."""

from __future__ import annotations

import time

import pytest

from nodemanager.ha import election as el
from nodemanager.ha.etcd import EtcdClient, EtcdError
from nodemanager.ha.lease import LeaderLease
from nodemanager.configuration.settings import HASettings
from tests.fixtures.daemon import Time
from tests.fixtures.etcd import TcpProxy

TTL, MARGIN = 2.0, 0.5


def ha(key: str = "/nodemanager/t/leader") -> HASettings:
    return HASettings(lease_ttl=TTL, stop_margin=MARGIN, election_key=key, timeout=1.0)


def lease_on(url: str, me: str, clock: Time) -> LeaderLease:
    return LeaderLease(EtcdClient((url,), timeout=1.0), ha(), me, clock=clock, wall=lambda: 1.7e9)


def wait_until(predicate, timeout: float, what: str) -> None:
    """Poll a real etcd until ``predicate()`` (its lease expiry runs on etcd's own clock)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def test_leader_stops_acting_at_ttl_minus_margin_after_the_keepalive_was_sent() -> None:
    s = el.elected(el.Leadership(me="a:1"), lease=7, fence=42, sent_at=100.0, value="a:1 since x")
    assert el.acting(s, 101.4, TTL, MARGIN)
    assert not el.acting(s, 101.5, TTL, MARGIN)            # 100 + 2 - 0.5
    s = el.renewed(s, sent_at=101.0, ttl_left=2)
    assert el.acting(s, 102.4, TTL, MARGIN) and not el.acting(s, 102.5, TTL, MARGIN)
    assert not el.renewed(s, 101.2, ttl_left=0).leading   # etcd says the lease is gone
    assert not el.expired(s, 102.5, TTL, MARGIN).leading


def test_one_leader_the_standby_names_it_and_release_hands_over_at_once(etcd) -> None:
    ca, cb = Time(), Time()
    a, b = lease_on(etcd.url, "head1:11", ca), lease_on(etcd.url, "head2:22", cb)
    assert a.step().leading and a.acting()
    assert not b.step().leading and not b.acting()
    assert b.description() == "standby; leader is head1:11 since 2023-11-14 22:13:20Z"
    assert b.fence is None and a.fence is not None
    first_fence = a.fence
    a.stop()
    assert not a.acting()
    assert b.step().leading and b.fence > first_fence


def test_leader_cut_off_from_etcd_stops_before_the_standby_can_win(etcd) -> None:
    proxy = TcpProxy(etcd.client_port)
    try:
        ca, cb = Time(), Time()
        a, b = lease_on(proxy.url, "head1:11", ca), lease_on(etcd.url, "head2:22", cb)
        a.step()
        b.step()
        cut_at = time.monotonic()
        proxy.cut()
        ca.advance(1.0)
        a.step()                                   # keepalive fails: still leader until the deadline
        assert a.acting() and a.description().startswith("leader")
        ca.advance(TTL - MARGIN - 1.0)
        assert not a.acting()                      # deadline passed, whatever etcd says later
        assert not a.step().leading and "etcd:" in a.description()
        wait_until(lambda: b.step().leading, 10, "the standby to win after the lease expired")
        assert time.monotonic() - cut_at >= TTL - MARGIN  # etcd kept the key at least that long
        proxy.restore()
        ca.advance(1.0)
        assert not a.step().leading and a.view().leader.startswith("head2:22")
    finally:
        proxy.close()


def test_etcd_down_makes_every_call_fail_with_the_endpoint(etcd) -> None:
    client = EtcdClient((etcd.url,), timeout=0.5)
    etcd.stop()
    with pytest.raises(EtcdError, match=f"{etcd.url}"):
        client.get("/x")


def test_authentication_gets_a_token_and_a_wrong_password_is_named(tmp_path) -> None:
    import requests

    from tests.fixtures.etcd import EtcdServer
    server = EtcdServer(tmp_path)           # its own etcd: auth would lock the shared one
    server.start()
    try:
        for path, body in (("/v3/auth/role/add", {"name": "root"}),
                           ("/v3/auth/user/add", {"name": "root", "password": "s3cret"}),
                           ("/v3/auth/user/grant", {"user": "root", "role": "root"}),
                           ("/v3/auth/enable", {})):
            assert requests.post(server.url + path, json=body, timeout=5).status_code == 200, path
        with pytest.raises(EtcdError, match="permission denied|user name is empty|token"):
            EtcdClient((server.url,), timeout=1.0).get("/x")
        client = EtcdClient((server.url,), timeout=1.0, user="root", password="s3cret")
        assert LeaderLease(client, ha(), "head1:11", clock=Time()).step().leading
        bad = EtcdClient((server.url,), timeout=1.0, user="root", password="wrong")
        with pytest.raises(EtcdError, match="authentication of user 'root' failed"):
            bad.get("/x")
    finally:
        server.stop()
