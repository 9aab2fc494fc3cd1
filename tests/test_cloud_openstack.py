"""The libcloud adapter against a local OpenStack API (keystone v3 + nova), through libcloud's real
OpenStack driver: what the adapter sends, and what it makes of nova's replies."""

from __future__ import annotations

import base64
import time
import uuid
from dataclasses import replace
from typing import Iterator

import pytest

from nodemanager.cloud import (TAG_CLUSTER, TAG_DRAIN, TAG_REQUEST, TAG_SIZE, CloudError,
                               ErrorKind)
from nodemanager.cloud.libcloud_driver import LibcloudCloud
from nodemanager.model import Size
from nodemanager.configuration.settings import CloudSettings
from tests.fixtures.api_openstack import OpenStackApi, nova_error
from tests.fixtures.cloud_apis import ApiServer, check_tag_round_trip

SMALL = Size("small", cores=2, ram_mb=2048, instance_type="m1.small")
IMAGE = "7f9b8c2e-0000-4000-8000-000000000001"


@pytest.fixture
def openstack_api() -> Iterator[OpenStackApi]:
    server = ApiServer()
    try:
        yield OpenStackApi(server)
    finally:
        server.close()


def make_cloud(api: OpenStackApi, cluster: str = "", **create: str) -> LibcloudCloud:
    settings = CloudSettings(
        driver="openstack",
        driver_args={"key": "nodemanager", "secret": "os-password-not-real",
                     "ex_force_auth_url": api.server.url, "ex_force_auth_version": "3.x_password",
                     "ex_tenant_name": "hpc", "secure": "no"},
        create_args={"image": IMAGE, **create},
        cluster=cluster or f"os-{uuid.uuid4().hex[:8]}", calls_per_second=0.0)
    return LibcloudCloud(settings)


def test_create_sends_our_options_and_tags_and_lists_the_node_back(openstack_api):
    cloud = make_cloud(openstack_api, key_name="hpc-key", availability_zone="az-2",
                       security_groups="batch, ssh", networks="net-1",
                       user_data="#!/bin/sh\necho @NODE_NAME@\n")
    before = time.time()
    node = cloud.create_node(SMALL, "os-small-1", {TAG_REQUEST: "req-1"})
    [sent] = openstack_api.server.sent("POST", r"/servers$")
    server = sent.json()["server"]
    assert server["name"] == "os-small-1"
    assert server["flavorRef"] == "m1.small" and server["imageRef"] == IMAGE
    assert server["key_name"] == "hpc-key" and server["availability_zone"] == "az-2"
    assert server["security_groups"] == [{"name": "batch"}, {"name": "ssh"}]
    assert server["networks"] == [{"uuid": "net-1"}]
    assert base64.b64decode(server["user_data"]).decode() == "#!/bin/sh\necho os-small-1\n"
    assert server["metadata"] == {TAG_CLUSTER: cloud.cluster, TAG_SIZE: "small", TAG_REQUEST: "req-1"}
    assert node.state == "pending" and node.private_ip and node.private_ip.startswith("10.0.0.")

    [listed] = cloud.list_nodes()
    assert listed.id == node.id and listed.name == "os-small-1" and listed.size == "small"
    assert listed.tags[TAG_REQUEST] == "req-1"
    assert before - 1 <= listed.launched_at <= time.time() + 1


def test_list_keeps_only_our_cluster(openstack_api):
    ours, theirs = make_cloud(openstack_api), make_cloud(openstack_api)
    mine = ours.create_node(SMALL, "mine", {TAG_REQUEST: "r-1"})
    theirs.create_node(SMALL, "other", {TAG_REQUEST: "r-2"})
    openstack_api.servers["foreign"] = {**next(iter(openstack_api.servers.values())),
                                        "id": "foreign", "metadata": {}}
    assert [n.id for n in ours.list_nodes()] == [mine.id]


def test_states_map_from_nova_status(openstack_api):
    cloud = make_cloud(openstack_api)
    node = cloud.create_node(SMALL, "s", {TAG_REQUEST: "r-s"})
    for status, state in (("ACTIVE", "running"), ("ERROR", "error"), ("DELETED", "terminated")):
        openstack_api.servers[node.id]["status"] = status
        assert [n.state for n in cloud.list_nodes()] == [state]


def test_set_tags_puts_and_drops_with_one_metadata_call(openstack_api):
    cloud = make_cloud(openstack_api)
    node = cloud.create_node(SMALL, "t", {TAG_REQUEST: "r-t"})
    check_tag_round_trip(cloud, node)
    puts = openstack_api.server.sent("PUT", rf"/servers/{node.id}/metadata$")
    assert len(puts) == 2 and TAG_DRAIN not in puts[1].json()["metadata"]


def test_destroy_then_destroy_again_and_unknown_id(openstack_api):
    cloud = make_cloud(openstack_api)
    node = cloud.create_node(SMALL, "doomed", {TAG_REQUEST: "r-d"})
    cloud.destroy_node(node)
    assert openstack_api.server.sent("DELETE", rf"/servers/{node.id}$")
    assert cloud.list_nodes() == []
    cloud.destroy_node(node)  # nova: 404 itemNotFound, counted as destroyed
    cloud.destroy_node(replace(node, id=str(uuid.uuid4())))


def test_quota_error_on_create(openstack_api):
    cloud = make_cloud(openstack_api)
    openstack_api.server.fail("POST", r"/servers$", 403, nova_error(
        403, "forbidden", "Quota exceeded for instances: Requested 1, but already used 10 of 10 "
        "instances"))
    with pytest.raises(CloudError) as err:
        cloud.create_node(SMALL, "q", {TAG_REQUEST: "r-q"})
    assert err.value.kind is ErrorKind.QUOTA and err.value.call == "create_node"
    assert cloud.list_nodes() == []


def test_rate_limit_carries_retry_after(openstack_api):
    cloud = make_cloud(openstack_api)
    openstack_api.server.fail("GET", r"/servers/detail$", 429, nova_error(
        429, "overLimit", "This request was rate-limited."), {"Retry-After": "9"})
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.RATE_LIMIT and err.value.retry_after == 9.0


def test_server_error_is_transient_and_auth_failure_permanent_without_the_password(openstack_api):
    cloud = make_cloud(openstack_api)
    openstack_api.server.fail("GET", r"/servers/detail$", 500, nova_error(
        500, "computeFault", "The server has either erred or is incapable of performing the "
        "requested operation."))
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.TRANSIENT
    other = make_cloud(openstack_api)
    openstack_api.server.fail("POST", r"/v3/auth/tokens$", 401, {"error": {
        "code": 401, "title": "Unauthorized",
        "message": "The request you have made requires authentication."}})
    with pytest.raises(CloudError) as err:
        other.list_nodes()
    assert err.value.kind is ErrorKind.PERMANENT
    assert "os-password-not-real" not in str(err.value)
