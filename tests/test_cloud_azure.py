"""The libcloud adapter against a local Azure Resource Manager through libcloud's real azure_arm
driver: AD login, create (NIC then VM, with our tags and [Cloud Create] options), list, tags,
delete and ARM's error replies. The driver reaches the local server through ``https_proxy`` and
trusts it through a CA made for the test (tests/fixtures/cloud_apis.py)."""

from __future__ import annotations

import datetime
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
from tests.fixtures.api_azure import SUBSCRIPTION, TENANT, AzureApi, arm_error
from tests.fixtures.cloud_apis import ApiServer, check_tag_round_trip, make_tls

SMALL = Size("small", cores=2, ram_mb=8192, instance_type="Standard_D2s_v3")
IMAGE = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
HOSTS = ("management.azure.com", "login.microsoftonline.com",
         "management.usgovcloudapi.net", "login.microsoftonline.us")
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHnodemanagertestkey nm@head"


@pytest.fixture
def azure_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AzureApi]:
    tls, ca_file = make_tls(tmp_path, HOSTS)
    monkeypatch.setattr(libcloud.security, "CA_CERTS_PATH", str(ca_file))
    server = ApiServer(tls)
    for name in ("https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(name, server.url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    try:
        yield AzureApi(server)
    finally:
        server.close()


@pytest.fixture
def azure_cloud(azure_api: AzureApi) -> Callable[..., LibcloudCloud]:
    def make(cluster: str = "", driver_args: dict[str, str] | None = None, **create: str) -> LibcloudCloud:
        create = {"image": IMAGE, "location": "eastus", "resource_group": "hpc", "network": "hpc-net",
                  "subnet": "nodes", "use_managed_disks": "yes", "ssh_key": SSH_KEY, **create}
        settings = CloudSettings(
            driver="azure_arm",
            driver_args={"tenant_id": TENANT, "subscription_id": SUBSCRIPTION,
                         "key": "app-client-id", "secret": "azure-secret-not-real",
                         **(driver_args or {})},
            create_args=create, cluster=cluster or f"az-{uuid.uuid4().hex[:8]}",
            calls_per_second=0.0)
        return LibcloudCloud(settings)

    return make


@pytest.fixture
def no_poll_wait(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """libcloud's azure_arm destroy waits for the VM to go before deleting its NIC and disk: its
    clock, injected (the waits asked for are recorded, none is slept)."""
    import libcloud.compute.drivers.azure_arm as azure_arm

    waits: list[float] = []
    monkeypatch.setattr(azure_arm.time, "sleep", waits.append)
    return waits


def test_create_sends_nic_then_vm_with_our_tags_and_lists_it_back(azure_cloud, azure_api):
    cloud = azure_cloud()
    node = cloud.create_node(SMALL, "az-small-1", {TAG_REQUEST: "req-1"})
    assert azure_api.server.sent("POST", rf"/{TENANT}/oauth2/token$")
    [nic] = azure_api.server.sent("PUT", r"/networkInterfaces/az-small-1-nic$")
    subnet = nic.json()["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"]
    assert subnet.endswith("/resourceGroups/hpc/providers/Microsoft.Network/virtualnetworks/hpc-net"
                           "/subnets/nodes")
    [put] = azure_api.server.sent("PUT", r"/resourceGroups/hpc/providers/Microsoft.Compute/"
                                         r"virtualMachines/az-small-1$")
    vm = put.json()
    assert vm["location"] == "eastus"
    assert vm["tags"] == {TAG_CLUSTER: cloud.cluster, TAG_SIZE: "small", TAG_REQUEST: "req-1"}
    props = vm["properties"]
    assert props["hardwareProfile"]["vmSize"] == "Standard_D2s_v3"
    assert props["storageProfile"]["imageReference"] == {
        "publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2",
        "version": "latest"}
    assert props["storageProfile"]["osDisk"]["managedDisk"]["storageAccountType"] == "Standard_LRS"
    assert props["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"] == SSH_KEY
    assert node.name == "az-small-1" and node.state == "pending"

    [listed] = cloud.list_nodes()
    assert listed.id == node.id and listed.size == "small" and listed.private_ip.startswith("10.1.0.")
    assert listed.tags[TAG_REQUEST] == "req-1"
    created = azure_api.vms[node.id.lower()]["properties"]["timeCreated"]
    assert listed.launched_at == datetime.datetime.fromisoformat(created).timestamp()


def test_list_keeps_only_our_cluster_and_maps_states(azure_cloud, azure_api):
    ours, theirs = azure_cloud(), azure_cloud()
    mine = ours.create_node(SMALL, "mine", {TAG_REQUEST: "r-1"})
    theirs.create_node(SMALL, "other", {TAG_REQUEST: "r-2"})
    assert [n.id for n in ours.list_nodes()] == [mine.id]
    vm = azure_api.vms[mine.id.lower()]
    for state, expected in (("Succeeded", "running"), ("Deleting", "terminated"), ("Failed", "error")):
        vm["properties"]["provisioningState"] = state
        assert [n.state for n in ours.list_nodes()] == [expected]


def test_set_tags_puts_and_drops(azure_cloud, azure_api):
    cloud = azure_cloud()
    node = cloud.create_node(SMALL, "t", {TAG_REQUEST: "r-t"})
    check_tag_round_trip(cloud, node)
    assert len(azure_api.server.sent("PATCH", r"/virtualMachines/t$")) == 2


def test_destroy_removes_vm_nic_and_disk_then_destroy_again_and_unknown(azure_cloud, azure_api,
                                                                         no_poll_wait):
    cloud = azure_cloud()
    node = cloud.create_node(SMALL, "doomed", {TAG_REQUEST: "r-d"})
    cloud.destroy_node(node)
    assert azure_api.server.sent("DELETE", r"/virtualMachines/doomed$")
    assert azure_api.server.sent("DELETE", r"/networkInterfaces/doomed-nic$")
    assert azure_api.server.sent("DELETE", r"/Microsoft.Compute/disks/doomed$")
    assert cloud.list_nodes() == [] and azure_api.nics == {}
    assert no_poll_wait == [10]  # libcloud waits for the VM to go before deleting its NIC
    cloud.destroy_node(node)  # ARM: the VM is unknown now, counted as destroyed
    cloud.destroy_node(replace(node, id=node.id.replace("doomed", "never-made"), name="never-made"))


def test_user_data_is_refused_at_start_with_the_reason(azure_cloud):
    with pytest.raises(ValueError, match=r"\[Cloud Create\] user_data"):
        azure_cloud(user_data="#!/bin/sh\necho hi\n")


def test_quota_and_rate_limit_replies(azure_cloud, azure_api):
    cloud = azure_cloud()
    azure_api.server.fail("PUT", r"/virtualMachines/q$", 409, arm_error(
        "OperationNotAllowed", "Operation could not be completed as it results in exceeding "
        "approved standardDSv3Family Cores quota."))
    with pytest.raises(CloudError) as err:
        cloud.create_node(SMALL, "q", {TAG_REQUEST: "r-q"})
    assert err.value.kind is ErrorKind.QUOTA and err.value.call == "create_node"
    azure_api.server.fail("GET", r"/providers/Microsoft.Compute/virtualMachines$", 429, arm_error(
        "TooManyRequests", "The request is being throttled."), {"Retry-After": "17"})
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.RATE_LIMIT and err.value.retry_after == 17.0


def test_auth_failure_is_permanent_and_hides_the_secret(azure_cloud, azure_api):
    cloud = azure_cloud()
    azure_api.server.fail("POST", r"/oauth2/token$", 401, {
        "error": "invalid_client",
        "error_description": "AADSTS7000215: Invalid client secret provided: azure-secret-not-real"})
    with pytest.raises(CloudError) as err:
        cloud.list_nodes()
    assert err.value.kind is ErrorKind.PERMANENT and "azure-secret-not-real" not in str(err.value)


def test_sovereign_cloud_environment_is_accepted(azure_cloud, azure_api):
    cloud = azure_cloud(driver_args={"cloud_environment": "AzureUSGovernment"})
    assert cloud.list_nodes() == []
    assert {r.host for r in azure_api.server.requests} == {"login.microsoftonline.us",
                                                           "management.usgovcloudapi.net"}
