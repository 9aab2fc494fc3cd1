"""The cloud adapter over Apache libcloud: ``LibcloudCloud`` implements :class:`CloudDriver`.

The provider is chosen by name through libcloud's ``get_driver``: ``ec2``, ``gce``, ``azure_arm``,
``openstack`` or ``dummy`` (libcloud's in-process ``DummyNodeDriver``, for the embedded default).
``[Cloud]`` options (``CloudSettings.driver_args``) are the libcloud constructor's keyword
arguments; ``[Cloud Create]`` options (``CloudSettings.create_args``) are translated per provider.
Everything that sets one provider apart is a row of
:data:`~nodemanager.cloud.providers.PROVIDER_TABLE`; this module has no per-provider branch. Credentials never appear in logs, ``repr`` or error messages.

What the adapter does, and what it leaves to the daemon:

- one listing per :meth:`LibcloudCloud.list_nodes` (libcloud's ``list_nodes``; on EC2 one
  ``DescribeInstances`` per page of 1000), filtered to this cluster's nodes by the
  ``nodemanager-cluster`` tag (EC2: a server-side ``tag:`` filter; others: client-side on the
  node's tags/metadata). Terminated and terminating nodes are listed with their state
  (see :data:`nodemanager.cloud.reconcile.GONE_STATES`) so the core can ignore them.
- every failure is raised as a classified :class:`CloudError` (``nodemanager.cloud.errors``). The
  adapter never retries: the daemon's actors retry with backoff, honouring ``retry_after``.
- a create that raised but made the VM, and a destroy that raised but removed it, are settled by
  the daemon with the next listing (``nodemanager.cloud.reconcile``); the adapter adds the
  request-id tag. On EC2 the ``ClientToken`` is made from the deployment id, the node name and a
  ten-minute window (:func:`nodemanager.core.identity.client_token`; the request id without a
  deployment tag), so AWS answers a second create of that name, from any controller of the
  deployment, with the first one's instance. A destroy of a node the cloud no longer knows is a success here already.
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

Tested against moto's EC2 and local servers answering as the other providers' APIs document
(docs/architecture.md, "Clouds"). A node equal to the last listing's is listed as that very object.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import logging
import threading
import time
import uuid
from typing import Any, Callable, Mapping, Sequence

from libcloud.compute.base import Node
from libcloud.compute.providers import get_driver
from libcloud.compute.types import NodeState

from nodemanager.cloud.ec2compat import tolerant_ec2_driver
from nodemanager.cloud.errors import classify
from nodemanager.cloud.libcloud_options import SECRET_WORDS, check_driver_args, node_tags, parse_options, to_epoch
from nodemanager.cloud.libcloud_requests import CreateRequests
from nodemanager.cloud.permissions import Permission, dry_run_verdict, ec2_dry_run, ec2_dry_run_calls
from nodemanager.cloud.port import TAG_CLUSTER, TAG_REQUEST, TAG_SIZE, CloudError, ErrorKind
from nodemanager.cloud.ratelimit import TokenBucket
from nodemanager.configuration.settings import CloudSettings
from nodemanager.core import date_skew
from nodemanager.model import CloudNode, Size, frozen_map
from nodemanager.model import SameRecords, node_id as _node_id

__all__ = ["LibcloudCloud"]

log = logging.getLogger(__name__)

_MUTATIONS = frozenset({"create_node", "destroy_node", "set_tags"})


class LibcloudCloud:
    """A :class:`CloudDriver` over one libcloud compute driver (see the module docstring).

    ``clock``/``sleep`` drive the per-second rate limit (inject them in tests); ``wall_clock``
    stamps the launch time of dummy-driver nodes, which libcloud's dummy cloud does not record.
    """

    def __init__(self, settings: CloudSettings, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 wall_clock: Callable[[], float] = time.time, sizes: Sequence[Size] = ()) -> None:
        self._settings = settings
        # a cloud among several may have no shared image when each of its sizes has its own
        self._options = parse_options(settings, image_needed=not sizes or not all(
            dict(s.create_args).get("image") for s in sizes))
        self._requests = CreateRequests(settings, self._options, wall_clock)
        for size in sizes:  # a size's bad image or boot script is an error before anything starts
            self._requests.options_for(size)
        self._provider = self._options.provider
        self.provider = self._provider.name
        self.cluster = settings.cluster
        self._static_tags = dict(settings.tags)
        self._secrets = tuple(str(v) for k, v in settings.driver_args.items()
                              if SECRET_WORDS.search(k) and len(str(v)) >= 4)
        self._bucket = TokenBucket(settings.calls_per_second, clock=clock, sleep=sleep)
        # [HA]: raises to stop a create, destroy or tag write right before it is sent
        self.send_gate: Callable[[str], None] | None = None
        self._wall_clock = wall_clock
        self._lock = threading.RLock()
        self._raw: dict[str, Node] = {}
        self._first_seen: dict[str, float] = {}
        self._same: SameRecords[CloudNode] = SameRecords()  # each node while equal: one object
        cls = get_driver(self.provider)
        if self._provider.tolerant_driver:
            cls = tolerant_ec2_driver(cls)  # type: ignore[arg-type]  # mypy takes a class for unhashable (NodeDriver.__hash__); classes hash by identity
        check_driver_args(self._provider, cls, self._options.driver_kwargs)
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
        """One libcloud call: wait for the rate limit, run it alone, classify what it raises; a
        mutation passes ``send_gate`` after both waits, right before it is sent."""
        self._bucket.acquire()
        with self._lock:
            if self.send_gate is not None and call in _MUTATIONS:
                self.send_gate(call)
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
        if self._provider.paged_listing:
            raw, token = [], None
            while True:  # one rate-limited call per page
                page, token = self._call("list_nodes", self._driver.ex_list_nodes_page,
                                         {f"tag:{TAG_CLUSTER}": self.cluster}, token)
                raw.extend(page)
                if not token:
                    break
        else:
            raw = self._call("list_nodes", self._driver.list_nodes, **self._provider.list_kwargs)
        nodes, cache = [], {}
        for item in raw:
            tags = node_tags(item)
            if tags.get(TAG_CLUSTER) != self.cluster:
                continue
            cache[str(item.id)] = item
            nodes.append(self._to_cloud_node(item, tags))
        self._raw = cache
        self._first_seen = {k: v for k, v in self._first_seen.items() if k.removeprefix("preempted:") in cache}
        return self._same.keep(nodes, _node_id)

    def _state(self, node: Node) -> str:
        status = (node.extra or {}).get("status")
        if self._provider.own_state_words and isinstance(status, str) and status:
            return status  # the cloud's own words, e.g. EC2's shutting-down (libcloud: "unknown")
        state = node.state
        return str(state.value if isinstance(state, NodeState) else state or "unknown")

    def _launched_at(self, node: Node) -> float:
        extra = node.extra or {}
        for value in (node.created_at, extra.get("launch_time"), extra.get("creationTimestamp"),
                      extra.get("created"), (extra.get("properties") or {}).get("timeCreated")):
            epoch = to_epoch(value)
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
        """When this process first listed a preemptible VM stopped (GCE: TERMINATED; libcloud says
        stopped, and gives no stop time): the reclaim is over, but the VM and its disks stay (and
        bill) until destroyed. None for any other VM."""
        extra = node.extra or {}
        if not self._provider.stopped_preemptible or not (extra.get("scheduling") or {}).get("preemptible"):
            return None
        if extra.get("status") != "TERMINATED":
            return None
        return self._first_seen.setdefault(f"preempted:{node.id}", self._wall_clock())

    # --- create --------------------------------------------------------------------------------

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        """Boot one node. Tags: ``[Cloud] tags``, then ``tags``, then cluster, size and request id
        (a request id is made up when ``tags`` has none). Empty values are left out."""
        request = tags.get(TAG_REQUEST) or uuid.uuid4().hex
        opts, size_tags = self._requests.options_for(size)
        all_tags = {k: str(v) for k, v in {**self._static_tags, **size_tags, **tags}.items()
                    if v not in ("", None)}
        all_tags.update({TAG_CLUSTER: self.cluster, TAG_SIZE: size.name, TAG_REQUEST: request})
        kwargs = self._requests.create_kwargs(self._driver, size, name, all_tags, request, opts)
        created = self._call("create_node", self._driver.create_node, **kwargs)
        if isinstance(created, list):
            if len(created) != 1:
                raise CloudError(ErrorKind.TRANSIENT, f"cloud returned {len(created)} nodes for one "
                                 f"create (request {request})", call="create_node")
            created = created[0]
        if self._provider.in_process:
            self._stamp_dummy(created, name, all_tags)
        self._raw[str(created.id)] = created
        log.debug("cloud create: node %s name %s size %s request %s", created.id, name, size.name, request)
        return self._to_cloud_node(created, {**node_tags(created), **all_tags})

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
        # some calls need facts only the cloud has (GCE: the zone; Azure: NIC and disk ids)
        if self._provider.fetch_node is not None:
            fn, args = self._provider.fetch_node(self._driver, node)
            return self._call(call, fn, *args)
        return Node(id=node.id, name=node.name, state=NodeState.UNKNOWN, public_ips=[],
                    private_ips=[node.private_ip] if node.private_ip else [], driver=self._driver,
                    extra={"tags": dict(node.tags)})

    def destroy_node(self, node: CloudNode) -> None:
        """Destroy ``node``; a node the cloud no longer knows counts as destroyed."""
        try:
            raw = (self._dummy_node(node.id) if self._provider.in_process
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
        if self._provider.tag_calls:
            if put:
                self._call("set_tags", self._driver.ex_put_tags, node.id, put)
            if drop:
                self._call("set_tags", self._driver.ex_remove_tags, node.id, drop)
        else:
            raw = self._dummy_node(node.id) if self._provider.in_process else self._raw_node(node, "set_tags")
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
        if self._provider.set_tags is not None:
            self._call("set_tags", self._provider.set_tags(self._driver), raw, merged)
        else:  # the in-process cloud keeps tags on its node
            self._call("set_tags", lambda: setattr(raw, "extra", {**(raw.extra or {}), "tags": merged}))

    # --- preflight -----------------------------------------------------------------------------

    def dry_run_boot(self, size: Size) -> Permission | None:
        """The cloud's own answer to booting one VM of ``size`` exactly as :meth:`create_node`
        would (libcloud builds the request: image, type, key pair, subnet, profile, tags), sent
        with EC2's ``DryRun``: nothing is booted. None where the cloud has no dry run."""
        if not self._provider.dry_run:
            return None
        opts, size_tags = self._requests.options_for(size)
        tags = {**self._static_tags, **size_tags, TAG_CLUSTER: self.cluster, TAG_SIZE: size.name}
        kwargs = self._requests.create_kwargs(self._driver, size, f"{self.cluster}-{size.name}-dry-run", tags,
                                              "dry-run", opts)
        connection = self._driver.connection
        send = connection.request

        def dry(action: str, params: Any = None, *args: Any, **kw: Any) -> Any:
            return send(action, {**(params or {}), "DryRun": "true"}, *args, **kw)

        name = f"ec2:RunInstances {size.name}"
        self._bucket.acquire()
        with self._lock:
            connection.request = dry
            try:
                self._driver.create_node(**kwargs)
            except Exception as exc:  # EC2 answers every dry run with an error: the verdict is in it
                return dry_run_verdict(name, exc, self._secrets, whole_call=True)
            finally:
                del connection.request  # the class's own method again
        return Permission(name, None, "no verdict: EC2 carried out a dry run without an answer")

    def check_permissions(self, size: Size, node_id: str | None = None) -> list[Permission]:
        """Whether these credentials may make each mutating call the adapter uses, asked without
        changing anything (EC2: ``DryRun``), for ``size`` and, when given, an existing node of
        this cluster (EC2 checks tag and terminate rights against a real instance). Other clouds
        offer no such check: an empty list."""
        if not self._provider.dry_run:
            return []
        subnet = self._options.create_kwargs.get("ex_subnet")
        results = []
        for action, params in ec2_dry_run_calls(str(self._options.image), size.cloud_type,
                                                str(subnet) if subnet else None, node_id, self.cluster):
            self._bucket.acquire()
            with self._lock:
                results.append(ec2_dry_run(self._driver.connection, action, params, self._secrets))
        return results
