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
:data:`~nodemanager.cycle.call_backoff.INITIAL_BACKOFF` up to ``PollSettings.max_backoff``. A drain the scheduler refuses is
retried at the next cycle; refused again within :data:`~nodemanager.cycle.call_backoff.REFUSAL_REPEAT`, it backs off the same way
(a startd that refuses every drain is not asked every cycle). Cloud errors by kind:

- quota: learn the quota (our node count now) and block that size for ``CloudSettings.quota_backoff``;
- capacity: block that size for ``quota_backoff``;
- rate_limit: no cloud call until ``retry_after`` (or the backoff) has passed;
- transient: retry after the backoff; a create that raised and whose node shows up in a later
  listing (found by its ``TAG_REQUEST``) is a success;
- not_found: a destroy of a gone node is a success;
- permanent: reported, retried only after the backoff.

A scheduler call refused for lack of rights or credentials (``SchedulerError.denied``) is no
passing fault: its outcome reads ``refused: no permission (...)``, it is tried again only every
:data:`~nodemanager.cycle.call_backoff.PERMISSION_PROBE`, and :meth:`denials` lists it for the page, the metrics and the alert.

Safety rules for a destroy: when the node carries a drain of ours (``TAG_DRAIN``, or our reason
prefix in the scheduler) and its worker is still heard from, the scheduler's
:meth:`confirm_drained` must say ``ok`` from fresh state first — whatever the plan item says;
a node without our drain is destroyed only by a non-cancellable item (unpaired or down node),
and only if no worker that could be the node's (its cloud id, or its name or address whatever
cloud id it advertises: ambiguous pairings and stale ids included), as the latest poll sees it
(``latest_worker``), runs anything. A
cancellable destroy without our drain is refused. ``TAG_DESTROY`` is written before
``destroy_node`` so a destroy interrupted by a restart is finished on the next start (by a
non-cancellable item only); a drain cancel clears it too.
Drains, their cancels and escalations are :class:`~nodemanager.cycle.drain_actions.DrainActions`.
Thread-safe: several actuator actors may share one instance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nodemanager.cycle.actuator_memory import BOOT_LISTING_TIMEOUT, DESTROY_SETTLE, FAILED, OK, REFUSED, SKIPPED
from nodemanager.cycle.call_backoff import INITIAL_BACKOFF
from nodemanager.cloud import CloudError, ErrorKind, TAG_CLUSTER, TAG_DESTROY, TAG_REQUEST, TAG_SIZE
from nodemanager.core import Reservation, is_lost
from nodemanager.core.leftovers import NO_VM
from nodemanager.core.pair import candidates
from nodemanager.tags import TAG_PRICE, TAG_SETTINGS, price_tag
from nodemanager.cycle.drain_actions import DrainActions
from nodemanager.cycle.drain_tickets import ticket_for, worker_is_busy
from nodemanager.cycle.steering import SteerRequest
from nodemanager.model import BootRequest, CloudNode, InFlight, ItemKind, Outcome, PlanItem, Worker
from nodemanager.scheduler import SchedulerError

__all__ = ["Actuator", "Task", "INITIAL_BACKOFF", "BOOT_LISTING_TIMEOUT"]


@dataclass(frozen=True, slots=True)
class Task:
    """One piece of actuator work: a plan item with the node and worker it is about (from the
    snapshot it was planned on), or a boot request."""

    item: PlanItem | BootRequest | SteerRequest
    node: CloudNode | None = None
    worker: Worker | None = None

    @property
    def key(self) -> str:
        """What the task is about, so two tasks on the same node are never run at once."""
        if isinstance(self.item, BootRequest):
            return f"boot:{self.item.size}"
        if isinstance(self.item, SteerRequest):
            return "steer"
        return self.item.node_id


class Actuator(DrainActions):
    """Carries out :class:`Task` s against a :class:`CloudDriver` and a :class:`Scheduler`.

    ``latest_worker(name)`` returns the worker as the most recent scheduler poll saw it (the
    daemon passes its poller's latest result); by default the task's own worker is used.
    ``request_ids`` makes boot request ids (default: random), for deterministic simulations.
    ``journal``: where each boot's reservation (name, size, request id) is made durable before
    the create is sent; the reservations of a previous process found there are boots in flight
    (names taken, demand covered) until a listing shows them or :data:`BOOT_LISTING_TIMEOUT`.
    Without it a boot of a process that died is unknown to the next one until listed.
    """

    # -- the work -------------------------------------------------------------------------------

    def run(self, task: Task) -> list[Outcome]:
        """Carry out one task; never raises for cloud or scheduler errors (they become outcomes)."""
        item = task.item
        if isinstance(item, BootRequest):
            return self.boot(item)
        if isinstance(item, SteerRequest):
            return [self.steer(item)]
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
                blocked = self._blocked.get(req.size, -math.inf) - self._mono()
            if blocked > 0:
                out.append(Outcome("boot", req.size, SKIPPED, f"size {req.size} blocked for "
                                   f"{blocked:.0f}s more after a quota/capacity error", now, req.size))
                break
            wait = self.backoff.wait_reason(key, cloud=True, which=size.cloud)
            if wait:
                out.append(Outcome("boot", req.size, SKIPPED, wait, now, req.size))
                break
            base = self.request_ids()
            rid = f"{base}.{int(now)}"  # carries the request time: boot age never precedes it
            cs = self.settings.cloud_of(size)
            tags = {**cs.tags, TAG_CLUSTER: cs.cluster, TAG_SIZE: size.name, TAG_REQUEST: rid,
                    TAG_PRICE: price_tag(size.price), **self._marks(now)}
            digest = dict(self.settings.core.size_digests).get(size.name)
            if digest:  # drift from the configuration is seen on this tag
                tags[TAG_SETTINGS] = digest
            with self._lock:
                reservation = Reservation(token=rid, name=self._free_name(size.name, now), size=size.name,
                                          at=now)
                unrecorded = self._record(reservation)
            if unrecorded:
                delay = self.backoff.failed(key)
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
                        self._booted.pop(rid, None)   # refused: nothing was booted
                        self._kept("boot", rid, None)
                        self._save_journal()
                out.append(Outcome("boot", rid, FAILED, self._cloud_error(err, key, size.name),
                                   now, size.name))
                break
            self.backoff.succeeded(key)
            self.breakers.created(size.name)
            with self._lock:
                if self._quota is not None and self._listed + len(self._boots) > self._quota[0]:
                    self._quota = (self._listed + len(self._boots), self._mono())
            out.append(Outcome("boot", node.id, OK, f"created {node.name} for {req.reason} "
                               f"(request {base}){self._tell_booted(node)}", now, size.name, request=base))
        return out

    def _destroy(self, item: PlanItem, node: CloudNode | None, worker: Worker | None) -> Outcome:
        now = self.clock()
        if node is None and item.node_id.startswith(NO_VM) and item.worker:
            return self._give_back(item, now)
        if node is None:
            return Outcome("destroy", item.node_id, SKIPPED, "node not in the listing", now)
        key = f"destroy:{node.id}"
        wait = self.backoff.wait_reason(key, cloud=True, which=node.cloud)
        if wait:
            return Outcome("destroy", node.id, SKIPPED, wait, now, node.size)
        with self._lock:
            ago = self._mono() - self._destroyed_at.get(node.id, -math.inf)
        if ago < DESTROY_SETTLE:
            # listings are eventually consistent: a node destroyed moments ago may still show
            return Outcome("destroy", node.id, SKIPPED, f"destroyed {ago:.0f}s ago; waiting "
                           "for the listing to show it gone", now, node.size)
        worker_name = item.worker or (worker.name if worker else None)
        latest = worker
        if worker_name and self.latest_worker is not None:
            latest = self.latest_worker(worker_name) or worker
        # a worker the scheduler still hears from can be asked; a lost one cannot
        heard = self.freshest_heard()
        freshest = heard if heard is not None else now
        alive = latest is not None and not is_lost(latest, freshest, self.settings.core.node_stale_after)
        # only the plan's resumption (never cancellable) skips the drain a cancellable destroy needs
        resuming = bool(node.tags.get(TAG_DESTROY)) and not item.cancellable
        ticket = ticket_for(node, latest, worker_name, item.request_id)
        if ticket is not None and alive and not resuming:
            try:
                confirmation = self.scheduler.confirm_drained(ticket)
            except SchedulerError as err:
                delay = self.backoff.failed(key)
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
            busy = self._busy_match(node, latest)
            if busy is not None:  # never destroy what the latest poll shows running jobs
                return Outcome("destroy", node.id, REFUSED, f"worker {busy.name} runs "
                               f"{busy.running_jobs} job(s) in the latest poll", now, node.size)
            why = ("finishing a destroy started before" if resuming else
                   "worker lost" if ticket is not None else "nothing to drain")
        if not resuming:
            try:
                self.cloud.set_tags(node, {TAG_DESTROY: str(int(now)), **self._marks(now)})
            except CloudError as err:
                if err.kind is ErrorKind.NOT_FOUND:
                    return self._destroyed(node, worker_name, now, "node already gone")
                return Outcome("destroy", node.id, FAILED, self._cloud_error(err, key, which=node.cloud), now, node.size)
        try:
            self.cloud.destroy_node(node)
        except CloudError as err:
            if err.kind is ErrorKind.NOT_FOUND:
                return self._destroyed(node, worker_name, now, "node already gone")
            with self._lock:
                self._destroying[node.id] = node
            return Outcome("destroy", node.id, FAILED, self._cloud_error(err, key, which=node.cloud), now, node.size)
        return self._destroyed(node, worker_name, now, f"{why}; {item.reason}")

    def steer(self, req: SteerRequest) -> Outcome:
        """Hand new placement ranks to the scheduler (its ``steer``: SLURM weights, HTCondor
        machine attributes)."""
        now = self.clock()
        steer = getattr(self.scheduler, "steer", None)
        if steer is None:
            return Outcome("steer", "placement", FAILED, f"scheduler {self.scheduler.name} cannot steer", now)
        try:
            calls = steer(req.ranks)
        except SchedulerError as err:
            return Outcome("steer", "placement", FAILED, f"{req.size}: {err}", now)
        return Outcome("steer", "placement", OK, f"{req.size} ({calls} scheduler call(s))", now)

    def _tell_booted(self, node: CloudNode) -> str:
        """Hand the scheduler the new VM's id for its name (SLURM rewrites a record left naming the
        previous VM); what went wrong, as words for the outcome."""
        booted = getattr(self.scheduler, "node_booted", None)
        if booted is None:
            return ""
        try:
            booted(node.name, node.id)
        except SchedulerError as err:
            return f"; writing its instance id into the scheduler's record failed: {err}"
        return ""

    def _give_back(self, item: PlanItem, now: float) -> Outcome:
        """The scheduler's "node destroyed" step alone, for a name we drained whose VM is gone."""
        assert item.worker is not None
        key = f"destroy:{item.node_id}"
        wait = self.backoff.wait_reason(key, cloud=False)
        if wait:
            return Outcome("destroy", item.node_id, SKIPPED, self.backoff.denial_wait(key) or wait, now)
        latest = self.latest_worker(item.worker) if self.latest_worker is not None else None
        if worker_is_busy(latest):
            return Outcome("destroy", item.node_id, REFUSED, f"worker {latest.name} runs "
                           f"{latest.running_jobs} job(s) in the latest poll", now)
        try:
            self.scheduler.node_destroyed(item.worker)
        except SchedulerError as err:
            return self._scheduler_failed("destroy", item.node_id, key, err, now)
        self.backoff.succeeded(key)
        return Outcome("destroy", item.node_id, OK, f"{item.worker} given back to the scheduler's pool: "
                       f"{item.reason}", now)

    def _busy_match(self, node: CloudNode, latest: Worker | None) -> Worker | None:
        """The node's worker, or else any worker of the last poll that could be the node's, that
        runs jobs as the latest poll sees it (None: none)."""
        if worker_is_busy(latest):
            return latest
        with self._lock:
            polled = self._polled[0]
        for w in candidates(node, polled):
            now_w = (self.latest_worker(w.name) if self.latest_worker is not None else None) or w
            if worker_is_busy(now_w):
                return now_w
        return None

    def _destroyed(self, node: CloudNode, worker_name: str | None, now: float, why: str) -> Outcome:
        key = f"destroy:{node.id}"
        self.backoff.succeeded(key)
        done = self.clock()  # after the call: a listing started before it may still show the node
        self._remember(InFlight(node=node.id, action="destroy", since=done, size=node.size))
        with self._lock:
            self._destroys[node.id] = now
            self._kept("destroy", node.id, now)
            self._destroying.pop(node.id, None)
            self._destroyed_at[node.id] = self._mono()
        detail = f"destroyed: {why}"
        if worker_name:
            try:
                self.scheduler.node_destroyed(worker_name)
            except SchedulerError as err:
                told = self.backoff.no_permission(key, str(err)) if err.denied else str(err)
                detail += f"; telling the scheduler failed: {told}"
        return Outcome("destroy", node.id, OK, detail, now, node.size, node.launched_at)
