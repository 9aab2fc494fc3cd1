"""Carrying out a plan: boots, drains, drain cancels, escalations and destroys, against the ports.

API note (shared by the daemon's actuator actors and the simulator, which calls it synchronously)::

    act = Actuator(cloud, scheduler, settings, clock=lambda: now)
    act.observe_listing(cloud_nodes, polled_at)   # after every listing: settles boots/destroys
    act.observe_poll(scheduler_poll)        # after every poll (the controller does both)
    state = act.state()                     # ActuatorState: quota, blocked_sizes, recent_destroys,
                                            #   in_flight (boots requested but not listed yet, and
                                            #   drains/cancels/destroys done after that listing)
    outcomes = act.run(Task(item, node, worker))   # item: PlanItem or BootRequest -> [Outcome]

Nothing here sleeps or keeps a thread: a failed call is reported as an :class:`Outcome` with
result ``failed`` and the same work is refused (``skipped``) until its backoff has passed; the
controller plans it again next cycle if it is still wanted. Backoff doubles from
:data:`INITIAL_BACKOFF` up to ``PollSettings.max_backoff``. Cloud errors by kind:

- quota: learn the quota (our node count now) and block that size for ``CloudSettings.quota_backoff``;
- capacity: block that size for ``quota_backoff``;
- rate_limit: no cloud call until ``retry_after`` (or the backoff) has passed;
- transient: retry after the backoff; a create that raised and whose node shows up in a later
  listing (found by its ``TAG_REQUEST``) is a success;
- not_found: a destroy of a gone node is a success;
- permanent: reported, retried only after the backoff.

Safety rules for a destroy: when the node carries a drain of ours (``TAG_DRAIN``, or our reason
prefix in the scheduler) and its worker is still heard from, the scheduler's
:meth:`confirm_drained` must say ``ok`` from fresh state first — whatever the plan item says;
a node without our drain is destroyed only by a non-cancellable item (unpaired or down node),
and only if the worker, as the latest poll sees it (``latest_worker``), runs nothing. A
cancellable destroy without our drain is refused. ``TAG_DESTROY`` is written before
``destroy_node`` so a destroy interrupted by a restart is finished on the next start.
Thread-safe: several actuator actors may share one instance.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterable, TypeGuard

from nodemanager.cloud import (CloudDriver, CloudError, ErrorKind, TAG_CLUSTER, TAG_DESTROY,
                               TAG_DRAIN, TAG_REQUEST, TAG_SIZE, is_gone)
from nodemanager.core import Reservation, is_our_reason, settle
from nodemanager.journal import ReservationJournal
from nodemanager.model import BootRequest, CloudNode, InFlight, ItemKind, Outcome, PlanItem, Worker
from nodemanager.scheduler import (DrainRefused, DrainSchedule, DrainTicket, Scheduler,
                                   SchedulerError, SchedulerPoll)
from nodemanager.settings import Settings

__all__ = ["Actuator", "ActuatorState", "Task", "INITIAL_BACKOFF", "BOOT_LISTING_TIMEOUT",
           "drain_tag", "parse_drain_tag", "ticket_for", "worker_is_busy", "is_our_drain"]

INITIAL_BACKOFF = 10.0          # seconds before the first retry of a failed call
BOOT_LISTING_TIMEOUT = 600.0    # a requested boot not listed after this long is given up
DESTROY_SETTLE = 300.0          # a node destroyed this recently is not destroyed again
NAME_QUARANTINE = 600.0         # a node name listed this recently is not given to a new VM

OK, REFUSED, FAILED, SKIPPED = "ok", "refused", "failed", "skipped"

log = logging.getLogger("nodemanager.actuate")


@dataclass(frozen=True, slots=True)
class Task:
    """One piece of actuator work: a plan item with the node and worker it is about (from the
    snapshot it was planned on), or a boot request."""

    item: PlanItem | BootRequest
    node: CloudNode | None = None
    worker: Worker | None = None

    @property
    def key(self) -> str:
        """What the task is about, so two tasks on the same node are never run at once."""
        if isinstance(self.item, BootRequest):
            return f"boot:{self.item.size}"
        return self.item.node_id


@dataclass(frozen=True)
class ActuatorState:
    """What the actuator learned, for the next :class:`~nodemanager.model.Snapshot`."""

    quota: int | None = None
    blocked_sizes: frozenset[str] = frozenset()
    recent_destroys: tuple[float, ...] = ()
    in_flight: tuple[InFlight, ...] = ()   # boots not listed yet; actions newer than the listing


def _quote(s: str) -> str:
    return s.replace("%", "%25").replace(":", "%3A")


def _unquote(s: str) -> str:
    return s.replace("%3A", ":").replace("%25", "%")


def drain_tag(ticket: DrainTicket) -> str:
    """The ``TAG_DRAIN`` value for a drain: ``<epoch>:<request id>[:<daemon start>]``."""
    value = f"{int(ticket.started_at)}:{_quote(ticket.request_id)}"
    if ticket.daemon_start is not None:
        value += f":{int(ticket.daemon_start)}"
    return value


def parse_drain_tag(value: str) -> tuple[float, str, float | None] | None:
    """``(started_at, request_id, daemon_start)`` from a ``TAG_DRAIN`` value, or None if malformed."""
    parts = value.split(":")
    try:
        started = float(parts[0])
        daemon_start = float(parts[2]) if len(parts) > 2 and parts[2] else None
    except ValueError:
        return None
    if len(parts) < 2 or not parts[1] or len(parts) > 3:
        return None
    return started, _unquote(parts[1]), daemon_start


def is_our_drain(worker: Worker | None) -> TypeGuard[Worker]:
    """True if the scheduler says the worker drains with our reason prefix."""
    return worker is not None and worker.draining and is_our_reason(worker.drain_reason)


def ticket_for(node: CloudNode | None, worker: Worker | None, worker_name: str | None = None,
               request_id: str | None = None) -> DrainTicket | None:
    """Rebuild the ticket of our drain from the node's ``TAG_DRAIN`` (which survives restarts),
    else from the scheduler's record of a drain with our reason prefix; None if neither.

    When the scheduler shows a drain of ours under another request id than the tag, the tag is
    stale (a crash between a drain's end and clearing its tag): the scheduler's record wins."""
    name = worker_name or (worker.name if worker else None)
    # empty: the adapter then accepts any reason with our prefix (the exact one is unknown)
    reason = worker.drain_reason if worker is not None and worker.drain_reason else ""
    current = worker.drain_request_id if is_our_drain(worker) else None
    parsed = parse_drain_tag(node.tags.get(TAG_DRAIN, "")) if node is not None else None
    if parsed is not None and name and (current is None or current == parsed[1]):
        started, rid, daemon_start = parsed
        return DrainTicket(worker=name, request_id=rid, reason=reason, started_at=started,
                           daemon_start=daemon_start)
    if name and worker is not None and is_our_drain(worker) and (current or request_id):
        return DrainTicket(worker=name, request_id=current or request_id or "",
                           reason=reason, started_at=worker.state_since)
    return None


def worker_is_busy(worker: Worker | None) -> TypeGuard[Worker]:
    """True if the worker runs anything (jobs or busy cores)."""
    return worker is not None and (worker.running_jobs > 0 or worker.cpus_busy > 0)


def _new_request_id() -> str:
    return uuid.uuid4().hex[:12]


class Actuator:
    """Carries out :class:`Task` s against a :class:`CloudDriver` and a :class:`Scheduler`.

    ``latest_worker(name)`` returns the worker as the most recent scheduler poll saw it (the
    daemon passes its poller's latest result); by default the task's own worker is used.
    ``request_ids`` makes boot request ids (default: random), for deterministic simulations.
    ``journal``: where each boot's reservation (name, size, request id) is made durable before
    the create is sent; the reservations of a previous process found there are boots in flight
    (names taken, demand covered) until a listing shows them or :data:`BOOT_LISTING_TIMEOUT`.
    Without it a boot of a process that died is unknown to the next one until listed.
    """

    def __init__(self, cloud: CloudDriver, scheduler: Scheduler, settings: Settings, *,
                 clock: Callable[[], float],
                 latest_worker: Callable[[str], Worker | None] | None = None,
                 request_ids: Callable[[], str] = _new_request_id,
                 journal: ReservationJournal | None = None) -> None:
        self.cloud = cloud
        self.scheduler = scheduler
        self.settings = settings
        self.clock = clock
        self.latest_worker = latest_worker
        self.request_ids = request_ids
        self._lock = threading.Lock()
        self._quota: tuple[int, float] | None = None          # (count, learned at)
        self._blocked: dict[str, float] = {}                  # size -> blocked until
        self._backoff: dict[str, tuple[int, float]] = {}      # key -> (failures, not before)
        self._cloud_wait_until = 0.0                          # rate limit: no cloud call before
        self._destroys: list[float] = []
        self._boots: dict[str, Reservation] = {}              # request id -> boot not yet listed
        self._destroying: dict[str, CloudNode] = {}           # destroy raised: settle by listing
        self._destroyed_at: dict[str, float] = {}             # node id -> destroy succeeded at
        self._raised: set[str] = set()                        # request ids whose create raised
        self._restored: set[str] = set()                      # request ids of a previous process
        self._recent: dict[str, InFlight] = {}                # node -> action done after the listing
        self._listed = 0
        self._name_seen: dict[str, float] = {}                # node name -> last listed at
        self._worker_names: set[str] = set()                  # short names of workers heard from
        self._started = clock()
        self._freshest_heard: float | None = None                # newest last_heard of the last poll
        self.journal = journal
        if journal is not None:
            self._restore(journal)

    # -- state for the controller ---------------------------------------------------------------

    def update_settings(self, settings: Settings) -> None:
        """Use new settings (a reload) from the next task on."""
        self.settings = settings

    def state(self, now: float | None = None) -> ActuatorState:
        """Quota, blocked sizes, recent destroys (last hour) and boots not listed yet, at ``now``."""
        now = self.clock() if now is None else now
        with self._lock:
            quota = None
            if self._quota is not None and now - self._quota[1] < self.settings.cloud.quota_backoff:
                quota = self._quota[0]
            blocked = frozenset(s for s, until in self._blocked.items() if until > now)
            self._destroys = [t for t in self._destroys if now - t < 3600.0]
            return ActuatorState(quota=quota, blocked_sizes=blocked,
                                 recent_destroys=tuple(self._destroys),
                                 in_flight=tuple(r.in_flight() for r in self._boots.values())
                                 + tuple(self._recent.values()))

    def observe_listing(self, nodes: Iterable[CloudNode], polled_at: float | None = None) -> list[Outcome]:
        """Settle boots and destroys against a listing taken at ``polled_at``: a requested boot
        whose request id is listed is no longer in flight (a create that raised becomes a success);
        a destroy that raised whose node is gone is a success; drains, cancels and destroys done
        before the listing are forgotten (the listing's tags show them). Returns what settled."""
        now = self.clock()
        listed_at = now if polled_at is None else polled_at
        nodes = [n for n in nodes if not is_gone(n)]
        listed_ids = {n.id for n in nodes}
        out: list[Outcome] = []
        with self._lock:
            self._listed = len(nodes)
            self._name_seen.update((n.name, listed_at) for n in nodes)
            self._name_seen = {k: t for k, t in self._name_seen.items() if now - t < NAME_QUARANTINE}
            self._recent = {k: f for k, f in self._recent.items() if f.since >= listed_at}
            listed, expired, _ = settle(self._boots.values(), nodes, now, BOOT_LISTING_TIMEOUT)
            for boot, node in listed:
                rid = boot.token
                del self._boots[rid]
                if rid in self._raised:
                    self._raised.discard(rid)
                    what = "was sent by a previous process" if rid in self._restored else "raised"
                    out.append(Outcome("boot", node.id, OK, f"create of request {rid} ({boot.name}) "
                                       f"{what} but the node is listed", now, boot.size))
                self._restored.discard(rid)
            for boot in expired:
                del self._boots[boot.token]
                self._raised.discard(boot.token)
                self._restored.discard(boot.token)
                out.append(Outcome("boot", boot.token, FAILED, f"requested {int(now - boot.at)}s ago "
                                   f"({boot.name}) and never listed; given up", now, boot.size))
            if listed or expired:
                self._save_journal()
            self._destroyed_at = {k: t for k, t in self._destroyed_at.items()
                                  if k in listed_ids or now - t < DESTROY_SETTLE}
            for node_id, node in list(self._destroying.items()):
                if node_id not in listed_ids:
                    del self._destroying[node_id]
                    self._destroys.append(now)
                    out.append(Outcome("destroy", node_id, OK, "destroy raised but the node is gone "
                                       "from the listing", now, node.size, node.launched_at))
        return out

    def _free_name(self, size: str, now: float) -> str:
        """The node name template filled with a ``{seq}`` no VM uses, so names stay within a small
        set (SLURM declares ``NodeName=<cluster>-<size>-[1-N]``): the lowest number not listed in
        the last :data:`NAME_QUARANTINE` seconds (one listing may miss a VM), not booting and not
        the name of a worker the scheduler still hears from (a VM no listing shows yet); in the
        first :data:`NAME_QUARANTINE` seconds after a start, a number above every one seen (a boot
        of the previous process may not be listed yet)."""
        cs = self.settings.cloud
        fill = cs.node_name_template.format(cluster=cs.cluster, size=size, seq="{SEQ}")
        pattern = re.compile(re.escape(fill).replace(re.escape("{SEQ}"), r"(\d+)"))
        used = set(self._name_seen) | {r.name for r in self._boots.values()} | self._worker_names
        seqs = {int(m.group(1)) for name in used if (m := pattern.fullmatch(name))}
        if now - self._started < NAME_QUARANTINE:
            seq = max(seqs, default=0) + 1
        else:
            seq = next(i for i in range(1, len(seqs) + 2) if i not in seqs)
        return fill.replace("{SEQ}", str(seq))

    def _restore(self, journal: ReservationJournal) -> None:
        """Take the reservations a previous process left in ``journal`` as boots in flight."""
        now = self.clock()
        found = journal.load()
        for r in found:
            # stamped after now (a clock that ran ahead, then stepped back): held from now on
            r = replace(r, at=min(r.at, now))
            self._boots[r.token] = r
            self._raised.add(r.token)       # its create's outcome is unknown: report it once listed
            self._restored.add(r.token)
        if found:
            log.info("%d boot reservation(s) of a previous process in %s held as booting until listed "
                     "(at most %.0fs): %s", len(found), journal.path, BOOT_LISTING_TIMEOUT,
                     ", ".join(f"{r.name} (request {r.token})" for r in found))

    def _record(self, reservation: Reservation) -> str | None:
        """Hold a boot's name and make its reservation durable before the create (lock held);
        return why it could not be made durable (then there is no create), or None."""
        if self.journal is not None:
            try:
                self.journal.record(reservation)
            except OSError as exc:
                return (f"its reservation could not be recorded in {self.journal.path}: "
                        f"{exc.strerror or exc} (no create without one)")
        self._boots[reservation.token] = reservation
        return None

    def _save_journal(self) -> None:
        """Rewrite the journal with the boots not listed yet (lock held)."""
        if self.journal is None:
            return
        try:
            self.journal.keep(self._boots.values())
        except OSError as exc:
            log.warning("reservation journal %s not compacted: %s; listed boots stay in it until the "
                        "next rewrite", self.journal.path, exc.strerror or exc)

    def _remember(self, flight: InFlight) -> None:
        """Keep an action in flight until a listing taken after it shows its effect."""
        with self._lock:
            self._recent[flight.node] = flight

    def observe_poll(self, poll: SchedulerPoll) -> None:
        """Note the newest ``last_heard`` of a poll: a worker is lost when it was heard from
        ``node_stale_after`` before that (measured within one poll, so a scheduler clock that runs
        behind ours does not make every worker look lost)."""
        heard = [w.last_heard for w in poll.workers if w.last_heard > 0]
        freshest = max(heard) if heard else None
        stale = self.settings.core.node_stale_after
        # a worker still heard from holds its name, even when a listing misses its VM
        alive = {w.name.split(".", 1)[0] for w in poll.workers
                 if freshest is not None and w.last_heard > 0 and freshest - w.last_heard <= stale}
        with self._lock:
            self._freshest_heard = freshest
            self._worker_names = alive

    # -- backoff bookkeeping --------------------------------------------------------------------

    def _wait_reason(self, key: str, now: float, cloud: bool) -> str | None:
        with self._lock:
            if cloud and self._cloud_wait_until > now:
                return f"cloud rate limit: waiting until {self._cloud_wait_until - now:.0f}s from now"
            failures, not_before = self._backoff.get(key, (0, 0.0))
            if not_before > now:
                return f"retry backoff after {failures} failure(s): {not_before - now:.0f}s left"
        return None

    def _failed(self, key: str, now: float) -> float:
        with self._lock:
            failures = self._backoff.get(key, (0, 0.0))[0] + 1
            delay = min(INITIAL_BACKOFF * 2 ** (failures - 1), self.settings.poll.max_backoff)
            self._backoff[key] = (failures, now + delay)
            return delay

    def _succeeded(self, key: str) -> None:
        with self._lock:
            self._backoff.pop(key, None)

    def _cloud_error(self, err: CloudError, key: str, now: float, size: str | None = None) -> str:
        """Apply what a cloud error teaches; return the words for the outcome."""
        if err.kind is ErrorKind.RATE_LIMIT:
            delay = err.retry_after if err.retry_after else self._failed(key, now)
            with self._lock:
                self._cloud_wait_until = max(self._cloud_wait_until, now + delay)
            return f"{err}; no cloud call for {delay:.0f}s"
        if err.kind in (ErrorKind.QUOTA, ErrorKind.CAPACITY) and size is not None:
            backoff = self.settings.cloud.quota_backoff
            with self._lock:
                self._blocked[size] = now + backoff
                if err.kind is ErrorKind.QUOTA:
                    self._quota = (self._listed + len(self._boots), now)
            learned = self._quota if err.kind is ErrorKind.QUOTA else None
            what = f"quota learned: {learned[0]} nodes; " if learned else ""
            return f"{err}; {what}size {size} not booted for {backoff:.0f}s"
        delay = self._failed(key, now)
        return f"{err}; retry in {delay:.0f}s"

    # -- the work -------------------------------------------------------------------------------

    def run(self, task: Task) -> list[Outcome]:
        """Carry out one task; never raises for cloud or scheduler errors (they become outcomes)."""
        item = task.item
        if isinstance(item, BootRequest):
            return self.boot(item)
        handler = {ItemKind.DRAIN: self._drain, ItemKind.CANCEL_DRAIN: self._cancel_drain,
                   ItemKind.DESTROY: self._destroy, ItemKind.ESCALATE: self._escalate}[ItemKind(item.kind)]
        return [handler(item, task.node, task.worker)]

    def boot(self, req: BootRequest) -> list[Outcome]:
        """Create ``req.count`` nodes of ``req.size``; stop at the first quota, capacity or rate limit."""
        now = self.clock()
        size = self.settings.core.size(req.size)
        if size is None:
            return [Outcome("boot", req.size, FAILED, f"no [Size {req.size}] configured", now, req.size)]
        key = f"boot:{req.size}"
        out: list[Outcome] = []
        for _ in range(req.count):
            with self._lock:
                blocked = self._blocked.get(req.size, 0.0)
            if blocked > now:
                out.append(Outcome("boot", req.size, SKIPPED, f"size {req.size} blocked for "
                                   f"{blocked - now:.0f}s more after a quota/capacity error", now, req.size))
                break
            wait = self._wait_reason(key, now, cloud=True)
            if wait:
                out.append(Outcome("boot", req.size, SKIPPED, wait, now, req.size))
                break
            base = self.request_ids()
            rid = f"{base}.{int(now)}"  # carries the request time: boot age never precedes it
            cs = self.settings.cloud
            tags = {**cs.tags, TAG_CLUSTER: cs.cluster, TAG_SIZE: size.name, TAG_REQUEST: rid}
            with self._lock:
                reservation = Reservation(token=rid, name=self._free_name(size.name, now), size=size.name,
                                          at=now)
                unrecorded = self._record(reservation)
            if unrecorded:
                delay = self._failed(key, now)
                out.append(Outcome("boot", rid, FAILED, f"not booting {reservation.name}: {unrecorded}; "
                                   f"retry in {delay:.0f}s", now, size.name))
                break
            name = reservation.name
            try:
                node = self.cloud.create_node(size, name, tags)
            except CloudError as err:
                with self._lock:
                    if err.kind is ErrorKind.TRANSIENT:
                        # a timeout or 5xx may have created the VM: wait for the listing to tell
                        # (a throttled request was not processed, so it is retried after Retry-After)
                        self._raised.add(rid)
                    else:
                        del self._boots[rid]
                        self._save_journal()
                out.append(Outcome("boot", rid, FAILED, self._cloud_error(err, key, now, size.name),
                                   now, size.name))
                break
            self._succeeded(key)
            with self._lock:
                if self._quota is not None and self._listed + len(self._boots) > self._quota[0]:
                    self._quota = (self._listed + len(self._boots), now)
            out.append(Outcome("boot", node.id, OK, f"created {node.name} for {req.reason} "
                               f"(request {rid})", now, size.name))
        return out

    def _drain(self, item: PlanItem, node: CloudNode | None, worker: Worker | None) -> Outcome:
        now = self.clock()
        size = node.size if node else None
        key = f"drain:{item.node_id}"
        if worker is None:
            return Outcome("drain", item.node_id, SKIPPED, "no worker to drain", now, size)
        wait = self._wait_reason(key, now, cloud=False)
        if wait:
            return Outcome("drain", item.node_id, SKIPPED, wait, now, size)
        schedule = DrainSchedule(item.schedule or self.settings.drain.schedule)
        reason = item.reason  # the adapter adds our DRAIN_REASON_PREFIX
        try:
            ticket = self.scheduler.drain(worker, schedule, reason)
        except DrainRefused as err:
            return Outcome("drain", item.node_id, REFUSED, f"scheduler refused: {err}", now, size)
        except SchedulerError as err:
            delay = self._failed(key, now)
            return Outcome("drain", item.node_id, FAILED, f"{err}; retry in {delay:.0f}s", now, size)
        self._succeeded(key)
        self._remember(InFlight(node=item.node_id, action="drain", since=now, size=size,
                                request_id=ticket.request_id))
        detail = f"{schedule} drain of {worker.name} started (request {ticket.request_id})"
        if node is not None:
            try:
                self.cloud.set_tags(node, {TAG_DRAIN: drain_tag(ticket)})
            except CloudError as err:
                # the scheduler still knows the drain is ours (reason prefix), so nothing is lost
                detail += f"; recording it in the cloud tags failed: {err}"
        return Outcome("drain", item.node_id, OK, detail, now, size)

    def _cancel_drain(self, item: PlanItem, node: CloudNode | None, worker: Worker | None) -> Outcome:
        now = self.clock()
        size = node.size if node else None
        key = f"cancel:{item.node_id}"
        wait = self._wait_reason(key, now, cloud=False)
        if wait:
            return Outcome("cancel_drain", item.node_id, SKIPPED, wait, now, size)
        ticket = ticket_for(node, worker, item.worker, item.request_id)
        if ticket is not None:
            try:
                self.scheduler.cancel_drain(ticket)
            except SchedulerError as err:
                delay = self._failed(key, now)
                return Outcome("cancel_drain", item.node_id, FAILED, f"{err}; retry in {delay:.0f}s",
                               now, size)
        if node is not None and node.tags.get(TAG_DRAIN):
            try:
                self.cloud.set_tags(node, {TAG_DRAIN: ""})
            except CloudError as err:
                if err.kind is not ErrorKind.NOT_FOUND:
                    detail = self._cloud_error(err, key, now)
                    return Outcome("cancel_drain", item.node_id, FAILED,
                                   f"drain cancelled but clearing the tag failed: {detail}", now, size)
        self._succeeded(key)
        self._remember(InFlight(node=item.node_id, action="cancel_drain", since=now, size=size))
        what = f"drain {ticket.request_id} cancelled" if ticket else "no drain of ours found; tag cleared"
        return Outcome("cancel_drain", item.node_id, OK, f"{what} ({item.reason})", now, size)

    def _escalate(self, item: PlanItem, node: CloudNode | None, worker: Worker | None) -> Outcome:
        now = self.clock()
        size = node.size if node else None
        ticket = ticket_for(node, worker, item.worker, item.request_id)
        if ticket is None:
            return Outcome("escalate", item.node_id, SKIPPED, "no drain of ours to escalate", now, size)
        key = f"escalate:{item.node_id}"
        wait = self._wait_reason(key, now, cloud=False)
        if wait:
            return Outcome("escalate", item.node_id, SKIPPED, wait, now, size)
        schedule = DrainSchedule(item.schedule or DrainSchedule.QUICK.value)
        try:
            self.scheduler.escalate(ticket, schedule)
        except SchedulerError as err:
            delay = self._failed(key, now)
            return Outcome("escalate", item.node_id, FAILED, f"{err}; retry in {delay:.0f}s", now, size)
        self._succeeded(key)
        return Outcome("escalate", item.node_id, OK, f"drain {ticket.request_id} made {schedule} "
                       f"({item.reason})", now, size)

    def _destroy(self, item: PlanItem, node: CloudNode | None, worker: Worker | None) -> Outcome:
        now = self.clock()
        if node is None:
            return Outcome("destroy", item.node_id, SKIPPED, "node not in the listing", now)
        key = f"destroy:{node.id}"
        wait = self._wait_reason(key, now, cloud=True)
        if wait:
            return Outcome("destroy", node.id, SKIPPED, wait, now, node.size)
        with self._lock:
            done = self._destroyed_at.get(node.id)
        if done is not None and now - done < DESTROY_SETTLE:
            # listings are eventually consistent: a node destroyed moments ago may still show
            return Outcome("destroy", node.id, SKIPPED, f"destroyed {now - done:.0f}s ago; waiting "
                           "for the listing to show it gone", now, node.size)
        worker_name = item.worker or (worker.name if worker else None)
        latest = worker
        if worker_name and self.latest_worker is not None:
            latest = self.latest_worker(worker_name) or worker
        # a worker the scheduler still hears from can be asked; a lost one cannot
        freshest = self._freshest_heard if self._freshest_heard is not None else now
        alive = latest is not None and not (
            latest.last_heard > 0 and freshest - latest.last_heard > self.settings.core.node_stale_after)
        resuming = bool(node.tags.get(TAG_DESTROY))
        ticket = ticket_for(node, latest, worker_name, item.request_id)
        if ticket is not None and alive and not resuming:
            try:
                confirmation = self.scheduler.confirm_drained(ticket)
            except SchedulerError as err:
                delay = self._failed(key, now)
                return Outcome("destroy", node.id, FAILED, f"could not confirm the drain: {err}; "
                               f"retry in {delay:.0f}s", now, node.size)
            if not confirmation.ok:
                return Outcome("destroy", node.id, REFUSED, f"drain not confirmed: {confirmation.reason}",
                               now, node.size)
            why = f"drain confirmed ({confirmation.reason})"
        elif item.cancellable and not resuming:
            return Outcome("destroy", node.id, REFUSED, "no drain of ours to confirm; a node that "
                           "may run jobs is only destroyed after our drain", now, node.size)
        else:
            if worker_is_busy(latest):  # never destroy what the latest poll shows running jobs
                return Outcome("destroy", node.id, REFUSED, f"worker {latest.name} runs "
                               f"{latest.running_jobs} job(s) in the latest poll", now, node.size)
            why = ("finishing a destroy started before" if resuming else
                   "worker lost" if ticket is not None else "nothing to drain")
        if not resuming:
            try:
                self.cloud.set_tags(node, {TAG_DESTROY: str(int(now))})
            except CloudError as err:
                if err.kind is ErrorKind.NOT_FOUND:
                    return self._destroyed(node, worker_name, now, "node already gone")
                return Outcome("destroy", node.id, FAILED, self._cloud_error(err, key, now), now, node.size)
        try:
            self.cloud.destroy_node(node)
        except CloudError as err:
            if err.kind is ErrorKind.NOT_FOUND:
                return self._destroyed(node, worker_name, now, "node already gone")
            with self._lock:
                self._destroying[node.id] = node
            return Outcome("destroy", node.id, FAILED, self._cloud_error(err, key, now), now, node.size)
        return self._destroyed(node, worker_name, now, f"{why}; {item.reason}")

    def _destroyed(self, node: CloudNode, worker_name: str | None, now: float, why: str) -> Outcome:
        key = f"destroy:{node.id}"
        self._succeeded(key)
        done = self.clock()  # after the call: a listing started before it may still show the node
        self._remember(InFlight(node=node.id, action="destroy", since=done, size=node.size))
        with self._lock:
            self._destroys.append(now)
            self._destroying.pop(node.id, None)
            self._destroyed_at[node.id] = done
        detail = f"destroyed: {why}"
        if worker_name:
            try:
                self.scheduler.node_destroyed(worker_name)
            except SchedulerError as err:
                detail += f"; telling the scheduler failed: {err}"
        return Outcome("destroy", node.id, OK, detail, now, node.size, node.launched_at)
