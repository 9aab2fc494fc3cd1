"""The controller's input memory: what one cycle's cloud listing and scheduler poll are taken to
say. :class:`InputMemory` smooths over one bad listing or poll without believing it, and
:func:`build_in_flight` reads the actions in flight from the nodes' tags and the scheduler.
"""

from __future__ import annotations

import logging
import math
import operator
from dataclasses import replace
from typing import Iterable, Sequence

from nodemanager.cloud import TAG_DESTROY, TAG_DRAIN, TAG_REQUEST, is_gone
from nodemanager.core import is_our_drain, launch_time
from nodemanager.core.rate_history import requested_at
from nodemanager.cycle.drain_tickets import parse_drain_tag
from nodemanager.model import CloudNode, InFlight, Worker
from nodemanager.scheduler import SchedulerPoll

__all__ = ["InputMemory", "build_in_flight", "requested_at", "MISSING_LISTINGS", "MISSING_SECONDS",
           "DESTROYED_KEPT"]

log = logging.getLogger("nodemanager.decisions")


def _short(name: str | None) -> str | None:
    return name.split(".", 1)[0] if name else None


def build_in_flight(nodes: Iterable[CloudNode], poll: SchedulerPoll | None,
                    boots: Iterable[InFlight] = (), tag_grace: float = 120.0,
                    listed: Iterable[CloudNode] | None = None) -> tuple[InFlight, ...]:
    """In-flight actions as the cloud tags and the scheduler record them (plus unlisted boots).

    A ``TAG_DRAIN`` is believed unless a poll taken more than ``tag_grace`` seconds after the drain
    began shows the node's worker not draining by us (the drain ended outside the daemon, or a
    crash came between cancelling it and clearing the tag): such a tag is ignored, so the node is
    judged afresh. A drain of ours whose tag could not be written comes from the scheduler, for
    a VM of ``listed`` (the whole listing, when given) that is not gone: the ads of a dead startd
    outlive its VM in the collector, its drain with them."""
    workers = poll.workers if poll is not None else ()
    by_id: dict[str, Worker] | None = None
    by_name: dict[str, Worker] | None = None
    out: list[InFlight] = []
    tagged: set[str] = set()
    alive: set[str] | None = None
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
        # a drain of ours whose tag could not be written: the scheduler remembers it (draining
        # is read first: most workers are not, and that is cheaper than the call)
        if w.draining and w.cloud_id and w.cloud_id not in tagged and is_our_drain(w):
            if listed is not None:
                if alive is None:
                    alive = {n.id for n in listed if not is_gone(n)}
                if w.cloud_id not in alive:
                    continue
            out.append(InFlight(node=w.cloud_id, action="drain", since=w.state_since,
                                request_id=w.drain_request_id))
    out.extend(boots)
    return tuple(out)


MISSING_LISTINGS = 3   # a listed node absent from this many listings in a row...
MISSING_SECONDS = 120.0  # ...and for this long is believed gone (until then it counts for the caps)
DESTROYED_KEPT = 3600.0  # a node we destroyed is known gone (not missing) for this long


def _carries_action(node: CloudNode) -> bool:
    """True when the node carries a tag :func:`build_in_flight` reads (a drain or a destroy)."""
    return bool(node.tags) and (TAG_DRAIN in node.tags or TAG_DESTROY in node.tags)


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

    What it works out for a listed node (launch time, the tags :func:`build_in_flight` reads) is
    reused while the listing gives the very same object (listings are frozen dataclasses), the skew
    and tolerance stay and our clock does not step back: a cycle's cost grows with what changed.
    """

    def __init__(self) -> None:
        self._listing_at: float | None = None
        self._nodes: dict[str, CloudNode] = {}
        # node id -> (the node as listed, on our clock, carries an action tag): for a listed object
        # seen before whose launch time later listings cannot change (see _launch_time)
        self._settled: dict[str, tuple[CloudNode, CloudNode, bool]] = {}
        self._clock_key: tuple[float | None, float] | None = None
        self._ids: frozenset[str] = frozenset()
        self._tagged: list[CloudNode] = []                 # the merged nodes carrying an action tag
        self._raw: list[CloudNode] = []                    # the last listing as given...
        self._reusable = False                             # ...and whether its answer holds for it again
        self._missing: dict[str, tuple[int, float]] = {}   # node id -> (listings missed, since)
        self._merged: list[CloudNode] = []
        self._polled: dict[str, Worker] = {}              # the last poll's workers by name...
        self._polled_at = 0.0                               # ...and when it was taken
        self._kept: dict[str, tuple[Worker, float]] = {}   # workers carried: (as last seen, seen at)
        self._carried = 0                                  # workers the last poll lacked, kept
        self.destroyed: dict[str, float] = {}

    def nodes(self, listing: Sequence[CloudNode], polled_at: float, poll: SchedulerPoll,
              skew: float | None = None, tolerance: float = 30.0) -> list[CloudNode]:
        if polled_at == self._listing_at:
            return self._merged
        if (skew, tolerance) != self._clock_key or (self._listing_at is not None and polled_at < self._listing_at):
            self._settled, self._reusable = {}, False  # settled on another clock (or ours stepped back)
        self._clock_key = (skew, tolerance)
        self._listing_at = polled_at
        if self.destroyed:
            self.destroyed = {k: t for k, t in self.destroyed.items() if polled_at - t < DESTROYED_KEPT}
        if self._reusable and len(listing) == len(self._raw) and all(map(operator.is_, listing, self._raw)):
            return self._merged  # the very same nodes, each settled, none gone or missing: as before
        before, settled = self._settled, {}
        listed: dict[str, CloudNode] = {}
        out: list[CloudNode] = []
        tagged: list[CloudNode] = []
        ended: set[str] = set()
        for n in listing:
            memo = before.get(n.id)
            if memo is not None and memo[0] is n:  # the same object as before: same answers
                node, carries = memo[1], memo[2]
                settled[n.id] = memo
            elif is_gone(n):
                ended.add(n.id)
                continue
            else:
                node, final = self._launch_time(n, skew, polled_at, tolerance)
                carries = _carries_action(n)
                if final:
                    settled[n.id] = (n, node, carries)
            out.append(node)
            listed[n.id] = node
            if carries:
                tagged.append(node)
        if ended:  # terminated VMs: neither supply nor work (nor any other entry under their id)
            out = [n for n in out if n.id not in ended]
            tagged = [n for n in tagged if n.id not in ended]
            listed = {n.id: n for n in out}
        self._settled = settled
        kept = self._keep_missing(listed, ended, polled_at, poll)
        merged = out + kept
        self._nodes = listed
        if kept:
            self._nodes.update((n.id, n) for n in kept)
            tagged = tagged + [n for n in kept if _carries_action(n)]
        if self._nodes.keys() != self._ids:
            self._ids = frozenset(self._nodes)
        self._merged = merged
        self._tagged = tagged
        self._raw = list(listing)
        # every entry settled: none gone, no id twice, no launch time still in the future
        self._reusable = not kept and len(settled) == len(listing)
        return merged

    def ids(self, nodes: Sequence[CloudNode]) -> frozenset[str]:
        """The ids of ``nodes``; for what :meth:`nodes` last returned, kept from it (the same
        object while the ids stay the same)."""
        return self._ids if nodes is self._merged else frozenset(n.id for n in nodes)

    def action_tagged(self, nodes: Sequence[CloudNode]) -> Sequence[CloudNode]:
        """Those of ``nodes`` :func:`build_in_flight` may find an action in (in their order): for
        what :meth:`nodes` last returned, the ones carrying a drain or destroy tag; else all."""
        return self._tagged if nodes is self._merged else nodes

    def _keep_missing(self, listed: dict[str, CloudNode], ended: set[str], polled_at: float,
                      poll: SchedulerPoll) -> list[CloudNode]:
        """The nodes of the last merged listing this listing lacks that are kept (see the class)."""
        absent = self._nodes.keys() - listed.keys()
        if not absent:
            self._missing = {}
            return []
        on_workers: set[str] | None = None
        kept: list[CloudNode] = []
        missing: dict[str, tuple[int, float]] = {}
        for node_id, node in self._nodes.items():
            # a node the listing shows terminated is gone, not missing (a reclaimed spot VM)
            if (node_id not in absent or node_id in ended or node_id in self.destroyed or is_gone(node)
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
        return kept

    def carrying(self) -> bool:
        """True while a node missing from the listing or a worker missing from a poll is kept:
        a later cycle may drop it with no new input (a replay must not skip that cycle)."""
        return bool(self._missing or self._carried)

    def _launch_time(self, node: CloudNode, skew: float | None, listed_at: float,
                     tolerance: float) -> tuple[CloudNode, bool]:
        """The node with its launch time on our clock, and whether that is final: no later listing
        (at or after ``listed_at``, same skew and tolerance) can change it (it was not in the future)."""
        asked = requested_at(node.tags.get(TAG_REQUEST)) if node.tags else None
        before = self._nodes.get(node.id)
        t = launch_time(node.launched_at, asked, skew, listed_at, tolerance,
                        before.launched_at if before is not None else None)
        final = launch_time(node.launched_at, asked, skew, math.inf, tolerance) == t
        return (node if t == node.launched_at else replace(node, launched_at=t)), final

    def poll(self, poll: SchedulerPoll, nodes: Sequence[CloudNode], stale_after: float) -> SchedulerPoll:
        now = poll.polled_at
        present = {w.name: w for w in poll.workers}
        before, before_at = self._polled, self._polled_at
        absent = before.keys() - present.keys()
        kept: dict[str, tuple[Worker, float]] = {}
        if self._kept or absent:  # workers seen before that this poll lacks: carried for a while
            listed = self._nodes if nodes is self._merged else {n.id for n in nodes}
            candidates = [ws for name, ws in self._kept.items() if name not in present]
            candidates += [(w, before_at) for name, w in before.items() if name in absent]
            kept = {w.name: (w, seen) for w, seen in candidates
                    if w.cloud_id in listed and now - seen <= stale_after}
        carried = [w for w, _ in kept.values()]
        self._kept, self._polled, self._polled_at = kept, present, now
        self._carried = len(carried)
        if not carried:
            return poll
        log.info("scheduler poll lacks %d worker(s) seen before (%s%s); kept as last seen",
                 len(carried), ", ".join(w.name for w in carried[:5]), "..." if len(carried) > 5 else "")
        return SchedulerPoll(workers=poll.workers + tuple(carried), demand=poll.demand, polled_at=poll.polled_at)
