"""The libcloud adapter against a local GCE API through libcloud's real GCE driver: service-account
login, create (with our metadata, network, disk size, preemptible scheduling), list, metadata
tags, delete and GCE's error replies. The driver reaches the local server through ``[Cloud]
proxy_url`` and trusts it through a CA made for the test (tests/fixtures/cloud_apis.py)."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import libcloud.security
import pytest

from nodemanager.cloud import (TAG_CLUSTER, TAG_REQUEST, TAG_SIZE, CloudError,
                               ErrorKind)
from nodemanager.cloud.libcloud_driver import LibcloudCloud
from nodemanager.model import Size
from nodemanager.configuration.settings import CloudSettings
from tests.fixtures.api_gce import PROJECT, ZONE, GceApi, gce_error
from tests.fixtures.cloud_apis import ApiServer, check_tag_round_trip, make_tls

SMALL = Size("small", cores=1, ram_mb=3840, instance_type="n1-standard-1")
IMAGE = "https://www.googleapis.com/compute/v1/projects/centos-cloud/global/images/centos-6-v20131120"
HOSTS = ("www.googleapis.com", "accounts.google.com", "oauth2.googleapis.com")


@pytest.fixture
def gce_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GceApi]:
    tls, ca_file = make_tls(tmp_path, HOSTS)
    monkeypatch.setattr(libcloud.security, "CA_CERTS_PATH", str(ca_file))
    server = ApiServer(tls)
    try:
        yield GceApi(server)
    finally:
        server.close()


@pytest.fixture
def service_key(tmp_path: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "sa.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return path


@pytest.fixture
def gce_cloud(gce_api: GceApi, service_key: Path, tmp_path: Path) -> Callable[..., LibcloudCloud]:
    def make(cluster: str = "", **create: str) -> LibcloudCloud:
        settings = CloudSettings(
            driver="gce",
            driver_args={"user_id": f"nodemanager@{PROJECT}.iam.gserviceaccount.com",
                         "key": str(service_key), "project": PROJECT, "datacenter": ZONE,
                         "auth_type": "SA", "credential_file": str(tmp_path / "token.json"),
                         "proxy_url": gce_api.server.url},
            create_args={"image": IMAGE, **create},
            cluster=cluster or f"gce-{uuid.uuid4().hex[:8]}", calls_per_second=0.0)
        return LibcloudCloud(settings)

    return make


def test_create_sends_our_metadata_and_options_and_lists_the_node_back(gce_cloud, gce_api):
    cloud = gce_cloud(network="default", disk_size="50", preemptible="yes")
    before = time.time()
    node = cloud.create_node(SMALL, "gce-small-1", {TAG_REQUEST: "req-1"})
    assert gce_api.server.sent("POST", r"/o/oauth2/token$")  # the service account logged in
    [sent] = gce_api.server.sent("POST", rf"/zones/{ZONE}/instances$")
    body = sent.json()
    assert body["name"] == "gce-small-1"
    assert body["machineType"].endswith(f"/zones/{ZONE}/machineTypes/n1-standard-1")
    assert {i["key"]: i["value"] for i in body["metadata"]["items"]} == {
        TAG_CLUSTER: cloud.cluster, TAG_SIZE: "small", TAG_REQUEST: "req-1"}
    assert body["scheduling"]["preemptible"] is True
    assert body["disks"][0]["initializeParams"]["diskSizeGb"] == 50
    assert body["disks"][0]["initializeParams"]["sourceImage"].endswith("centos-6-v20131120")
    assert body["networkInterfaces"][0]["network"].endswith("/global/networks/default")
    assert node.id and node.name == "gce-small-1" and node.state == "pending"

    [listed] = cloud.list_nodes()
    assert listed.id == node.id and listed.size == "small" and listed.private_ip
    assert listed.tags[TAG_REQUEST] == "req-1" and listed.tags[TAG_CLUSTER] == cloud.cluster
    assert before - 1 <= listed.launched_at <= time.time() + 1


def test_list_keeps_only_our_cluster_and_maps_states(gce_cloud, gce_api):
    ours, theirs = gce_cloud(), gce_cloud()
    mine = ours.create_node(SMALL, "mine", {TAG_REQUEST: "r-1"})
    theirs.create_node(SMALL, "other", {TAG_REQUEST: "r-2"})
    assert [n.id for n in ours.list_nodes()] == [mine.id]
    for status, state in (("RUNNING", "running"), ("STAGING", "pending"), ("TERMINATED", "stopped")):
        gce_api.instances["mine"]["status"] = status
        assert [n.state for n in ours.list_nodes()] == [state]


def test_nodes_in_another_zone_than_the_driver_datacenter_are_listed(gce_cloud, gce_api):
    """[Create] location may name another zone than [Cloud] datacenter: such nodes must be listed
    (else they are paid for and never seen)."""
    cloud = gce_cloud(location="europe-west1-a")
    node = cloud.create_node(SMALL, "far", {TAG_REQUEST: "r-far"})
    assert gce_api.instances["far"]["zone"].endswith("/zones/europe-west1-a")
    assert [n.id for n in cloud.list_nodes()] == [node.id]


def test_set_tags_puts_and_drops_through_set_metadata(gce_cloud, gce_api):
    cloud = gce_cloud()
    node = cloud.create_node(SMALL, "t", {TAG_REQUEST: "r-t"})
    check_tag_round_trip(cloud, node)
    assert len(gce_api.server.sent("POST", r"/instances/t/setMetadata$")) == 2


def test_destroy_then_destroy_again_and_unknown_name(gce_cloud, gce_api):
    cloud = gce_cloud()
    node = cloud.create_node(SMALL, "doomed", {TAG_REQUEST: "r-d"})
    cloud.destroy_node(node)
    assert gce_api.server.sent("DELETE", rf"/zones/{ZONE}/instances/doomed$")
    assert cloud.list_nodes() == []
    cloud.destroy_node(node)  # GCE: 404 notFound, counted as destroyed
    cloud.destroy_node(replace(node, id="123", name="never-made"))


def test_quota_and_capacity_failures_reported_in_the_operation(gce_cloud, gce_api):
    cloud = gce_cloud()
    gce_api.operation_error = {"errors": [{"code": "QUOTA_EXCEEDED",
                                           "message": "Quota 'CPUS' exceeded.  Limit: 24.0 in "
                                                      "region us-central1."}]}
    with pytest.raises(CloudError) as err:
        cloud.create_node(SMALL, "q", {TAG_REQUEST: "r-q"})
    assert err.value.kind is ErrorKind.QUOTA and err.value.call == "create_node"
    gce_api.operation_error = {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                                           "message": "The zone does not have enough resources "
                                                      "available to fulfill the request."}]}
    with pytest.raises(CloudError) as err:
        cloud.create_node(SMALL, "c", {TAG_REQUEST: "r-c"})
    assert err.value.kind is ErrorKind.CAPACITY
    assert cloud.list_nodes() == []


def test_rate_limit_and_server_errors(gce_cloud, gce_api):
    cloud = gce_cloud()
    gce_api.server.fail("GET", r"/aggregated/instances$", 429,
                        gce_error(429, "rateLimitExceeded", "Rate Limit Exceeded"))
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.RATE_LIMIT
    gce_api.server.fail("GET", r"/aggregated/instances$", 503,
                        gce_error(503, "backendError", "Backend Error"))
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.TRANSIENT
    assert cloud.list_nodes() == []


def test_a_spot_size_is_created_preemptible_and_an_on_demand_one_is_not(gce_cloud, gce_api):
    """[Size NAME] market = spot on GCE: libcloud 3.9.1 can only ask for a (legacy)
    preemptible VM; an on-demand size sends no preemptible scheduling."""
    cloud = gce_cloud()
    cloud.create_node(replace(SMALL, name="small-spot", market="spot"), "gce-spot-1", {TAG_REQUEST: "r-s"})
    cloud.create_node(SMALL, "gce-od-1", {TAG_REQUEST: "r-o"})
    spot, on_demand = (s.json() for s in gce_api.server.sent("POST", rf"/zones/{ZONE}/instances$"))
    assert spot["scheduling"]["preemptible"] is True
    assert not on_demand.get("scheduling", {}).get("preemptible")


def test_a_preempted_vm_is_listed_with_its_reclaim_time_not_as_a_live_node(gce_cloud, gce_api):
    """GCE stops a preempted VM (TERMINATED; libcloud says stopped) and keeps it, disks billing:
    the listing says when the cloud took it back, so the core destroys it."""
    cloud = gce_cloud()
    cloud.create_node(replace(SMALL, name="small-spot", market="spot"), "pre-1", {TAG_REQUEST: "r-p"})
    cloud.create_node(SMALL, "od-1", {TAG_REQUEST: "r-o"})
    for name in ("pre-1", "od-1"):
        gce_api.instances[name]["status"] = "TERMINATED"
    before = time.time()
    listed = {n.name: n for n in cloud.list_nodes()}
    assert listed["pre-1"].state == "stopped" and before <= listed["pre-1"].reclaim_at <= time.time()
    assert [n.reclaim_at for n in cloud.list_nodes() if n.name == "pre-1"] == [listed["pre-1"].reclaim_at]
    assert listed["od-1"].reclaim_at is None  # an on-demand VM stopped by someone: no reclaim
    gce_api.instances["pre-1"]["status"] = "RUNNING"
    assert {n.name: n.reclaim_at for n in cloud.list_nodes()}["pre-1"] is None
