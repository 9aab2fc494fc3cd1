"""The cloud adapter over Apache libcloud: ``LibcloudCloud`` implements :class:`CloudDriver`.

The provider is chosen by name through libcloud's ``get_driver``: ``ec2``, ``gce``, ``azure_arm``,
``openstack`` or ``dummy`` (libcloud's in-process ``DummyNodeDriver``, for the embedded default).
``[Cloud]`` options (``CloudSettings.driver_args``) are the libcloud constructor's keyword
arguments; ``[Cloud Create]`` options (``CloudSettings.create_args``) are translated per provider
(see :data:`CREATE_OPTIONS`). Credentials never appear in logs, ``repr`` or error messages.

What the adapter does, and what it leaves to the daemon:

- one listing per :meth:`LibcloudCloud.list_nodes` (libcloud's ``list_nodes``; on EC2 one
  ``DescribeInstances`` per page of 1000), filtered to this cluster's nodes by the
  ``nodemanager-cluster`` tag (EC2: a server-side ``tag:`` filter; others: client-side on the
  node's tags/metadata). Terminated and terminating nodes are listed with their state
  (see :data:`nodemanager.cloud.reconcile.GONE_STATES`) so the core can ignore them.
- every failure is raised as a classified :class:`CloudError` (``nodemanager.cloud.errors``). The
  adapter never retries: the daemon's actors schedule retries with backoff, honouring
  ``retry_after``.
- a create that raised but made the VM, and a destroy that raised but removed it, are settled by
  the daemon with the next listing (``nodemanager.cloud.reconcile``); the adapter adds the
  request-id tag (and, on EC2, passes it as ``ClientToken`` so AWS itself makes a repeated create
  idempotent). A destroy of a node the cloud no longer knows is a success here already.
- libcloud calls are spaced by a token bucket (``calls_per_second``; one token per libcloud
  call, an EC2 listing takes one per page) and serialised (a libcloud driver's connection is not
  thread-safe), so several actuator threads may share one adapter. libcloud's own retry
  (``LIBCLOUD_RETRY_FAILED_HTTP_REQUESTS``) is off by default; leave it off.
- the cloud's clock is measured against ours on every reply: :attr:`LibcloudCloud.clock_skew`
  is the last reply's ``Date`` header (one-second resolution) minus our wall clock halfway through
  the call (None until a reply carried one); the controller puts launch times on our clock with it.
- the libcloud driver is built on the first call (Azure and GCE authenticate over the network in
  their constructors); option names and values are checked when the adapter is built, and a bad
  one raises ValueError naming the ``[Cloud]``/``[Cloud Create]`` option.

Tested: ``ec2`` (spot included) against moto_server through libcloud's real EC2 driver;
``gce``, ``azure_arm`` and ``openstack`` through libcloud's real drivers against local servers that
answer as the providers' APIs document (tests/fixtures/api_*.py: create, list, tags, destroy, error
replies); ``dummy``. GCE and Azure calls on a node need facts only the cloud has (its zone; its NIC
and disk ids): a node not in the last listing is fetched by name or id first. Azure custom data
(``user_data``) is refused: libcloud 3's azure_arm driver cannot encode it. A ``[Size] market =
spot`` is bought per provider as :mod:`nodemanager.cloud.markets` says (Azure spot is refused at
start: libcloud's azure_arm ``create_node`` takes no ``priority``/``evictionPolicy``).
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import inspect
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from libcloud.compute.base import Node, NodeImage, NodeLocation, NodeSize
from libcloud.compute.providers import get_driver
from libcloud.compute.types import NodeState

from nodemanager.cloud.ec2compat import tolerant_ec2_driver
from nodemanager.cloud.errors import classify
from nodemanager.cloud.markets import market_create_kwargs
from nodemanager.cloud.permissions import Permission, ec2_dry_run
from nodemanager.cloud.port import (PROVIDERS, TAG_CLUSTER, TAG_DRAIN, TAG_REQUEST, TAG_SIZE,
                                    CloudError, ErrorKind, image_required)
from nodemanager.cloud.ratelimit import TokenBucket
from nodemanager.configuration.values import parse_bool
from nodemanager.core import date_skew
from nodemanager.model import CloudNode, Size, frozen_map
from nodemanager.configuration.settings import CloudSettings

__all__ = ["LibcloudCloud", "PROVIDERS", "CREATE_OPTIONS", "USER_DATA_PLACEHOLDERS", "node_tags"]

log = logging.getLogger(__name__)

_SECRET_WORDS = re.compile(r"key|secret|password|token|credential|creds", re.IGNORECASE)
_DEFAULT_TIMEOUT = 60.0  # seconds; libcloud's default is no timeout, which would hang an actor


def _text(value: str) -> str:
    return value


def _list(value: str) -> list[str]:
    return [v for v in re.split(r"[,\s]+", value) if v]


_DRIVER_ARG_TYPES: Mapping[str, Callable[[str], Any]] = {
    "port": int, "secure": parse_bool, "timeout": float, "retry_delay": float, "backoff": float,
}

# [Cloud Create] option -> (libcloud create_node keyword, converter), per provider. ``image`` and
# ``location`` are handled for every provider.
CREATE_OPTIONS: Mapping[str, Mapping[str, tuple[str, Callable[[str], Any]]]] = {
    "ec2": {
        "key_name": ("ex_keyname", _text),
        "subnet": ("ex_subnet", _text),
        "security_groups": ("ex_security_groups", _list),
        "security_group_ids": ("ex_security_group_ids", _list),
        "user_data": ("ex_userdata", _text),
        "iam_profile": ("ex_iamprofile", _text),
        "placement_group": ("ex_placement_group", _text),
        "spot": ("ex_spot", parse_bool),
        "spot_max_price": ("ex_spot_max_price", float),
        "ebs_optimized": ("ex_ebs_optimized", parse_bool),
        "assign_public_ip": ("ex_assign_public_ip", parse_bool),
    },
    "gce": {
        "network": ("ex_network", _text),
        "subnet": ("ex_subnetwork", _text),
        "preemptible": ("ex_preemptible", parse_bool),
        "disk_size": ("ex_disk_size", int),
        "service_account": ("ex_service_accounts", lambda v: [{"email": v, "scopes": ["cloud-platform"]}]),
    },
    "azure_arm": {
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
    "openstack": {
        "key_name": ("ex_keyname", _text),
        "user_data": ("ex_userdata", _text),
        "availability_zone": ("ex_availability_zone", _text),
        "security_groups": ("ex_security_groups", _list),
        "networks": ("networks", _list),
    },
    "dummy": {},
}

# The create_node keywords that carry a boot script, and the placeholders filled in per node.
_USER_DATA_KWARGS = ("ex_userdata", "ex_customdata")
USER_DATA_PLACEHOLDERS = ("@NODE_NAME@", "@SIZE@", "@CLUSTER@")
_USER_DATA_MAX = 16384  # bytes: EC2's limit for user data, the smallest of the clouds'

# The create_node keyword that carries our tags, per provider (dummy: kept in node.extra).
_TAGS_KWARG = {"ec2": "ex_metadata", "gce": "ex_metadata", "azure_arm": "ex_tags",
               "openstack": "ex_metadata", "dummy": None}


def node_tags(node: Node) -> dict[str, str]:
    """A libcloud node's tags: ``extra['tags']`` (EC2, Azure, dummy) or metadata (GCE, OpenStack)."""
    extra = node.extra or {}
    tags: dict[str, str] = {}
    meta = extra.get("metadata")
    if isinstance(meta, Mapping):
        items = meta.get("items")
        if isinstance(items, list):  # GCE: {"items": [{"key": k, "value": v}], "fingerprint": ...}
            tags.update({str(i.get("key")): str(i.get("value", "")) for i in items if isinstance(i, Mapping)})
        else:
            tags.update({str(k): str(v) for k, v in meta.items() if k != "fingerprint"})
    raw = extra.get("tags")
    if isinstance(raw, Mapping):
        tags.update({str(k): str(v) for k, v in raw.items()})
    return tags


def _to_epoch(value: Any) -> float | None:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return value.timestamp()
    if isinstance(value, str) and value:
        try:
            return _to_epoch(_dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class _Options:
    provider: str
    driver_kwargs: Mapping[str, Any]
    image: str | None
    location: str | None
    create_kwargs: Mapping[str, Any]


def _parse_options(settings: CloudSettings) -> _Options:
    """Check and convert ``[Cloud]`` / ``[Cloud Create]`` options; ValueError names the option."""
    provider = settings.driver
    if provider not in PROVIDERS:
        raise ValueError(f"[Cloud] driver: {provider!r} is not a libcloud driver this adapter supports "
                         f"({', '.join(PROVIDERS)})")
    kwargs: dict[str, Any] = {}
    for name, value in settings.driver_args.items():
        convert = _DRIVER_ARG_TYPES.get(name, _text)
        try:
            kwargs[name] = convert(value)
        except ValueError as exc:
            shown = "(hidden)" if _SECRET_WORDS.search(name) else repr(value)
            raise ValueError(f"[Cloud] {name}: {shown} is not valid: {exc}") from None
    if provider == "dummy":
        kwargs.setdefault("creds", "0")
    else:
        kwargs.setdefault("timeout", _DEFAULT_TIMEOUT)
    if provider == "ec2":
        kwargs.setdefault("signature_version", "4")

    known = CREATE_OPTIONS[provider]
    create: dict[str, Any] = {}
    image = location = None
    for name, value in settings.create_args.items():
        if name == "image":
            image = value
        elif name == "user_data_file" and "user_data" in known:
            create[known["user_data"][0]] = _read_user_data(value)
        elif name == "location":
            location = value
        elif name in known:
            kw, convert = known[name]
            try:
                create[kw] = convert(value)
            except ValueError as exc:
                raise ValueError(f"[Cloud Create] {name}: {value!r} is not valid: {exc}") from None
        else:
            names = ", ".join(sorted(("image", "location", *known,
                                      *(("user_data_file",) if "user_data" in known else ()))))
            raise ValueError(f"[Cloud Create] {name}: not an option for driver {provider} "
                             f"(known: {names})")
    if provider == "azure_arm" and "ex_customdata" in create:
        # libcloud 3.x base64-encodes it to bytes, which its JSON encoder then rejects
        raise ValueError("[Cloud Create] user_data: libcloud's azure_arm driver cannot send custom "
                         "data under Python 3; use a cloud-init image setting instead")
    if image_required(provider) and not image:
        raise ValueError(f"[Cloud Create] image: required for driver {provider}")
    if provider == "ec2" and "ex_security_group_ids" in create and "ex_subnet" not in create:
        raise ValueError("[Cloud Create] security_group_ids: needs subnet too (EC2 VPC launch)")
    return _Options(provider, kwargs, image, location, create)


def _read_user_data(path: str) -> str:
    """The boot script in ``path`` (``[Cloud Create] user_data_file``); ValueError says why not."""
    import os
    import stat

    where = f"[Cloud Create] user_data_file: {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not hang the start
    except OSError as exc:
        raise ValueError(f"{where}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{where}: not a regular file")
        data = os.read(fd, _USER_DATA_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > _USER_DATA_MAX:
        raise ValueError(f"{where}: over {_USER_DATA_MAX} bytes, EC2's limit for user data")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: not UTF-8 text") from None


_CONNECTION_KWARGS = frozenset({"timeout", "retry_delay", "backoff", "proxy_url"})
# Options a driver reads from **kwargs, which its signature does not show.
_KWARGS_OPTIONS: Mapping[str, frozenset[str]] = {"azure_arm": frozenset({"cloud_environment"})}


def _check_driver_args(provider: str, cls: type, kwargs: Mapping[str, Any]) -> None:
    """libcloud drivers swallow unknown keyword arguments: name them before they are ignored."""
    if provider == "dummy":
        known = {"creds"}
    else:
        known = set(_CONNECTION_KWARGS | _KWARGS_OPTIONS.get(provider, frozenset()))
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is not None:
                known |= {n for n, p in inspect.signature(init).parameters.items()
                          if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for name in kwargs:
        if name not in known:
            raise ValueError(f"[Cloud] {name}: not an option of libcloud's {provider} driver "
                             f"(known: {', '.join(sorted(known))})")


class LibcloudCloud:
    """A :class:`CloudDriver` over one libcloud compute driver (see the module docstring).

    ``clock``/``sleep`` drive the per-second rate limit (inject them in tests); ``wall_clock``
    stamps the launch time of dummy-driver nodes, which libcloud's dummy cloud does not record.
    """

    def __init__(self, settings: CloudSettings, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 wall_clock: Callable[[], float] = time.time, sizes: Sequence[Size] = ()) -> None:
        self._settings = settings
        self._options = _parse_options(settings)
        self._size_options: dict[tuple[tuple[str, str], ...], tuple[_Options, dict[str, str]]] = {}
        for size in sizes:  # a size's bad image or boot script is an error before anything starts
            self._options_for(size)
        self.provider = self._options.provider
        self.cluster = settings.cluster
        self._static_tags = dict(settings.tags)
        self._secrets = tuple(str(v) for k, v in settings.driver_args.items()
                              if _SECRET_WORDS.search(k) and len(str(v)) >= 4)
        self._bucket = TokenBucket(settings.calls_per_second, clock=clock, sleep=sleep)
        self._wall_clock = wall_clock
        self._lock = threading.RLock()
        self._raw: dict[str, Node] = {}
        self._first_seen: dict[str, float] = {}
        cls = get_driver(self.provider)
        if self.provider == "ec2":
            cls = tolerant_ec2_driver(cls)  # type: ignore[arg-type]  # mypy takes a class for unhashable (NodeDriver.__hash__); classes hash by identity
        _check_driver_args(self.provider, cls, self._options.driver_kwargs)
        self._driver_cls = cls
        self._driver_obj: Any = None
        self.clock_skew: float | None = None
        self._dated: Any = None   # the libcloud reply clock_skew was last measured on

    @property
    def _driver(self) -> Any:
        """The libcloud driver, built on first use: some (Azure, GCE) authenticate over the network
        in their constructor, and a failure there must be a classified, retryable call error."""
        if self._driver_obj is None:
            with self._lock:
                if self._driver_obj is None:
                    try:
                        self._driver_obj = self._driver_cls(**self._options.driver_kwargs)
                    except TypeError as exc:
                        raise CloudError(ErrorKind.PERMANENT, "[Cloud] options do not fit libcloud's "
                                         f"{self.provider} driver: {self._scrub(str(exc))}",
                                         call="connect") from None
                    except Exception as exc:
                        raise classify(exc, "connect", self._secrets) from None
        return self._driver_obj

    def __repr__(self) -> str:
        return f"LibcloudCloud(driver={self.provider!r}, cluster={self.cluster!r})"

    def _scrub(self, text: str) -> str:
        for value in self._secrets:
            text = text.replace(value, "***")
        return text

    def _call(self, call: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One libcloud call: wait for the rate limit, run it alone, classify what it raises."""
        self._bucket.acquire()
        with self._lock:
            sent = self._wall_clock()
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                raise classify(exc, call, self._secrets) from None
            finally:
                self._measure_skew(sent)

    def _measure_skew(self, sent: float) -> None:
        """Set :attr:`clock_skew` from the Date header of the reply libcloud just received (an
        error reply counts too; a call that got no new reply leaves it as it was)."""
        connection = getattr(getattr(self._driver_obj, "connection", None), "connection", None)
        reply = getattr(connection, "response", None)
        if reply is None or reply is self._dated:
            return
        self._dated = reply
        header = (getattr(reply, "headers", None) or {}).get("Date")
        try:
            date = email.utils.parsedate_to_datetime(header).timestamp() if header else None
        except (TypeError, ValueError):
            date = None
        if date is not None:
            self.clock_skew = date_skew(date, sent, self._wall_clock())

    # --- listing -------------------------------------------------------------------------------

    def list_nodes(self) -> list[CloudNode]:
        """This cluster's nodes, including terminated/terminating ones (with that state)."""
        if self.provider == "ec2":
            raw, token = [], None
            while True:  # one rate-limited call per page
                page, token = self._call("list_nodes", self._driver.ex_list_nodes_page,
                                         {f"tag:{TAG_CLUSTER}": self.cluster}, token)
                raw.extend(page)
                if not token:
                    break
        else:
            # GCE lists only [Cloud] datacenter's zone unless told "all"; [Create] location may differ
            raw = self._call("list_nodes", self._driver.list_nodes,
                             **({"ex_zone": "all"} if self.provider == "gce" else {}))
        nodes, cache = [], {}
        for item in raw:
            tags = node_tags(item)
            if tags.get(TAG_CLUSTER) != self.cluster:
                continue
            cache[str(item.id)] = item
            nodes.append(self._to_cloud_node(item, tags))
        self._raw = cache
        self._first_seen = {k: v for k, v in self._first_seen.items()
                            if k.removeprefix("preempted:") in cache}
        return nodes

    def _state(self, node: Node) -> str:
        status = (node.extra or {}).get("status")
        if self.provider == "ec2" and isinstance(status, str) and status:
            return status  # EC2's own words, e.g. shutting-down (libcloud says "unknown")
        state = node.state
        return str(state.value if isinstance(state, NodeState) else state or "unknown")

    def _launched_at(self, node: Node) -> float:
        extra = node.extra or {}
        for value in (node.created_at, extra.get("launch_time"), extra.get("creationTimestamp"),
                      extra.get("created"), (extra.get("properties") or {}).get("timeCreated")):
            epoch = _to_epoch(value)
            if epoch is not None:
                return epoch
        # Last resort for a driver that reports no launch time: when this process first saw it.
        return self._first_seen.setdefault(str(node.id), self._wall_clock())

    def _to_cloud_node(self, node: Node, tags: Mapping[str, str]) -> CloudNode:
        extra = node.extra or {}
        size = tags.get(TAG_SIZE) or extra.get("instance_type") or getattr(node.size, "id", None) or ""
        hostname = extra.get("private_dns") or extra.get("hostname") or None
        return CloudNode(
            id=str(node.id), name=str(node.name), size=str(size),
            launched_at=self._launched_at(node), state=self._state(node),
            private_ip=node.private_ips[0] if node.private_ips else None,
            hostname=str(hostname) if hostname else None, tags=frozen_map(tags),
            reclaim_at=self._preempted_at(node))

    def _preempted_at(self, node: Node) -> float | None:
        """When this process first listed a preemptible GCE VM stopped (TERMINATED; libcloud says
        stopped, and gives no stop time): the reclaim is over, but the VM and its disks stay (and
        bill) until destroyed. None for any other VM."""
        extra = node.extra or {}
        if self.provider != "gce" or not (extra.get("scheduling") or {}).get("preemptible"):
            return None
        if extra.get("status") != "TERMINATED":
            return None
        return self._first_seen.setdefault(f"preempted:{node.id}", self._wall_clock())

    # --- create --------------------------------------------------------------------------------

    def _options_for(self, size: Size) -> tuple[_Options, dict[str, str]]:
        """The create options and extra tags of ``size``: ``[Cloud Create]`` with the size's own
        ``image``/``user_data``/``user_data_file``/``tag_*`` over it; ValueError names the size."""
        if not size.create_args:
            return self._options, {}
        found = self._size_options.get(size.create_args)
        if found is None:
            own = {k: v for k, v in size.create_args if not k.startswith("tag_")}
            if "user_data" in own or "user_data_file" in own:  # the size's script replaces both
                base = {k: v for k, v in self._settings.create_args.items()
                        if k not in ("user_data", "user_data_file")}
            else:
                base = dict(self._settings.create_args)
            try:
                opts = _parse_options(replace(self._settings, create_args=frozen_map({**base, **own})))
            except ValueError as exc:
                raise ValueError(f"[Size {size.name}] {str(exc).removeprefix('[Cloud Create] ')}") from None
            found = (opts, {k[4:]: v for k, v in size.create_args if k.startswith("tag_")})
            self._size_options[size.create_args] = found
        return found

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        """Boot one node. Tags: ``[Cloud] tags``, then ``tags``, then cluster, size and request id
        (a request id is made up when ``tags`` has none). Empty values are left out."""
        request = tags.get(TAG_REQUEST) or uuid.uuid4().hex
        opts, size_tags = self._options_for(size)
        all_tags = {k: str(v) for k, v in {**self._static_tags, **size_tags, **tags}.items()
                    if v not in ("", None)}
        all_tags.update({TAG_CLUSTER: self.cluster, TAG_SIZE: size.name, TAG_REQUEST: request})
        kwargs = self._create_kwargs(size, name, all_tags, request, opts)
        created = self._call("create_node", self._driver.create_node, **kwargs)
        if isinstance(created, list):
            if len(created) != 1:
                raise CloudError(ErrorKind.TRANSIENT, f"cloud returned {len(created)} nodes for one "
                                 f"create (request {request})", call="create_node")
            created = created[0]
        if self.provider == "dummy":
            self._stamp_dummy(created, name, all_tags)
        self._raw[str(created.id)] = created
        log.debug("cloud create: node %s name %s size %s request %s", created.id, name, size.name, request)
        return self._to_cloud_node(created, {**node_tags(created), **all_tags})

    def _create_kwargs(self, size: Size, name: str, tags: Mapping[str, str],
                       request: str, opts: _Options) -> dict[str, Any]:
        d = self._driver
        if self.provider == "dummy":
            return {"name": name, "size": None, "image": None}
        kwargs: dict[str, Any] = dict(opts.create_kwargs)
        kwargs.update(market_create_kwargs(self.provider, size))
        kwargs["name"] = name
        for kw in _USER_DATA_KWARGS:
            if kw in kwargs:  # the VM learns the name it must join the scheduler as
                kwargs[kw] = (kwargs[kw].replace("@NODE_NAME@", name).replace("@SIZE@", size.name)
                              .replace("@CLUSTER@", self.cluster))
        tags_kwarg = _TAGS_KWARG[self.provider]
        if tags_kwarg:
            kwargs[tags_kwarg] = dict(tags)
        location = None
        if opts.location:
            location = NodeLocation(id=opts.location, name=opts.location, country=None, driver=d)  # type: ignore[arg-type]  # libcloud annotates str; its drivers pass None
        if self.provider == "gce":
            kwargs.update(size=size.cloud_type, image=opts.image)
            if opts.location:
                kwargs["location"] = opts.location
            return kwargs
        kwargs["size"] = NodeSize(id=size.cloud_type, name=size.cloud_type, ram=size.ram_mb, disk=0,
                                  bandwidth=None, price=size.price, driver=d)
        if location is not None:
            kwargs["location"] = location
        if self.provider == "ec2":
            from libcloud.compute.drivers.ec2 import (EC2NetworkSubnet, EC2NodeLocation,
                                                      ExEC2AvailabilityZone)
            if opts.location:  # an availability zone of the driver's region
                zone = ExEC2AvailabilityZone(opts.location, "available", d.region_name)
                kwargs["location"] = EC2NodeLocation(opts.location, opts.location, None, d, zone)
            kwargs["image"] = NodeImage(id=opts.image, name=None, driver=d)  # type: ignore[arg-type]  # libcloud annotates str; image is required here (image_required)
            kwargs["ex_clienttoken"] = request[:64]
            if "ex_subnet" in kwargs:
                kwargs["ex_subnet"] = EC2NetworkSubnet(kwargs["ex_subnet"], None, None)
        elif self.provider == "azure_arm":
            from libcloud.compute.base import NodeAuthSSHKey
            from libcloud.compute.drivers.azure_arm import AzureImage
            publisher, offer, sku, version = (str(opts.image).split(":") + ["", "", "", ""])[:4]
            kwargs["image"] = AzureImage(version or "latest", sku, offer, publisher,
                                         opts.location, d)
            if "auth" in kwargs:
                kwargs["auth"] = NodeAuthSSHKey(kwargs["auth"])
        elif self.provider == "openstack":
            from libcloud.compute.drivers.openstack import (OpenStackNetwork,
                                                            OpenStackSecurityGroup)
            kwargs["image"] = NodeImage(id=opts.image, name=None, driver=d)  # type: ignore[arg-type]  # libcloud annotates str; image is required here (image_required)
            if "ex_security_groups" in kwargs:
                kwargs["ex_security_groups"] = [OpenStackSecurityGroup(None, None, g, None, d)
                                                for g in kwargs["ex_security_groups"]]
            if "networks" in kwargs:
                kwargs["networks"] = [OpenStackNetwork(n, None, None, d) for n in kwargs["networks"]]
        return kwargs

    def _stamp_dummy(self, node: Node, name: str, tags: Mapping[str, str]) -> None:
        """libcloud's dummy cloud ignores name and tags, reuses ids after a destroy and records no
        launch time: record them on its node, which is the dummy cloud's own state."""
        node.id = f"dummy-{uuid.uuid4().hex[:12]}"
        node.name = name
        node.private_ips = [node.public_ips[0]] if node.public_ips else []
        node.extra = {**(node.extra or {}), "tags": dict(tags)}
        node.created_at = _dt.datetime.fromtimestamp(self._wall_clock(), _dt.timezone.utc)

    # --- destroy and tags ----------------------------------------------------------------------

    def _raw_node(self, node: CloudNode, call: str) -> Node:
        cached = self._raw.get(node.id)
        if cached is not None:
            return cached
        # GCE calls need the node's zone, Azure's its NIC and disk ids: only the cloud knows them
        if self.provider == "gce":
            return self._call(call, self._driver.ex_get_node, node.name, "all")
        if self.provider == "azure_arm":
            return self._call(call, self._driver.ex_get_node, node.id)
        return Node(id=node.id, name=node.name, state=NodeState.UNKNOWN, public_ips=[],
                    private_ips=[node.private_ip] if node.private_ip else [], driver=self._driver,
                    extra={"tags": dict(node.tags)})

    def destroy_node(self, node: CloudNode) -> None:
        """Destroy ``node``; a node the cloud no longer knows counts as destroyed."""
        try:
            raw = (self._dummy_node(node.id) if self.provider == "dummy"
                   else self._raw_node(node, "destroy_node"))
            if raw is None:
                return
            done = self._call("destroy_node", self._driver.destroy_node, raw)
        except CloudError as exc:
            if exc.kind is ErrorKind.NOT_FOUND:
                log.debug("cloud destroy: node %s already gone (%s)", node.id, exc)
                return
            raise
        if done is False:
            raise CloudError(ErrorKind.TRANSIENT, f"cloud did not confirm the destroy of {node.id}",
                             call="destroy_node")
        self._raw.pop(node.id, None)
        log.debug("cloud destroy: node %s (%s)", node.id, node.name)

    def set_tags(self, node: CloudNode, tags: Mapping[str, str]) -> None:
        """Set tags with a value, remove tags whose value is empty (one or two API calls)."""
        put = {k: str(v) for k, v in tags.items() if v not in ("", None)}
        drop = [k for k, v in tags.items() if v in ("", None)]
        if not put and not drop:
            return
        if self.provider == "ec2":
            if put:
                self._call("set_tags", self._driver.ex_put_tags, node.id, put)
            if drop:
                self._call("set_tags", self._driver.ex_remove_tags, node.id, drop)
        else:
            raw = self._raw_node(node, "set_tags") if self.provider != "dummy" else self._dummy_node(node.id)
            if raw is None:
                raise CloudError(ErrorKind.NOT_FOUND, f"no node {node.id}", call="set_tags")
            merged = {**node_tags(raw), **put}
            for k in drop:
                merged.pop(k, None)
            self._set_all_tags(raw, merged)
        cached = self._raw.get(node.id)
        if cached is not None:
            current = {**node_tags(cached), **put}
            for k in drop:
                current.pop(k, None)
            cached.extra = {**(cached.extra or {}), "tags": current}

    def _dummy_node(self, node_id: str) -> Node | None:
        """The dummy cloud's own record of ``node_id`` (its destroy needs that very object)."""
        with self._lock:
            return next((n for n in self._driver.list_nodes() if str(n.id) == node_id), None)

    def _set_all_tags(self, raw: Node, merged: dict[str, str]) -> None:
        d = self._driver
        if self.provider == "dummy":
            self._call("set_tags", lambda: setattr(raw, "extra", {**(raw.extra or {}), "tags": merged}))
        elif self.provider == "gce":
            self._call("set_tags", d.ex_set_node_metadata, raw, merged)
        elif self.provider == "azure_arm":
            self._call("set_tags", d.ex_create_tags, raw, merged, replace=True)
        elif self.provider == "openstack":
            self._call("set_tags", d.ex_set_metadata, raw, merged)

    # --- preflight -----------------------------------------------------------------------------

    def check_permissions(self, size: Size, node_id: str | None = None) -> list[Permission]:
        """Whether these credentials may make each mutating call the adapter uses, asked without
        changing anything (EC2: ``DryRun``), for ``size`` and, when given, an existing node of
        this cluster (EC2 checks tag and terminate rights against a real instance). Other clouds
        offer no such check: an empty list."""
        if self.provider != "ec2":
            return []
        boot = {"ImageId": str(self._options.image), "InstanceType": size.cloud_type,
                "MinCount": "1", "MaxCount": "1"}
        subnet = self._options.create_kwargs.get("ex_subnet")
        if subnet:
            boot["SubnetId"] = str(subnet)
        target = {"ResourceId.1": node_id or "i-00000000000000000"}
        calls = (("RunInstances", boot),
                 ("CreateTags", {**target, "Tag.1.Key": TAG_CLUSTER, "Tag.1.Value": self.cluster}),
                 ("DeleteTags", {**target, "Tag.1.Key": TAG_DRAIN}),
                 ("TerminateInstances", {"InstanceId.1": target["ResourceId.1"]}))
        results = []
        for action, params in calls:
            self._bucket.acquire()
            with self._lock:
                results.append(ec2_dry_run(self._driver.connection, action, params, self._secrets))
        return results
