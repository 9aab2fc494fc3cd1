"""A simulated in-process cloud implementing :class:`~nodemanager.cloud.port.CloudDriver`.

API note (for the simulator, the embedded default and the tests)::

    cloud = SimCloud(clock=lambda: t, sizes=settings.core.sizes, boot_delay=60.0,
                     quotas={"small": 10}, capacity={"large": 2}, total_quota=None,
                     on_running=pool_vm_started, on_terminated=pool_vm_stopped)
    cloud.advance(now)            # fire pending -> running transitions due by ``now`` (in time order)
    cloud.next_event_time()       # when the next node becomes running (None: nothing pending)
    cloud.list_nodes() / create_node(size, name, tags) / destroy_node(node) / set_tags(node, tags)
    cloud.fail_next("create_node", CloudError(...), count=1)   # fault injection, per call name
    cloud.create_fails_but_creates(count=1)                     # create raises, node exists anyway
    cloud.paid_seconds(node_id) / cloud.cost() / cloud.billing_by_size()
    cloud.calls                   # Counter of API calls by name
    SimCloud(..., clock_offset=3600.0, local_clock=ours)   # the cloud's clock an hour ahead
    SimCloud(..., boot_delays={"west-8": 120.0},            # several clouds (``simulate --clouds``):
             cloud_capacity={"west": (20, ((t1, t2),))})   # at most 20 VMs, none between t1 and t2
    cloud.clock_skew              # measured as an adapter does: last reply's Date vs local_clock

Every driver call first advances the cloud to ``clock()``, so a caller that never calls
:meth:`advance` still sees nodes become running. Nodes go ``pending`` → ``running`` (after
``boot_delay``) → ``terminated`` (on destroy; terminated nodes are no longer listed). Callbacks
``on_running(node, size)`` and ``on_terminated(node_id)`` let a simulated pool start and stop a
worker. Deterministic: node ids are ``<id_prefix><sequence>``, no randomness. Thread-safe (one lock).

Billing follows the size's rule: ``billing_period`` 0 charges per second with ``min_charge``
seconds at least; otherwise every started period is charged in full, counted from launch.

The cloud keeps its own clock, ``clock() + clock_offset``: launch and termination times are on
it. Each reply carries that clock's whole second (an HTTP Date header); :attr:`clock_skew` is the
skew an adapter measures from it against ``local_clock`` (the caller's clock, default ``clock``).
"""

from __future__ import annotations

import heapq
import math
import threading
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from nodemanager.core import date_skew, late_give_back, paid_seconds_for
from nodemanager.cloud import CloudError, ErrorKind, TAG_CLUSTER, TAG_SIZE
from nodemanager.model import CloudNode, Size, frozen_map

if TYPE_CHECKING:
    from nodemanager.sim.spot import SpotModel

__all__ = ["SimCloud"]

PENDING, RUNNING, TERMINATED = "pending", "running", "terminated"


class _Record:
    __slots__ = ("node", "size", "terminated_at")

    def __init__(self, node: CloudNode, size: Size) -> None:
        self.node = node
        self.size = size
        self.terminated_at: float | None = None


class SimCloud:
    """An in-memory cloud with a virtual clock, quotas, capacity limits and fault injection."""

    def __init__(self, *, clock: Callable[[], float], sizes: Iterable[Size], cluster: str = "nodemanager",
                 boot_delay: float = 60.0, quotas: Mapping[str, int] | None = None,
                 capacity: Mapping[str, int] | None = None, total_quota: int | None = None,
                 on_running: Callable[[CloudNode, Size], None] | None = None,
                 on_terminated: Callable[[str], None] | None = None,
                 id_prefix: str = "sim-", clock_offset: float = 0.0,
                 local_clock: Callable[[], float] | None = None,
                 spot: "SpotModel | None" = None,
                 on_notice: Callable[[str, float], None] | None = None,
                 on_reclaim: Callable[[str], None] | None = None,
                 boot_delays: Mapping[str, float] | None = None,
                 cloud_capacity: Mapping[str, tuple[int, tuple[tuple[float, float], ...]]] | None = None) -> None:
        self._clock = clock
        self.clock_offset = clock_offset
        self._local_clock = local_clock or clock
        self.clock_skew: float | None = None
        self.sizes = {s.cloud_type: s for s in sizes}
        self._by_name = {s.name: s for s in sizes}
        self.cluster = cluster
        self.boot_delay = boot_delay
        self.boot_delays = dict(boot_delays or {})          # size -> its cloud's own boot delay
        # several clouds: cloud -> (most VMs up at once, 0: no limit; (start, end) with none at all)
        self.cloud_capacity = dict(cloud_capacity or {})
        self.quotas = dict(quotas or {})
        self.capacity = dict(capacity or {})
        self.total_quota = total_quota
        self.on_running = on_running
        self.on_terminated = on_terminated
        self.id_prefix = id_prefix
        self.calls: Counter[str] = Counter()
        self._lock = threading.RLock()
        self._seq = 0
        self._live: dict[str, _Record] = {}     # pending or running, in creation order
        self._per_size: Counter[str] = Counter()
        self._dead: dict[str, _Record] = {}     # terminated, kept for billing
        self._dead_paid = (0, 0.0)  # (terminated nodes summed, their paid seconds): paid_seconds_so_far
        self._boots: list[tuple[float, int, str]] = []  # (running_at, seq, node id)
        self._faults: dict[str, list[CloudError]] = {}
        self._phantom_creates = 0
        self._listing: list[CloudNode] | None = None
        self._last_tags: dict[str, Mapping[str, str]] = {}  # size -> the last new node's tags
        # spot reclaims: the model draws them; (time, seq, node id, deadline or None)
        self.spot = spot
        self.on_notice = on_notice
        self.on_reclaim = on_reclaim
        self._spot_events: list[tuple[float, int, str, float | None]] = []
        self.reclaimed: dict[str, float] = {}   # node id -> when the cloud took it back

    # -- time -------------------------------------------------------------------------------

    def advance(self, now: float | None = None) -> None:
        """Make every node whose boot delay has passed by ``now`` running (callbacks in time order)."""
        now = self._clock() if now is None else now
        with self._lock:
            while True:
                boot = self._boots[0][0] if self._boots else math.inf
                spot = self._spot_events[0][0] if self._spot_events else math.inf
                if min(boot, spot) > now:
                    break
                if spot < boot:
                    self._spot_event(*heapq.heappop(self._spot_events))
                    continue
                _, _, node_id = heapq.heappop(self._boots)
                rec = self._live.get(node_id)
                if rec is None or rec.node.state != PENDING:
                    continue
                rec.node = replace(rec.node, state=RUNNING)
                self._listing = None
                if self.spot is not None:
                    for event in self.spot.events(node_id, rec.size, boot):
                        self._seq += 1
                        heapq.heappush(self._spot_events, (event[0], self._seq, node_id, event[1]))
                if self.on_running is not None:
                    self.on_running(rec.node, rec.size)

    def _spot_event(self, at: float, _seq: int, node_id: str, deadline: float | None) -> None:
        """A notice (``deadline`` given) or the reclaim itself: the VM is terminated as a
        one-time spot request is (its jobs die with it)."""
        rec = self._live.get(node_id)
        if rec is None:
            return
        if deadline is not None:
            if self.on_notice is not None:
                self.on_notice(node_id, deadline)
            return
        self.reclaimed[node_id] = at
        if self.on_reclaim is not None:
            self.on_reclaim(node_id)
        self._terminate(rec)

    def next_event_time(self) -> float | None:
        """The next time :meth:`advance` has something to do, or None."""
        with self._lock:
            while self._boots and self._boots[0][2] not in self._live:
                heapq.heappop(self._boots)
            while self._spot_events and self._spot_events[0][2] not in self._live:
                heapq.heappop(self._spot_events)
            t = min(self._boots[0][0] if self._boots else math.inf,
                    self._spot_events[0][0] if self._spot_events else math.inf)
            return None if t == math.inf else t

    # -- fault injection --------------------------------------------------------------------

    def fail_next(self, call: str, error: CloudError, count: int = 1) -> None:
        """Make the next ``count`` calls named ``call`` (list_nodes, create_node, destroy_node,
        set_tags) raise ``error`` without doing anything."""
        with self._lock:
            self._faults.setdefault(call, []).extend([error] * count)

    def create_fails_but_creates(self, count: int = 1) -> None:
        """Make the next ``count`` creates create the node and then raise a transient error."""
        with self._lock:
            self._phantom_creates += count

    def _cloud_now(self, now: float | None = None) -> float:
        return (self._clock() if now is None else now) + self.clock_offset

    def _enter(self, call: str) -> None:
        local = self._local_clock()
        self.clock_skew = date_skew(math.floor(self._cloud_now()), local, local)
        self.calls[call] += 1
        self.advance()
        queue = self._faults.get(call)
        if queue:
            err = queue.pop(0)
            raise CloudError(err.kind, err.args[0], retry_after=err.retry_after, call=call)

    # -- CloudDriver ------------------------------------------------------------------------

    def list_nodes(self) -> list[CloudNode]:
        with self._lock:
            self._enter("list_nodes")
            if self._listing is None:
                self._listing = [r.node for r in self._live.values()]
            return list(self._listing)

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        with self._lock:
            self._enter("create_node")
            known = self.sizes.get(size.cloud_type) or self._by_name.get(size.name)
            if known is None:
                raise CloudError(ErrorKind.PERMANENT, f"unknown size {size.cloud_type!r}", call="create_node")
            live_of_size = self._per_size.get(known.name, 0)
            quota = self.quotas.get(known.name)
            if quota is not None and live_of_size >= quota:
                raise CloudError(ErrorKind.QUOTA, f"instance limit {quota} for {known.name} exceeded",
                                 call="create_node")
            if self.total_quota is not None and len(self._live) >= self.total_quota:
                raise CloudError(ErrorKind.QUOTA, f"instance limit {self.total_quota} exceeded",
                                 call="create_node")
            cap = self.capacity.get(known.name)
            if cap is not None and live_of_size >= cap:
                raise CloudError(ErrorKind.CAPACITY, f"insufficient capacity for {known.name}",
                                 call="create_node")
            now = self._clock()
            if known.cloud in self.cloud_capacity:
                self._cloud_room(known, now)
            self._seq += 1
            node_id = f"{self.id_prefix}{self._seq:06d}"
            all_tags = dict(tags)
            all_tags.setdefault(TAG_CLUSTER, self.cluster)
            all_tags.setdefault(TAG_SIZE, known.name)
            node = CloudNode(id=node_id, name=name, size=known.name, launched_at=self._cloud_now(now),
                             state=PENDING,
                             private_ip=f"10.{(self._seq >> 16) & 255}.{(self._seq >> 8) & 255}.{self._seq & 255}",
                             hostname=name, tags=self._shared_tags(known.name, all_tags))
            self._live[node_id] = _Record(node, known)
            self._per_size[known.name] += 1
            self._listing = None
            heapq.heappush(self._boots, (now + self.boot_delays.get(known.name, self.boot_delay), self._seq, node_id))
            if self._phantom_creates:
                self._phantom_creates -= 1
                raise CloudError(ErrorKind.TRANSIENT, "timed out waiting for the create reply",
                                 call="create_node")
            if self.boot_delay <= 0:
                self.advance(now)
            return self._live[node_id].node

    def _cloud_room(self, size: Size, now: float) -> None:
        """Raise the capacity error of ``size``'s cloud when it is full or in an outage."""
        limit, outages = self.cloud_capacity[size.cloud]
        if any(start <= now < end for start, end in outages):
            raise CloudError(ErrorKind.CAPACITY, f"cloud {size.cloud}: no capacity (outage)", call="create_node")
        if limit and sum(n for name, n in self._per_size.items()
                         if self._by_name[name].cloud == size.cloud) >= limit:
            raise CloudError(ErrorKind.CAPACITY, f"cloud {size.cloud}: insufficient capacity ({limit} VMs up)",
                             call="create_node")

    def destroy_node(self, node: CloudNode) -> None:
        with self._lock:
            self._enter("destroy_node")
            rec = self._live.get(node.id)
            if rec is None:
                return
            self._terminate(rec)

    def _terminate(self, rec: _Record) -> None:
        node_id = rec.node.id
        del self._live[node_id]
        self._per_size[rec.size.name] -= 1
        rec.terminated_at = self._cloud_now()
        rec.node = replace(rec.node, state=TERMINATED)
        self._dead[node_id] = rec
        self._listing = None
        if self.on_terminated is not None:
            self.on_terminated(node_id)

    def _shared_tags(self, size: str, tags: dict[str, str]) -> Mapping[str, str]:
        """``tags`` read-only, the same object as the last new node's of ``size`` when equal
        (nodes of one size are usually created with the same tags: one map, not one a node)."""
        last = self._last_tags.get(size)
        if last is not None and last == tags:
            return last
        shared = self._last_tags[size] = frozen_map(tags)
        return shared

    def set_tags(self, node: CloudNode, tags: Mapping[str, str]) -> None:
        with self._lock:
            self._enter("set_tags")
            rec = self._live.get(node.id)
            if rec is None:
                raise CloudError(ErrorKind.NOT_FOUND, f"node {node.id} not found", call="set_tags")
            merged = dict(rec.node.tags)
            for k, v in tags.items():
                if v:
                    merged[k] = v
                else:
                    merged.pop(k, None)
            rec.node = replace(rec.node, tags=frozen_map(merged))
            self._listing = None

    # -- inspection -------------------------------------------------------------------------

    def node(self, node_id: str) -> CloudNode | None:
        """The node as the cloud holds it now (terminated nodes included), or None."""
        with self._lock:
            rec = self._live.get(node_id) or self._dead.get(node_id)
            return rec.node if rec else None

    def live_count(self) -> int:
        with self._lock:
            return len(self._live)

    def paid_seconds(self, node_id: str, now: float | None = None) -> float:
        """Seconds charged so far for one node (a live node is charged up to ``now``)."""
        now = self._cloud_now(now)
        with self._lock:
            rec = self._live.get(node_id) or self._dead[node_id]
            end = rec.terminated_at if rec.terminated_at is not None else now
            return paid_seconds_for(rec.size, end - rec.node.launched_at)

    def billing_by_size(self, now: float | None = None) -> dict[str, float]:
        """Paid seconds per size name, over every node this cloud ever ran."""
        now = self._cloud_now(now)
        out: dict[str, float] = {}
        with self._lock:
            for rec in list(self._live.values()) + list(self._dead.values()):
                end = rec.terminated_at if rec.terminated_at is not None else now
                out[rec.size.name] = out.get(rec.size.name, 0.0) + paid_seconds_for(
                    rec.size, end - rec.node.launched_at)
        return out

    def paid_seconds_so_far(self, now: float) -> float:
        """Paid seconds over every node up to ``now`` (what :meth:`billing_by_size` sums), the
        terminated nodes' part kept between calls: cheap enough to sample a replay with."""
        with self._lock:
            dead = list(self._dead.values())
            done, total = self._dead_paid
            for rec in dead[done:]:
                total += paid_seconds_for(rec.size, (rec.terminated_at or now) - rec.node.launched_at)
            self._dead_paid = (len(dead), total)
            return total + sum(paid_seconds_for(rec.size, now - rec.node.launched_at)
                               for rec in self._live.values())

    def late_give_backs(self) -> int:
        """Terminated nodes whose last billing period was paid for almost nothing
        (:func:`nodemanager.core.billing.late_give_back`)."""
        with self._lock:
            return sum(1 for rec in self._dead.values() if rec.terminated_at is not None
                       and late_give_back(rec.size, rec.node.launched_at, rec.terminated_at))

    def cost(self, now: float | None = None) -> float:
        """Total charge so far, from each size's hourly ``price``."""
        by_size = self.billing_by_size(now)
        return sum(secs / 3600.0 * self._by_name[name].price for name, secs in by_size.items())
