"""The controller's input memory: what one cycle's cloud listing and scheduler poll are taken to
say. :class:`InputMemory` smooths over one bad listing or poll without believing it, and
:func:`build_in_flight` reads the actions in flight from the nodes' tags and the scheduler.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Iterable, Sequence

from nodemanager.cloud import TAG_DESTROY, TAG_DRAIN, TAG_REQUEST, is_gone
from nodemanager.core import is_our_drain, launch_time
from nodemanager.drain_tickets import parse_drain_tag
from nodemanager.model import CloudNode, InFlight, Worker
from nodemanager.scheduler import SchedulerPoll

__all__ = ["InputMemory", "build_in_flight", "requested_at", "MISSING_LISTINGS", "MISSING_SECONDS"]

log = logging.getLogger("nodemanager.decisions")


def _short(name: str | None) -> str | None:
    return name.split(".", 1)[0] if name else None


def build_in_flight(nodes: Iterable[CloudNode], poll: SchedulerPoll | None,
                    boots: Iterable[InFlight] = (), tag_grace: float = 120.0) -> tuple[InFlight, ...]:
    """In-flight actions as the cloud tags and the scheduler record them (plus unlisted boots).

    A ``TAG_DRAIN`` is believed unless a poll taken more than ``tag_grace`` seconds after the drain
    began shows the node's worker not draining by us (the drain ended outside the daemon, or a
    crash came between cancelling it and clearing the tag): such a tag is ignored, so the node is
    judged afresh. A drain of ours whose tag could not be written comes from the scheduler."""
    workers = poll.workers if poll is not None else ()
    by_id: dict[str, Worker] | None = None
    by_name: dict[str, Worker] | None = None
    out: list[InFlight] = []
    tagged: set[str] = set()
    for n in nodes:
        if is_gone(n):
            continue
        drain = n.tags.get(TAG_DRAIN)
        parsed = parse_drain_tag(drain) if drain else None
        if parsed is not None:
            if by_id is None:  # indexed only when some node carries a drain tag
                by_id = {w.cloud_id: w for w in workers if w.cloud_id}
            w = by_id.get(n.id)
            if w is None:
                if by_name is None:
                    by_name = {}
                    for x in workers:
                        by_name.setdefault(x.name, x)
                        by_name.setdefault(_short(x.name) or x.name, x)
                w = by_name.get(n.hostname or "") or by_name.get(n.name) or \
                    by_name.get(_short(n.hostname or n.name) or "")
            if w is not None and not is_our_drain(w) and poll is not None and poll.polled_at - parsed[0] > tag_grace:
                log.debug("node %s: drain tag %s outlived the drain (worker %s not draining by us); ignored",
                          n.id, drain, w.name)
            else:
                out.append(InFlight(node=n.id, action="drain", since=parsed[0], size=n.size,
                                    request_id=parsed[1]))
                tagged.add(n.id)
        destroy = n.tags.get(TAG_DESTROY)
        if destroy:
            try:
                since = float(destroy)
            except ValueError:
                since = n.launched_at
            out.append(InFlight(node=n.id, action="destroy", since=since, size=n.size))
    for w in workers:
        # a drain of ours whose tag could not be written: the scheduler remembers it
        if w.cloud_id and w.cloud_id not in tagged and is_our_drain(w):
            out.append(InFlight(node=w.cloud_id, action="drain", since=w.state_since,
                                request_id=w.drain_request_id))
    out.extend(boots)
    return tuple(out)


MISSING_LISTINGS = 3   # a listed node absent from this many listings in a row...
MISSING_SECONDS = 120.0  # ...and for this long is believed gone (until then it counts for the caps)


def requested_at(request_id: str | None) -> float | None:
    """The epoch a boot was requested, from a ``TAG_REQUEST`` value ``<id>.<epoch>`` (else None)."""
    if not request_id:
        return None
    _, dot, tail = request_id.rpartition(".")
    return float(tail) if dot and tail.isdigit() else None


class InputMemory:
    """Smooths over one bad poll without believing it (every rule keeps a node *alive*, never acts):

    - terminated and terminating VMs (the libcloud adapter lists them with their state) are left
      out: they are neither capacity nor something to act on (the actuator still sees them, to
      settle destroys);
    - a node absent from a listing (a failed page, eventual consistency) is kept, as the previous
      listing showed it, for :data:`MISSING_LISTINGS` listings and :data:`MISSING_SECONDS`
      (so it still counts for ``max_nodes`` and ``max_total_price``), and for as long as the scheduler
      still reports a worker on it; never when it is gone, marked ``TAG_DESTROY`` or we destroyed it;
    - a worker absent from a poll (a lost ad, a flapping node, a blank poll) is kept, as last seen,
      while its node is listed and for at most ``node_stale_after`` seconds since we last saw it,
      so the core judges it by its last-heard time (down after ``node_stale_after``), not as a VM
      that never joined;
    - a node's ``launched_at`` is put on our clock (:func:`nodemanager.core.clocks.launch_time`):
      shifted by the cloud's measured clock skew, raised to the time we requested its boot (carried
      in the request tag), so a cloud clock running behind never makes a new VM look
      boot-exceeded, and a launch time still in the future is not believed, so one running ahead
      never extends boot grace nor shifts the billing window.
    """

    def __init__(self) -> None:
        self._listing_at: float | None = None
        self._nodes: dict[str, CloudNode] = {}
        self._missing: dict[str, tuple[int, float]] = {}   # node id -> (listings missed, since)
        self._merged: list[CloudNode] = []
        self._workers: dict[str, tuple[Worker, float]] = {}
        self._carried = 0                                  # workers the last poll lacked, kept
        self.destroyed: dict[str, float] = {}

    def nodes(self, listing: Sequence[CloudNode], polled_at: float, poll: SchedulerPoll,
              skew: float | None = None, tolerance: float = 30.0) -> list[CloudNode]:
        if polled_at == self._listing_at:
            return self._merged
        self._listing_at = polled_at
        self.destroyed = {k: t for k, t in self.destroyed.items() if polled_at - t < 3600.0}
        ended = {n.id for n in listing if is_gone(n)}
        listing = [n for n in listing if n.id not in ended]   # terminated VMs: neither supply nor work
        current = {n.id: n for n in listing}
        on_workers: set[str] | None = None
        kept: list[CloudNode] = []
        missing: dict[str, tuple[int, float]] = {}
        for node_id, node in self._nodes.items():
            # a node the listing shows terminated is gone, not missing (a reclaimed spot VM)
            if (node_id in current or node_id in ended or node_id in self.destroyed or is_gone(node)
                    or node.tags.get(TAG_DESTROY)):
                continue
            if on_workers is None:
                on_workers = {w.cloud_id for w in poll.workers if w.cloud_id}
            count, since = self._missing.get(node_id, (0, polled_at))
            count += 1
            if count < MISSING_LISTINGS or polled_at - since < MISSING_SECONDS or node_id in on_workers:
                kept.append(node)
                missing[node_id] = (count, since)
        if kept:
            log.info("cloud listing lacks %d node(s) seen before (%s%s); kept as they were",
                     len(kept), ", ".join(n.id for n in kept[:5]), "..." if len(kept) > 5 else "")
        self._missing = missing
        merged = [self._launch_time(n, skew, polled_at, tolerance) for n in listing] + kept
        self._nodes = {n.id: n for n in merged}
        self._merged = merged
        return merged

    def carrying(self) -> bool:
        """True while a node missing from the listing or a worker missing from a poll is kept:
        a later cycle may drop it with no new input (a replay must not skip that cycle)."""
        return bool(self._missing or self._carried)

    def _launch_time(self, node: CloudNode, skew: float | None, listed_at: float,
                     tolerance: float) -> CloudNode:
        asked = requested_at(node.tags.get(TAG_REQUEST)) if node.tags else None
        before = self._nodes.get(node.id)
        t = launch_time(node.launched_at, asked, skew, listed_at, tolerance,
                        before.launched_at if before is not None else None)
        return node if t == node.launched_at else replace(node, launched_at=t)

    def poll(self, poll: SchedulerPoll, nodes: Sequence[CloudNode], stale_after: float) -> SchedulerPoll:
        now = poll.polled_at
        present = {w.name for w in poll.workers}
        listed = {n.id for n in nodes}
        carried = [w for name, (w, seen) in self._workers.items()
                   if name not in present and w.cloud_id in listed and now - seen <= stale_after]
        self._workers = {name: self._workers[name] for name in (w.name for w in carried)}
        self._workers.update((w.name, (w, now)) for w in poll.workers)
        self._carried = len(carried)
        if not carried:
            return poll
        log.info("scheduler poll lacks %d worker(s) seen before (%s%s); kept as last seen",
                 len(carried), ", ".join(w.name for w in carried[:5]), "..." if len(carried) > 5 else "")
        return SchedulerPoll(workers=poll.workers + tuple(carried), demand=poll.demand, polled_at=poll.polled_at)
