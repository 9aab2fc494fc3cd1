"""What sets each libcloud provider apart, as one table: :data:`PROVIDER_TABLE`.

The libcloud adapter (:mod:`nodemanager.cloud.libcloud_driver`) has no per-provider branch: it
reads a :class:`Provider` row for the ``[Cloud] driver`` in use. A row says which ``[Cloud
Create]`` options the provider takes and as which ``create_node`` keywords, what its driver's
constructor needs, how it lists, how it tags, how a node the last listing did not hold is fetched,
what it buys spot capacity with, and what it checks before a create. Error replies are classified
by one mapping for all providers (:mod:`nodemanager.cloud.errors`: EC2 codes, GCE reasons, HTTP
statuses). Adding a libcloud provider is adding a row here, and its tests against a local API.

Nothing here imports libcloud at module level: the config reads the table without loading it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from nodemanager.configuration.options import CLOUD_CREATE_NUMBERS
from nodemanager.configuration.values import parse_bool
from nodemanager.model import CloudNode, Size

__all__ = ["Provider", "PROVIDER_TABLE", "CreateOption"]

# a [Cloud Create] option: (libcloud create_node keyword, converter of the option's text)
CreateOption = tuple[str, Callable[[str], Any]]
_DEFAULT_TIMEOUT = 60.0  # seconds; libcloud's default is no timeout, which would hang an actor


def _text(value: str) -> str:
    return value


def _list(value: str) -> list[str]:
    return [v for v in re.split(r"[,\s]+", value) if v]


def _no_check(create: Mapping[str, Any]) -> None:
    return None


def _no_objects(driver: Any, kwargs: dict[str, Any], image: str | None, location: str | None,
                request: str) -> None:
    return None


@dataclass(frozen=True)
class Provider:
    """One libcloud provider's row (see the module docstring).

    ``build_create`` turns the options' text into the provider's own objects in ``create_node``'s
    keyword arguments (image, location, subnet, security groups...); ``fetch_node`` gets a node the
    last listing did not hold when a call needs facts only the cloud has (GCE: its zone; Azure: its
    NIC and disk ids), None: a stand-in built from our record will do; ``set_tags`` writes a node's
    whole tag set (None: the provider adds and removes tags one by one, :attr:`tag_calls`).
    """

    name: str
    create_options: Mapping[str, CreateOption]
    tags_kwarg: str | None                     # the create_node keyword carrying our tags
    driver_defaults: Mapping[str, Any] = field(default_factory=lambda: {"timeout": _DEFAULT_TIMEOUT})
    kwargs_options: frozenset[str] = frozenset()   # constructor options read from **kwargs
    driver_options: frozenset[str] | None = None   # all constructor options (None: its signature's)
    tolerant_driver: bool = False              # wrap the driver class (EC2: odd replies tolerated)
    list_kwargs: Mapping[str, Any] = field(default_factory=dict)
    paged_listing: bool = False                # lists page by page, filtered by tag on the server
    own_state_words: bool = False              # extra["status"] is the cloud's own state word
    stopped_preemptible: bool = False          # a preemptible VM reclaimed stays listed, stopped
    spot_kwargs: Callable[[Size], dict[str, Any]] | None = None
    spot_max_price: bool = False
    no_spot: str = ""                          # why spot cannot be bought here
    check_create: Callable[[Mapping[str, Any]], None] = _no_check
    build_create: Callable[[Any, dict[str, Any], str | None, str | None, str], None] = _no_objects
    fetch_node: Callable[[Any, CloudNode], tuple[Callable[..., Any], tuple[Any, ...]]] | None = None
    set_tags: Callable[[Any], Callable[..., Any]] | None = None
    tag_calls: bool = False                    # tags are put and removed by key (EC2)
    in_process: bool = False                   # libcloud's dummy cloud: no API, nodes in memory
    dry_run: bool = False                      # mutating calls can be asked with DryRun (EC2)
    image_required: bool = True


# --- EC2 ---------------------------------------------------------------------------------------

def _ec2_check(create: Mapping[str, Any]) -> None:
    if "ex_security_group_ids" in create and "ex_subnet" not in create:
        raise ValueError("[Cloud Create] security_group_ids: needs subnet too (EC2 VPC launch)")


def _ec2_objects(d: Any, kwargs: dict[str, Any], image: str | None, location: str | None,
                 request: str) -> None:
    from libcloud.compute.base import NodeImage
    from libcloud.compute.drivers.ec2 import EC2NetworkSubnet, EC2NodeLocation, ExEC2AvailabilityZone
    if location:  # an availability zone of the driver's region
        zone = ExEC2AvailabilityZone(location, "available", d.region_name)
        kwargs["location"] = EC2NodeLocation(location, location, None, d, zone)
    kwargs["image"] = NodeImage(id=image, name=None, driver=d)  # type: ignore[arg-type]  # libcloud annotates str; image is required here
    kwargs["ex_clienttoken"] = request[:64]  # AWS makes a repeated create idempotent
    if "ex_subnet" in kwargs:
        kwargs["ex_subnet"] = EC2NetworkSubnet(kwargs["ex_subnet"], None, None)


# --- GCE ---------------------------------------------------------------------------------------

def _gce_objects(d: Any, kwargs: dict[str, Any], image: str | None, location: str | None,
                 request: str) -> None:
    # GCE's driver takes names: the size and image as text, the zone by name
    kwargs["size"] = kwargs["size"].id
    kwargs["image"] = image
    if location:
        kwargs["location"] = location


def _gce_fetch(d: Any, node: CloudNode) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return d.ex_get_node, (node.name, "all")


# --- Azure -------------------------------------------------------------------------------------

def _azure_check(create: Mapping[str, Any]) -> None:
    if "ex_customdata" in create:
        # libcloud 3.x base64-encodes it to bytes, which its JSON encoder then rejects
        raise ValueError("[Cloud Create] user_data: libcloud's azure_arm driver cannot send custom "
                         "data under Python 3; use a cloud-init image setting instead")


def _azure_objects(d: Any, kwargs: dict[str, Any], image: str | None, location: str | None,
                   request: str) -> None:
    from libcloud.compute.base import NodeAuthSSHKey
    from libcloud.compute.drivers.azure_arm import AzureImage
    publisher, offer, sku, version = (str(image).split(":") + ["", "", "", ""])[:4]
    kwargs["image"] = AzureImage(version or "latest", sku, offer, publisher, location, d)
    if "auth" in kwargs:
        kwargs["auth"] = NodeAuthSSHKey(kwargs["auth"])


def _azure_fetch(d: Any, node: CloudNode) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return d.ex_get_node, (node.id,)


# --- OpenStack ---------------------------------------------------------------------------------

def _openstack_objects(d: Any, kwargs: dict[str, Any], image: str | None, location: str | None,
                       request: str) -> None:
    from libcloud.compute.base import NodeImage
    from libcloud.compute.drivers.openstack import OpenStackNetwork, OpenStackSecurityGroup
    kwargs["image"] = NodeImage(id=image, name=None, driver=d)  # type: ignore[arg-type]  # libcloud annotates str; image is required here
    if "ex_security_groups" in kwargs:
        kwargs["ex_security_groups"] = [OpenStackSecurityGroup(None, None, g, None, d)
                                        for g in kwargs["ex_security_groups"]]
    if "networks" in kwargs:
        kwargs["networks"] = [OpenStackNetwork(n, None, None, d) for n in kwargs["networks"]]


PROVIDER_TABLE: Mapping[str, Provider] = {p.name: p for p in (
    Provider(
        name="ec2",
        create_options={
            "key_name": ("ex_keyname", _text),
            "subnet": ("ex_subnet", _text),
            "security_groups": ("ex_security_groups", _list),
            "security_group_ids": ("ex_security_group_ids", _list),
            "user_data": ("ex_userdata", _text),
            "iam_profile": ("ex_iamprofile", _text),
            "placement_group": ("ex_placement_group", _text),
            "spot": ("ex_spot", parse_bool),
            "spot_max_price": ("ex_spot_max_price", CLOUD_CREATE_NUMBERS["spot_max_price"]),
            "ebs_optimized": ("ex_ebs_optimized", parse_bool),
            "assign_public_ip": ("ex_assign_public_ip", parse_bool),
        },
        tags_kwarg="ex_metadata",
        driver_defaults={"timeout": _DEFAULT_TIMEOUT, "signature_version": "4"},
        tolerant_driver=True, paged_listing=True, own_state_words=True,
        spot_kwargs=lambda size: {"ex_spot": True, "ex_spot_max_price": size.max_price},
        spot_max_price=True,
        check_create=_ec2_check, build_create=_ec2_objects, tag_calls=True, dry_run=True,
    ),
    Provider(
        name="gce",
        create_options={
            "network": ("ex_network", _text),
            "subnet": ("ex_subnetwork", _text),
            "preemptible": ("ex_preemptible", parse_bool),
            "disk_size": ("ex_disk_size", CLOUD_CREATE_NUMBERS["disk_size"]),
            "service_account": ("ex_service_accounts",
                                lambda v: [{"email": v, "scopes": ["cloud-platform"]}]),
        },
        tags_kwarg="ex_metadata",
        # GCE lists only [Cloud] datacenter's zone unless told "all"; [Create] location may differ
        list_kwargs={"ex_zone": "all"},
        stopped_preemptible=True,
        # libcloud 3.9.1 knows no provisioningModel SPOT: legacy preemptible VMs
        spot_kwargs=lambda size: {"ex_preemptible": True},
        build_create=_gce_objects, fetch_node=_gce_fetch,
        set_tags=lambda d: d.ex_set_node_metadata,
    ),
    Provider(
        name="azure_arm",
        create_options={
            "resource_group": ("ex_resource_group", _text),
            "storage_account": ("ex_storage_account", _text),
            "blob_container": ("ex_blob_container", _text),
            "network": ("ex_network", _text),
            "subnet": ("ex_subnet", _text),
            "user_name": ("ex_user_name", _text),
            "user_data": ("ex_customdata", _text),
            "ssh_key": ("auth", _text),
            "use_managed_disks": ("ex_use_managed_disks", parse_bool),
        },
        tags_kwarg="ex_tags",
        kwargs_options=frozenset({"cloud_environment"}),
        no_spot="libcloud 3.9.1's azure_arm create_node cannot send priority/evictionPolicy, "
                "so it would boot an on-demand VM at the on-demand price",
        check_create=_azure_check, build_create=_azure_objects, fetch_node=_azure_fetch,
        set_tags=lambda d: lambda raw, tags: d.ex_create_tags(raw, tags, replace=True),
    ),
    Provider(
        name="openstack",
        create_options={
            "key_name": ("ex_keyname", _text),
            "user_data": ("ex_userdata", _text),
            "availability_zone": ("ex_availability_zone", _text),
            "security_groups": ("ex_security_groups", _list),
            "networks": ("networks", _list),
        },
        tags_kwarg="ex_metadata",
        no_spot="OpenStack has no spot market",
        build_create=_openstack_objects,
        set_tags=lambda d: d.ex_set_metadata,
    ),
    Provider(
        name="dummy",
        create_options={},
        tags_kwarg=None,
        driver_defaults={"creds": "0"},
        driver_options=frozenset({"creds"}),
        no_spot="libcloud's dummy driver has no spot market",
        in_process=True, image_required=False,
    ),
)}
