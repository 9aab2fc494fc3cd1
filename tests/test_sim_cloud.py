"""The simulated cloud: lifecycle, tags, quotas, faults and billing, on a hand-set clock."""

import pytest

from nodemanager.cloud.port import TAG_CLUSTER, TAG_REQUEST, TAG_SIZE, CloudDriver, CloudError, ErrorKind
from nodemanager.core.billing import late_give_back, paid_seconds_for
from nodemanager.sim.cloud import SimCloud
from tests.fixtures.daemon import SIZES, Time

SMALL, BIG = SIZES


def make(t: Time, **kw) -> SimCloud:
    return SimCloud(clock=t, sizes=SIZES, cluster="c1", boot_delay=60.0, **kw)


def test_node_boots_after_delay_and_callbacks_fire_in_order():
    t = Time()
    events = []
    cloud = make(t, on_running=lambda n, s: events.append(("run", n.id, s.name)),
                 on_terminated=lambda nid: events.append(("term", nid)))
    assert isinstance(cloud, CloudDriver)
    a = cloud.create_node(SMALL, "a", {TAG_REQUEST: "r1"})
    t.advance(10)
    b = cloud.create_node(BIG, "b", {})
    assert [n.state for n in cloud.list_nodes()] == ["pending", "pending"]
    assert cloud.next_event_time() == a.launched_at + 60
    t.advance(70)
    assert {n.id: n.state for n in cloud.list_nodes()} == {a.id: "running", b.id: "running"}
    assert events == [("run", a.id, "small"), ("run", b.id, "big")]
    listed = cloud.list_nodes()[0]
    assert listed.tags[TAG_CLUSTER] == "c1" and listed.tags[TAG_SIZE] == "small"
    assert listed.tags[TAG_REQUEST] == "r1" and listed.launched_at == 1_000_000.0
    cloud.destroy_node(a)
    assert [n.id for n in cloud.list_nodes()] == [b.id]
    assert events[-1] == ("term", a.id)
    cloud.destroy_node(a)  # already gone: success


def test_set_tags_adds_and_removes():
    t = Time()
    cloud = make(t)
    n = cloud.create_node(SMALL, "a", {"x": "1"})
    cloud.set_tags(n, {"y": "2", "x": ""})
    tags = cloud.list_nodes()[0].tags
    assert tags.get("y") == "2" and "x" not in tags
    cloud.destroy_node(n)
    with pytest.raises(CloudError) as e:
        cloud.set_tags(n, {"y": "3"})
    assert e.value.kind is ErrorKind.NOT_FOUND


def test_quota_and_capacity_errors_are_classified():
    t = Time()
    cloud = make(t, quotas={"small": 1}, capacity={"big": 1})
    cloud.create_node(SMALL, "a", {})
    with pytest.raises(CloudError) as e:
        cloud.create_node(SMALL, "b", {})
    assert e.value.kind is ErrorKind.QUOTA
    cloud.create_node(BIG, "c", {})
    with pytest.raises(CloudError) as e:
        cloud.create_node(BIG, "d", {})
    assert e.value.kind is ErrorKind.CAPACITY
    assert cloud.live_count() == 2


def test_injected_faults_and_create_that_fails_but_creates():
    t = Time()
    cloud = make(t)
    cloud.fail_next("list_nodes", CloudError(ErrorKind.RATE_LIMIT, "slow down", retry_after=7))
    with pytest.raises(CloudError) as e:
        cloud.list_nodes()
    assert e.value.kind is ErrorKind.RATE_LIMIT and e.value.retry_after == 7
    assert cloud.list_nodes() == []
    cloud.create_fails_but_creates()
    with pytest.raises(CloudError) as e:
        cloud.create_node(SMALL, "a", {TAG_REQUEST: "r9"})
    assert e.value.kind is ErrorKind.TRANSIENT
    assert [n.tags[TAG_REQUEST] for n in cloud.list_nodes()] == ["r9"]
    assert cloud.calls["create_node"] == 1 and cloud.calls["list_nodes"] == 3


def test_billing_per_second_with_minimum_and_per_started_period():
    assert paid_seconds_for(SMALL, 10) == 60
    assert paid_seconds_for(SMALL, 125.5) == 125.5
    assert paid_seconds_for(BIG, 1) == 3600
    assert paid_seconds_for(BIG, 3601) == 7200
    t = Time()
    cloud = make(t)
    a = cloud.create_node(SMALL, "a", {})
    b = cloud.create_node(BIG, "b", {})
    t.advance(30)
    cloud.destroy_node(a)
    t.advance(3600)
    assert cloud.paid_seconds(a.id) == 60
    assert cloud.paid_seconds(b.id) == 7200
    assert cloud.billing_by_size() == {"small": 60, "big": 7200}
    assert cloud.cost() == pytest.approx(60 / 3600 * 0.1 + 2 * 0.5)



def test_late_give_backs_are_periods_paid_for_almost_nothing():
    # BIG: billed per hour, shutdown_window 600 s
    t = Time()
    cloud = make(t)
    first = cloud.create_node(BIG, "first", {})     # destroyed within its first hour: never late
    in_time = cloud.create_node(BIG, "in-time", {})
    late = cloud.create_node(BIG, "late", {})
    per_second = cloud.create_node(SMALL, "small", {})
    t.advance(1000)
    cloud.destroy_node(first)
    t.advance(2590)                                  # 3590 s up: in the window, before the hour ends
    cloud.destroy_node(in_time)
    t.advance(70)                                    # 3660 s up: a minute into the second hour
    cloud.destroy_node(late)
    cloud.destroy_node(per_second)
    assert cloud.late_give_backs() == 1
    assert not late_give_back(BIG, 0.0, 3600 + 600) and late_give_back(BIG, 0.0, 7200 + 599)


def test_ten_thousand_nodes_list_fast():
    import time as _time
    t = Time()
    cloud = SimCloud(clock=t, sizes=SIZES, boot_delay=0.0)
    for i in range(10_000):
        cloud.create_node(SMALL, f"n{i}", {})
    start = _time.process_time()
    for _ in range(20):
        assert len(cloud.list_nodes()) == 10_000
    assert _time.process_time() - start < 1.0
