"""Fault injection around the ports: a cloud and a scheduler that fail the way real ones do.

API note (the simulator, the soak run and the fault/crash tests use these)::

    rng = random.Random(seed)
    cloud = FaultyCloud(world.cloud, CloudFaults(error_rate=0.1, ...), rng, clock=time)
    sched = FaultyScheduler(world.scheduler, SchedulerFaults(outage_rate=0.01, ...), rng, clock=time)
    cloud.fail_next("create_node", "quota")          # scripted, on top of the random schedule
    cloud.crash_next("destroy_node", after=True)     # raise Crash after the real call took effect
    sched.outage(start, end)                          # scheduler unreachable in [start, end)
    sched.blank(start, end)                           # answers, but with no workers (restarted collector)
    dud_boots(world, rate, rng)                       # some VMs boot but their worker never joins
    cloud.injected / sched.injected                   # Counter of what was injected, by fault name

Both wrappers implement their port (:class:`~nodemanager.cloud.port.CloudDriver`,
:class:`~nodemanager.scheduler.port.Scheduler`) and raise only what the real adapters raise:
classified :class:`CloudError` (HTTP 500/503 → transient, 429 → rate_limit with ``retry_after``,
timeouts → transient, quota, capacity) and :class:`SchedulerError`. The one exception is
:class:`Crash`, a ``BaseException`` that stands for the controller process dying in the middle of a
call: nothing in the daemon catches it, so a test can drop every in-memory object and restart.

Deterministic: every random choice comes from the ``rng`` given, in call order.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from nodemanager.cloud import CloudDriver, CloudError, ErrorKind
from nodemanager.model import CloudNode, Size, Worker
from nodemanager.scheduler import (Confirmation, DrainSchedule, DrainTicket, DrainingStats,
                                   Scheduler, SchedulerError, SchedulerPoll)

__all__ = ["Crash", "CloudFaults", "SchedulerFaults", "FaultyCloud", "FaultyScheduler",
           "CLOUD_ERRORS", "cloud_error", "dud_boots"]


class Crash(BaseException):
    """The controller process died here (a SIGKILL in the middle of a call). Not an Exception, so
    no ``except Exception`` in the daemon swallows it."""


# name -> (kind, message as the adapters word it, retry_after)
CLOUD_ERRORS: Mapping[str, tuple[ErrorKind, str, float | None]] = {
    "http500": (ErrorKind.TRANSIENT, "HTTP 500 InternalError: we encountered an internal error", None),
    "http503": (ErrorKind.TRANSIENT, "HTTP 503 Unavailable: the service is unavailable", None),
    "throttle": (ErrorKind.RATE_LIMIT, "HTTP 429 RequestLimitExceeded: request limit exceeded", 20.0),
    "timeout": (ErrorKind.TRANSIENT, "timed out after 60s waiting for the reply", None),
    "quota": (ErrorKind.QUOTA, "InstanceLimitExceeded: you have requested more instances than allowed", None),
    "capacity": (ErrorKind.CAPACITY, "InsufficientInstanceCapacity: no capacity for this type now", None),
}
_RANDOM_ERRORS = ("http500", "http503", "throttle", "timeout")
_CREATE_ERRORS = _RANDOM_ERRORS + ("quota", "capacity")


def cloud_error(name: str, call: str) -> CloudError:
    """The classified error the adapters raise for fault ``name`` (a key of :data:`CLOUD_ERRORS`)."""
    kind, message, retry_after = CLOUD_ERRORS[name]
    return CloudError(kind, message, retry_after=retry_after, call=call)


@dataclass(frozen=True)
class CloudFaults:
    """Per-call probabilities of each cloud fault (0 disables it).

    ``error_rate``: any call raises a 500/503/429/timeout (create also quota/capacity) and does
    nothing; ``create_but_fails``: the create happens but the caller sees a timeout;
    ``destroy_but_fails``: the destroy happens but the caller sees a 503; ``partial_listing``: a
    listing drops a random third of the nodes; ``reorder_listing``: a listing comes shuffled;
    ``skew``: seconds added to every ``launched_at`` (the cloud's clock is ahead of ours);
    ``keep_terminated``: seconds a destroyed node stays in the listing with state ``terminated``
    (EC2 lists terminated instances for about an hour; the simulated cloud drops them at once);
    ``listing_lag``: seconds a new node is missing from every listing after its create (EC2's
    eventually consistent DescribeInstances right after RunInstances).
    """

    error_rate: float = 0.0
    create_but_fails: float = 0.0
    destroy_but_fails: float = 0.0
    partial_listing: float = 0.0
    reorder_listing: float = 0.0
    skew: float = 0.0
    keep_terminated: float = 0.0
    listing_lag: float = 0.0


@dataclass(frozen=True)
class SchedulerFaults:
    """Per-poll probabilities of each scheduler fault (0 disables it).

    ``outage_rate``: an outage (every call raises SchedulerError) starts, lasting ``outage_length``
    seconds; ``call_error_rate``: one drain/cancel/confirm/escalate call fails; ``stale_poll``: the
    previous poll is returned again, with its old ``polled_at``; ``lagging_ads``: the previous poll's
    workers with a fresh ``polled_at`` (a collector that lags); ``missing_ad``: one worker is left
    out; ``flapping``: a flapping node (chosen once) alternates between listed and missing;
    ``skew``: seconds subtracted from every ``last_heard``/``state_since`` (the scheduler's clock
    is behind ours).
    """

    outage_rate: float = 0.0
    outage_length: float = 300.0
    call_error_rate: float = 0.0
    stale_poll: float = 0.0
    lagging_ads: float = 0.0
    missing_ad: float = 0.0
    flapping: float = 0.0
    skew: float = 0.0


class FaultyCloud:
    """A :class:`CloudDriver` that injects :class:`CloudFaults` around ``inner``."""

    def __init__(self, inner: CloudDriver, faults: CloudFaults, rng: random.Random, *,
                 clock: Callable[[], float] | None = None) -> None:
        self.inner = inner
        self.faults = faults
        self.rng = rng
        self.clock = clock
        self.injected: Counter[str] = Counter()
        self.enabled = True
        self._scripted: dict[str, list[str]] = {}
        self._crashes: dict[str, list[bool]] = {}
        self._terminated: dict[str, tuple[CloudNode, float]] = {}   # id -> (node, destroyed at)

    # -- scripted faults ----------------------------------------------------------------------

    def fail_next(self, call: str, fault: str, count: int = 1) -> None:
        """The next ``count`` calls named ``call`` get ``fault``: a key of :data:`CLOUD_ERRORS`, or
        ``effect`` (the call takes effect, then a 503 is raised)."""
        self._scripted.setdefault(call, []).extend([fault] * count)

    def crash_next(self, call: str, *, after: bool) -> None:
        """The next call named ``call`` raises :class:`Crash`, before or after the real call."""
        self._crashes.setdefault(call, []).append(after)

    # -- the port -----------------------------------------------------------------------------

    def _fault(self, call: str, rate: float, choices: tuple[str, ...]) -> str | None:
        scripted = self._scripted.get(call)
        if scripted:
            return scripted.pop(0)
        if self.enabled and rate > 0 and self.rng.random() < rate:
            return self.rng.choice(choices)
        return None

    def _crash(self, call: str, after: bool) -> None:
        pending = self._crashes.get(call)
        if pending and pending[0] is after:
            pending.pop(0)
            self.injected[f"crash_{'after' if after else 'before'}_{call}"] += 1
            raise Crash(f"crash {'after' if after else 'before'} {call}")

    def _raise(self, call: str, fault: str) -> None:
        self.injected[f"{call}_{fault}"] += 1
        raise cloud_error(fault, call)

    def _skewed(self, node: CloudNode) -> CloudNode:
        return replace(node, launched_at=node.launched_at + self.faults.skew) if self.faults.skew else node

    def list_nodes(self) -> list[CloudNode]:
        self._crash("list_nodes", False)
        fault = self._fault("list_nodes", self.faults.error_rate, _RANDOM_ERRORS)
        if fault:
            self._raise("list_nodes", fault)
        f = self.faults
        nodes = self.inner.list_nodes()
        if f.listing_lag and self.clock is not None:
            now = self.clock()
            lagging = [n for n in nodes if now - n.launched_at < f.listing_lag]
            if lagging:
                self.injected["list_nodes_lagging"] += 1
                nodes = [n for n in nodes if now - n.launched_at >= f.listing_lag]
        nodes = [self._skewed(n) for n in nodes]
        if f.keep_terminated and self._terminated and self.clock is not None:
            now = self.clock()
            listed = {n.id for n in nodes}
            for node_id, (node, at) in list(self._terminated.items()):
                if now - at > f.keep_terminated:
                    del self._terminated[node_id]
                elif node_id not in listed:
                    nodes.append(replace(node, state="terminated"))
                    self.injected["list_nodes_terminated"] += 1
        if self.enabled and f.partial_listing and len(nodes) > 1 and self.rng.random() < f.partial_listing:
            keep = [n for n in nodes if self.rng.random() >= 1 / 3]
            if len(keep) < len(nodes):
                self.injected["list_nodes_partial"] += 1
                nodes = keep
        if self.enabled and f.reorder_listing and len(nodes) > 1 and self.rng.random() < f.reorder_listing:
            self.rng.shuffle(nodes)
            self.injected["list_nodes_reordered"] += 1
        return nodes

    def _fault_or_effect(self, call: str, errors: tuple[str, ...], effect_rate: float) -> str | None:
        """Raise an injected error for ``call`` before it happens; or return "effect" (scripted or
        drawn) when the call should happen and then look failed to the caller; else None."""
        fault = self._fault(call, self.faults.error_rate, errors)
        if fault is None and self.enabled and effect_rate and self.rng.random() < effect_rate:
            fault = "effect"
        if fault and fault != "effect":
            self._raise(call, fault)
        return fault

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        self._crash("create_node", False)
        fault = self._fault_or_effect("create_node", _CREATE_ERRORS, self.faults.create_but_fails)
        node = self.inner.create_node(size, name, tags)
        self._crash("create_node", True)
        if fault == "effect":
            self.injected["create_node_effect"] += 1
            raise cloud_error("timeout", "create_node")
        return self._skewed(node)

    def destroy_node(self, node: CloudNode) -> None:
        self._crash("destroy_node", False)
        fault = self._fault_or_effect("destroy_node", _RANDOM_ERRORS, self.faults.destroy_but_fails)
        self.inner.destroy_node(node)
        if self.faults.keep_terminated and self.clock is not None:
            self._terminated.setdefault(node.id, (self._skewed(node), self.clock()))
        self._crash("destroy_node", True)
        if fault == "effect":
            self.injected["destroy_node_effect"] += 1
            raise cloud_error("http503", "destroy_node")

    def set_tags(self, node: CloudNode, tags: Mapping[str, str]) -> None:
        self._crash("set_tags", False)
        fault = self._fault("set_tags", self.faults.error_rate, _RANDOM_ERRORS)
        if fault:
            self._raise("set_tags", fault)
        self.inner.set_tags(node, tags)
        self._crash("set_tags", True)


class FaultyScheduler:
    """A :class:`Scheduler` that injects :class:`SchedulerFaults` around ``inner``."""

    def __init__(self, inner: Scheduler, faults: SchedulerFaults, rng: random.Random, *,
                 clock: Callable[[], float]) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "faulty")
        self.faults = faults
        self.rng = rng
        self.clock = clock
        self.injected: Counter[str] = Counter()
        self.enabled = True
        self._outages: list[tuple[float, float]] = []
        self._blanks: list[tuple[float, float]] = []
        self._last: SchedulerPoll | None = None
        self._flapper: str | None = None
        self._flap_out = False
        self._crashes: dict[str, list[bool]] = {}

    def outage(self, start: float, end: float) -> None:
        """The scheduler is unreachable from ``start`` until ``end`` (every call raises)."""
        self._outages.append((start, end))

    def blank(self, start: float, end: float) -> None:
        """From ``start`` until ``end`` polls answer with no workers at all (a collector that just
        restarted, a slurmctld that lost its state): every node looks gone at once."""
        self._blanks.append((start, end))

    def crash_next(self, call: str, *, after: bool) -> None:
        """The next call named ``call`` raises :class:`Crash`, before or after the real call."""
        self._crashes.setdefault(call, []).append(after)

    def clear(self) -> None:
        """End every outage and blank window, and stop random faults."""
        self._outages.clear()
        self._blanks.clear()
        self.enabled = False

    def unreachable(self, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        return any(s <= now < e for s, e in self._outages)

    def _crash(self, call: str, after: bool) -> None:
        pending = self._crashes.get(call)
        if pending and pending[0] is after:
            pending.pop(0)
            self.injected[f"crash_{'after' if after else 'before'}_{call}"] += 1
            raise Crash(f"crash {'after' if after else 'before'} {call}")

    def _enter(self, call: str, node: str | None = None) -> None:
        self._crash(call, False)
        if self.unreachable():
            self.injected[f"{call}_unreachable"] += 1
            raise SchedulerError("slurmctld/collector unreachable: connection refused", node=node)
        if (call != "poll" and self.enabled and self.faults.call_error_rate
                and self.rng.random() < self.faults.call_error_rate):
            self.injected[f"{call}_error"] += 1
            raise SchedulerError(f"{call} timed out", node=node)

    def _skewed(self, w: Worker) -> Worker:
        s = self.faults.skew
        if not s:
            return w
        return replace(w, last_heard=w.last_heard - s if w.last_heard else 0.0,
                       state_since=w.state_since - s if w.state_since else 0.0)

    def poll(self) -> SchedulerPoll:
        now = self.clock()
        f = self.faults
        if self.enabled and f.outage_rate and not self.unreachable(now) and self.rng.random() < f.outage_rate:
            self._outages.append((now, now + f.outage_length))
            self.injected["outage"] += 1
        self._enter("poll")
        fresh = self.inner.poll()
        if self.enabled and self._last is not None:
            if f.stale_poll and self.rng.random() < f.stale_poll:
                self.injected["poll_stale"] += 1
                return self._last
            if f.lagging_ads and self.rng.random() < f.lagging_ads:
                self.injected["poll_lagging_ads"] += 1
                return replace(self._last, polled_at=fresh.polled_at)
        workers = [self._skewed(w) for w in fresh.workers]
        if workers and any(s <= now < e for s, e in self._blanks):
            self.injected["poll_blank"] += 1
            workers = []
        if self.enabled and f.missing_ad and workers and self.rng.random() < f.missing_ad:
            workers.pop(self.rng.randrange(len(workers)))
            self.injected["poll_missing_ad"] += 1
        if self.enabled and f.flapping and workers:
            names = {w.name for w in workers}
            if self._flapper not in names and self.rng.random() < f.flapping:
                self._flapper = self.rng.choice(sorted(names))
            if self._flapper in names:
                self._flap_out = not self._flap_out
                if self._flap_out:
                    workers = [w for w in workers if w.name != self._flapper]
                    self.injected["poll_flapping"] += 1
        poll = replace(fresh, workers=tuple(workers))
        self._last = poll
        return poll

    def drain(self, worker: Worker, schedule: DrainSchedule, reason: str) -> DrainTicket:
        self._enter("drain", worker.name)
        ticket = self.inner.drain(worker, schedule, reason)
        self._crash("drain", True)
        return ticket

    def cancel_drain(self, ticket: DrainTicket) -> None:
        self._enter("cancel_drain", ticket.worker)
        self.inner.cancel_drain(ticket)
        self._crash("cancel_drain", True)

    def confirm_drained(self, ticket: DrainTicket) -> Confirmation:
        self._enter("confirm_drained", ticket.worker)
        return self.inner.confirm_drained(ticket)

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        self._enter("escalate", ticket.worker)
        self.inner.escalate(ticket, schedule)

    def node_destroyed(self, worker_name: str) -> None:
        self._enter("node_destroyed", worker_name)
        self.inner.node_destroyed(worker_name)

    def draining_stats(self) -> DrainingStats:
        return self.inner.draining_stats()  # the adapter's own bookkeeping: no fault to inject


def dud_boots(world: object, rate: float, rng: random.Random) -> Counter[str]:
    """Make a fraction ``rate`` of the VMs ``world`` (a SimWorld) boots never get a worker (a bad
    image, a worker that cannot reach the scheduler). Returns the counter it updates (``dud_boot``)."""
    injected: Counter[str] = Counter()
    cloud = world.sim_cloud  # type: ignore[attr-defined]
    started = cloud.on_running

    def on_running(node: CloudNode, size: Size) -> None:
        if rng.random() < rate:
            injected["dud_boot"] += 1
            return
        if started is not None:
            started(node, size)

    cloud.on_running = on_running
    return injected
