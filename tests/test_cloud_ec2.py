"""The libcloud adapter against a real EC2 API: moto_server, driven through libcloud's EC2 driver.

Error paths go through the fault proxy of tests/fixtures/moto.py, which answers chosen actions
with real EC2 error replies (status, XML body, Retry-After) so libcloud parses a real HTTP reply.
"""

from __future__ import annotations

import time

import pytest
from libcloud.compute.base import NodeImage, NodeSize
from libcloud.compute.providers import get_driver

from nodemanager.cloud import (TAG_CLUSTER, TAG_DRAIN, TAG_REQUEST, TAG_SIZE, CloudError,
                               ErrorKind, reconcile_create, reconcile_destroy)
from nodemanager.cloud.ec2compat import tolerant_ec2_driver
from nodemanager.model import Size
from tests.fixtures.moto import EC2_IMAGE

pytestmark = pytest.mark.ec2

SMALL = Size("small", cores=2, ram_mb=2048, instance_type="t3.small")
BIG = Size("big", cores=8, ram_mb=32768, instance_type="m5.2xlarge")


def _raw_driver(port: int, tolerant: bool = True):
    cls = get_driver("ec2")
    if tolerant:
        cls = tolerant_ec2_driver(cls)
    return cls("AKIDOTHER", "other-secret", region="us-east-1", host="127.0.0.1", port=port,
               secure=False, signature_version="4")


def test_plain_libcloud_sees_nothing_and_the_tolerant_driver_sees_the_node(ec2_proxy):
    """The namespace pitfall, measured: without the fix libcloud parses moto's replies as empty."""
    plain, tolerant = _raw_driver(ec2_proxy.port, False), _raw_driver(ec2_proxy.port)
    size = NodeSize("t3.micro", "t3.micro", 0, 0, None, 0, plain)
    created = plain.create_node(name="plain", size=size, image=NodeImage(EC2_IMAGE, None, plain),
                                ex_metadata={"probe": "namespace"})
    assert created == []  # libcloud found no instancesSet in the reply
    listed = tolerant.list_nodes(ex_filters={"tag:probe": "namespace"})
    assert [n.name for n in listed] == ["plain"]
    assert plain.list_nodes(ex_filters={"tag:probe": "namespace"}) == []
    tolerant.destroy_node(listed[0])


def test_boot_sets_tags_and_reads_launch_time_back(ec2_cloud):
    cloud = ec2_cloud(tags={"team": "physics"})
    before = time.time()
    node = cloud.create_node(SMALL, "c-small-1", {TAG_REQUEST: "req-1", "purpose": "test"})
    assert node.id.startswith("i-")
    assert node.name == "c-small-1"
    assert node.size == "small"
    assert node.state in ("pending", "running")
    assert node.private_ip and node.hostname and node.hostname.startswith("ip-")
    listed = {n.id: n for n in cloud.list_nodes()}
    got = listed[node.id]
    assert got.tags[TAG_CLUSTER] == cloud.cluster
    assert got.tags[TAG_SIZE] == "small"
    assert got.tags[TAG_REQUEST] == "req-1"
    assert got.tags["purpose"] == "test" and got.tags["team"] == "physics"
    assert got.tags["Name"] == "c-small-1"
    assert got.size == "small"
    # moto stamps launch time with whole seconds, from its own clock.
    assert before - 2 <= got.launched_at <= time.time() + 1
    assert got.launched_at == node.launched_at


def test_create_without_request_id_gets_one(ec2_cloud):
    cloud = ec2_cloud()
    node = cloud.create_node(SMALL, "anon", {})
    assert len(node.tags[TAG_REQUEST]) >= 16
    [listed] = cloud.list_nodes()
    assert listed.tags[TAG_REQUEST] == node.tags[TAG_REQUEST]


def test_list_is_filtered_to_our_cluster(ec2_cloud, ec2_proxy):
    ours, theirs = ec2_cloud(), ec2_cloud()
    a = ours.create_node(SMALL, "ours-1", {TAG_REQUEST: "r-a"})
    b = ours.create_node(BIG, "ours-2", {TAG_REQUEST: "r-b"})
    theirs.create_node(SMALL, "theirs-1", {TAG_REQUEST: "r-c"})
    foreign = _raw_driver(ec2_proxy.port)
    untagged = foreign.create_node(name="untagged", size=NodeSize("t3.micro", "t3.micro", 0, 0, None, 0, foreign),
                                   image=NodeImage(EC2_IMAGE, None, foreign))
    before = ec2_proxy.count("DescribeInstances")
    listed = ours.list_nodes()
    assert ec2_proxy.count("DescribeInstances") == before + 1  # one list call, filtered server-side
    assert sorted(n.id for n in listed) == sorted([a.id, b.id])
    assert {n.id: n.size for n in listed} == {a.id: "small", b.id: "big"}
    assert untagged.id not in {n.id for n in listed}
    assert [n.name for n in theirs.list_nodes()] == ["theirs-1"]


def test_tag_and_untag(ec2_cloud):
    cloud = ec2_cloud()
    node = cloud.create_node(SMALL, "tagged", {TAG_REQUEST: "r-tag"})
    cloud.set_tags(node, {TAG_DRAIN: "1700000000:drain-7", "note": "x"})
    [got] = cloud.list_nodes()
    assert got.tags[TAG_DRAIN] == "1700000000:drain-7" and got.tags["note"] == "x"
    cloud.set_tags(node, {TAG_DRAIN: "", "note": "y"})
    [got] = cloud.list_nodes()
    assert TAG_DRAIN not in got.tags
    assert got.tags["note"] == "y"
    assert got.tags[TAG_CLUSTER] == cloud.cluster


def test_destroy_then_destroy_again_and_unknown_id(ec2_cloud):
    cloud = ec2_cloud()
    node = cloud.create_node(SMALL, "doomed", {TAG_REQUEST: "r-d"})
    cloud.destroy_node(node)
    [gone] = cloud.list_nodes()
    assert gone.id == node.id and gone.state in ("terminated", "shutting-down")
    assert reconcile_destroy([gone], node.id)
    cloud.destroy_node(node)  # already terminated: still a success
    from dataclasses import replace
    cloud.destroy_node(replace(node, id="i-0123456789abcdef0"))  # unknown to the cloud: success


def test_quota_error_on_create(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    ec2_proxy.fail("RunInstances", 400, "InstanceLimitExceeded",
                   message="You have requested more instances (21) than your current instance "
                           "limit of 20 allows for the specified instance type.")
    with pytest.raises(CloudError) as err:
        cloud.create_node(SMALL, "q", {TAG_REQUEST: "r-q"})
    assert err.value.kind is ErrorKind.QUOTA
    assert err.value.call == "create_node"
    assert "InstanceLimitExceeded" in str(err.value)
    assert cloud.list_nodes() == []


def test_capacity_error_on_create(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    ec2_proxy.fail("RunInstances", 500, "InsufficientInstanceCapacity",
                   message="We currently do not have sufficient m5.2xlarge capacity.")
    with pytest.raises(CloudError) as err:
        cloud.create_node(BIG, "cap", {TAG_REQUEST: "r-cap"})
    assert err.value.kind is ErrorKind.CAPACITY
    # the next create of the same size goes through: nothing is remembered in the adapter
    assert cloud.create_node(BIG, "cap", {TAG_REQUEST: "r-cap2"}).size == "big"


def test_rate_limit_error_carries_retry_after(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    ec2_proxy.fail("DescribeInstances", 503, "RequestLimitExceeded", message="Request limit exceeded.",
                   headers={"Retry-After": "7"})
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.RATE_LIMIT
    assert err.value.retry_after == 7.0
    assert cloud.list_nodes() == []  # the fault was one-shot; the adapter did not retry on its own


def test_http_429_is_rate_limit(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    ec2_proxy.fail("DescribeInstances", 429, "Throttling", headers={"Retry-After": "3"})
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.RATE_LIMIT and err.value.retry_after == 3.0


def test_internal_error_is_transient_and_not_retried_by_the_adapter(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    ec2_proxy.fail("RunInstances", 500, "InternalError", message="An internal error has occurred")
    before = ec2_proxy.count("RunInstances")
    with pytest.raises(CloudError) as err:
        cloud.create_node(SMALL, "t", {TAG_REQUEST: "r-t"})
    assert err.value.kind is ErrorKind.TRANSIENT
    assert ec2_proxy.count("RunInstances") == before + 1


def test_auth_failure_is_permanent_and_hides_credentials(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    ec2_proxy.fail("DescribeInstances", 401, "AuthFailure",
                   message="AWS was not able to validate AKIDNODEMANAGERTEST moto-secret-not-real")
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.PERMANENT
    text = f"{err.value} {err.value!r} {cloud!r}"
    assert "moto-secret-not-real" not in text and "AKIDNODEMANAGERTEST" not in text


def test_connection_refused_is_transient(ec2_cloud):
    from tests.fixtures.moto import free_port
    cloud = ec2_cloud(port=free_port())
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.TRANSIENT


def test_create_that_fails_but_creates_is_found_in_the_next_listing(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    ec2_proxy.fail("RunInstances", 500, "InternalError", forward=True)
    with pytest.raises(CloudError) as err:
        cloud.create_node(SMALL, "ghost-1", {TAG_REQUEST: "r-ghost"})
    assert err.value.kind is ErrorKind.TRANSIENT
    listing = cloud.list_nodes()
    found = reconcile_create(listing, "r-ghost")
    assert found is not None and found.name == "ghost-1" and found.size == "small"
    assert reconcile_create(listing, "r-other") is None


def test_destroy_that_fails_but_destroys_is_confirmed_by_the_next_listing(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    node = cloud.create_node(SMALL, "victim", {TAG_REQUEST: "r-v"})
    keep = cloud.create_node(SMALL, "keeper", {TAG_REQUEST: "r-k"})
    ec2_proxy.fail("TerminateInstances", 503, "ServiceUnavailable", forward=True)
    with pytest.raises(CloudError) as err:
        cloud.destroy_node(node)
    assert err.value.kind is ErrorKind.TRANSIENT
    listing = cloud.list_nodes()
    assert reconcile_destroy(listing, node.id)
    assert not reconcile_destroy(listing, keep.id)


def test_destroy_that_really_fails_is_not_confirmed(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud()
    node = cloud.create_node(SMALL, "stubborn", {TAG_REQUEST: "r-s"})
    ec2_proxy.fail("TerminateInstances", 500, "InternalError")
    with pytest.raises(CloudError):
        cloud.destroy_node(node)
    assert not reconcile_destroy(cloud.list_nodes(), node.id)


def test_rate_limit_spaces_calls_with_the_injected_clock(ec2_cloud):
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    cloud = ec2_cloud(calls_per_second=2.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(6):
        cloud.list_nodes()
    # a burst of 2, then one call every 0.5 s of the injected clock
    assert slept == pytest.approx([0.5, 0.5, 0.5, 0.5])


def test_list_follows_next_token_one_call_per_page(ec2_cloud, ec2_proxy, monkeypatch):
    """libcloud's own list_nodes ignores nextToken (moto pages at 100): we follow it."""
    monkeypatch.setattr(tolerant_ec2_driver(get_driver("ec2")), "PAGE_SIZE", 5)
    cloud = ec2_cloud()
    made = {cloud.create_node(SMALL, f"paged-{i}", {TAG_REQUEST: f"r-p{i}"}).id for i in range(12)}
    before = ec2_proxy.count("DescribeInstances")
    listed = cloud.list_nodes()
    assert ec2_proxy.count("DescribeInstances") == before + 3
    assert {n.id for n in listed} == made and len(listed) == 12


def test_create_options_reach_the_cloud(ec2_cloud, ec2_proxy):
    raw = _raw_driver(ec2_proxy.port)
    vpc = raw.ex_create_network("10.42.0.0/16")
    subnet = raw.ex_create_subnet(vpc.id, "10.42.1.0/24", "us-east-1b")
    cloud = ec2_cloud(create_args={"location": "us-east-1b", "subnet": subnet.id,
                                   "user_data": "#!/bin/sh\necho hello\n"})
    node = cloud.create_node(SMALL, "placed", {TAG_REQUEST: "r-placed"})
    assert node.private_ip.startswith("10.42.1.")
    [seen] = raw.list_nodes(ex_node_ids=[node.id])
    assert seen.extra["availability"] == "us-east-1b"
    assert seen.extra["subnet_id"] == subnet.id
    assert seen.extra["instance_type"] == "t3.small"
    assert seen.extra["image_id"] == EC2_IMAGE
    assert seen.extra["client_token"] == "r-placed"  # the request id makes AWS creates idempotent


def test_actuator_threads_can_share_one_adapter(ec2_cloud):
    from concurrent.futures import ThreadPoolExecutor

    cloud = ec2_cloud()
    with ThreadPoolExecutor(4) as pool:
        made = list(pool.map(lambda i: cloud.create_node(SMALL, f"par-{i}", {TAG_REQUEST: f"r-par-{i}"}),
                             range(20)))
    assert len({n.id for n in made}) == 20
    assert sorted(n.name for n in cloud.list_nodes()) == sorted(f"par-{i}" for i in range(20))


def test_an_unchanged_node_is_listed_as_the_very_same_record_and_a_changed_one_anew(ec2_cloud):
    """The controller knows an unchanged node by identity (cycle/plan_reuse.py): each listing
    hands back the last listing's object for a node the cloud reports alike, a new one when
    anything the core reads of it (here a drain tag) changed."""
    cloud = ec2_cloud()
    kept = cloud.create_node(SMALL, "kept", {TAG_REQUEST: "r-kept"})
    tagged = cloud.create_node(SMALL, "tagged", {TAG_REQUEST: "r-tagged"})
    cloud.list_nodes()  # the first listing that shows both running
    first = {n.id: n for n in cloud.list_nodes()}
    cloud.set_tags(tagged, {TAG_DRAIN: "1700000000:drain-7"})
    again = {n.id: n for n in cloud.list_nodes()}
    assert again[kept.id] is first[kept.id]
    assert again[tagged.id] is not first[tagged.id] and again[tagged.id].tags[TAG_DRAIN] == "1700000000:drain-7"
    assert {n.id: n for n in cloud.list_nodes()}[tagged.id] is again[tagged.id]
