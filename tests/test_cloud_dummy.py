"""The libcloud adapter over libcloud's own DummyNodeDriver (the embedded default's cloud), and the
adapter's option checks."""

from __future__ import annotations

import pytest

from nodemanager.cloud import (TAG_CLUSTER, TAG_DESTROY, TAG_REQUEST, TAG_SIZE, CloudDriver,
                               LibcloudCloud, reconcile_create, reconcile_destroy)
from nodemanager.model import Size
from nodemanager.configuration.settings import CloudSettings

SMALL = Size("small", cores=2, ram_mb=2048)


def dummy(clock=None, sleep=None, wall=None, **fields) -> LibcloudCloud:
    fields.setdefault("calls_per_second", 0.0)
    timing = {k: v for k, v in (("clock", clock), ("sleep", sleep), ("wall_clock", wall)) if v}
    return LibcloudCloud(CloudSettings(driver="dummy", cluster="demo", **fields), **timing)


def test_dummy_boot_list_tag_destroy():
    cloud = dummy(wall=lambda: 1_700_000_000.0)
    assert isinstance(cloud, CloudDriver)
    assert cloud.list_nodes() == []  # libcloud's two built-in dummy nodes carry no cluster tag
    a = cloud.create_node(SMALL, "demo-small-1", {TAG_REQUEST: "r1"})
    b = cloud.create_node(SMALL, "demo-small-2", {TAG_REQUEST: "r2"})
    listed = {n.id: n for n in cloud.list_nodes()}
    assert set(listed) == {a.id, b.id}
    assert listed[a.id].name == "demo-small-1" and listed[a.id].size == "small"
    assert listed[a.id].launched_at == 1_700_000_000.0
    assert listed[a.id].tags[TAG_CLUSTER] == "demo" and listed[a.id].tags[TAG_SIZE] == "small"
    assert listed[a.id].state == "running" and listed[a.id].private_ip

    cloud.set_tags(a, {TAG_DESTROY: "1700000100"})
    assert {n.id: n for n in cloud.list_nodes()}[a.id].tags[TAG_DESTROY] == "1700000100"
    cloud.set_tags(a, {TAG_DESTROY: ""})
    assert TAG_DESTROY not in {n.id: n for n in cloud.list_nodes()}[a.id].tags

    cloud.destroy_node(a)
    after = cloud.list_nodes()
    assert [n.id for n in after] == [b.id]
    assert reconcile_destroy(after, a.id) and not reconcile_destroy(after, b.id)
    cloud.destroy_node(a)  # already gone: success
    # ids stay unique after a destroy (libcloud's dummy would reuse len(list)+1)
    c = cloud.create_node(SMALL, "demo-small-3", {TAG_REQUEST: "r3"})
    assert c.id not in (a.id, b.id)
    assert reconcile_create(cloud.list_nodes(), "r3") == {n.id: n for n in cloud.list_nodes()}[c.id]


def test_static_tags_and_caller_tags_cannot_override_identity():
    cloud = dummy(tags={"team": "hep", "empty": ""})
    node = cloud.create_node(SMALL, "n", {TAG_CLUSTER: "someone-else", TAG_SIZE: "huge",
                                          TAG_REQUEST: "r"})
    assert node.tags[TAG_CLUSTER] == "demo" and node.tags[TAG_SIZE] == "small"
    assert node.tags["team"] == "hep" and "empty" not in node.tags


def test_rate_limit_per_second_with_injected_clock():
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    cloud = dummy(clock=lambda: now[0], sleep=sleep, calls_per_second=4.0)
    for i in range(8):
        cloud.create_node(SMALL, f"n{i}", {TAG_REQUEST: f"r{i}"})
    assert slept == pytest.approx([0.25] * 4)
    now[0] += 10  # idle time refills the bucket (up to one second's worth)
    slept.clear()
    for _ in range(4):
        cloud.list_nodes()
    assert slept == []


@pytest.mark.parametrize("fields, message", [
    ({"driver": "vmware"}, "[Cloud] driver: 'vmware'"),
    ({"driver": "ec2", "create_args": {}}, "[Cloud Create] image: required for driver ec2"),
    ({"driver": "ec2", "create_args": {"image": "ami-1", "flavour": "x"}},
     "[Cloud Create] flavour: not an option for driver ec2"),
    ({"driver": "ec2", "create_args": {"image": "ami-1", "spot": "maybe"}},
     "[Cloud Create] spot: 'maybe' is not valid"),
    ({"driver": "ec2", "create_args": {"image": "ami-1", "security_group_ids": "sg-1"}},
     "[Cloud Create] security_group_ids: needs subnet"),
    ({"driver": "ec2", "create_args": {"image": "ami-1"}, "driver_args": {"port": "http"}},
     "[Cloud] port: 'http' is not valid"),
])
def test_bad_options_name_the_option(fields, message):
    with pytest.raises(ValueError) as err:
        LibcloudCloud(CloudSettings(**fields))
    assert message in str(err.value)


def test_unknown_driver_argument_is_named_without_its_secret_value():
    settings = CloudSettings(driver="ec2", create_args={"image": "ami-1"},
                             driver_args={"key": "AKIDSHOWNOWHERE", "secret": "s3cr3t-value",
                                          "colour": "blue"})
    with pytest.raises(ValueError) as err:
        LibcloudCloud(settings)
    assert "colour" in str(err.value)
    assert "s3cr3t-value" not in str(err.value) and "AKIDSHOWNOWHERE" not in str(err.value)


def test_repr_hides_credentials():
    settings = CloudSettings(driver="ec2", create_args={"image": "ami-1"}, cluster="c",
                             driver_args={"key": "AKIDSHOWNOWHERE", "secret": "s3cr3t-value",
                                          "host": "127.0.0.1", "port": "1", "secure": "no"})
    cloud = LibcloudCloud(settings)
    assert "s3cr3t-value" not in repr(cloud) and "AKIDSHOWNOWHERE" not in repr(cloud)
    assert repr(cloud) == "LibcloudCloud(driver='ec2', cluster='c')"


def test_openstack_endpoint_down_is_transient_on_every_call():
    """Another provider through the same adapter: nothing listens, so calls fail transiently
    (after the create options were translated into libcloud objects)."""
    from tests.fixtures.moto import free_port
    from nodemanager.cloud import CloudError, ErrorKind

    settings = CloudSettings(
        driver="openstack", cluster="os", calls_per_second=0.0,
        driver_args={"key": "admin", "secret": "pw-not-shown", "ex_tenant_name": "demo",
                     "ex_force_auth_url": f"http://127.0.0.1:{free_port()}",
                     "ex_force_auth_version": "3.x_password", "timeout": "5"},
        create_args={"image": "img-1", "key_name": "ops", "security_groups": "a, b",
                     "networks": "net-1"})
    cloud = LibcloudCloud(settings)
    for call in (cloud.list_nodes, lambda: cloud.create_node(SMALL, "os-1", {TAG_REQUEST: "r"})):
        with pytest.raises(CloudError) as err:
            call()
        assert err.value.kind is ErrorKind.TRANSIENT
        assert "pw-not-shown" not in str(err.value)
