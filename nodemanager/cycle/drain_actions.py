"""The actuator's scheduler-side actions on a worker: start a drain (recorded in the node's cloud
tags too), cancel one (clearing those tags), and escalate one to a quicker schedule. A refusal,
a denial for lack of rights and a failure each become an :class:`~nodemanager.model.Outcome` and
wait as :mod:`~nodemanager.cycle.call_backoff` says. :class:`~nodemanager.cycle.actuate.Actuator`
carries out boots and destroys on top of it."""

from __future__ import annotations

from nodemanager.cloud import CloudError, ErrorKind, TAG_DESTROY, TAG_DRAIN
from nodemanager.core.identity import controller_tag
from nodemanager.cycle.actuator_memory import FAILED, OK, REFUSED, SKIPPED, ActuatorMemory
from nodemanager.cycle.drain_tickets import drain_tag, ticket_for
from nodemanager.model import CloudNode, InFlight, Outcome, PlanItem, Worker
from nodemanager.scheduler import DrainRefused, DrainSchedule, SchedulerError
from nodemanager.tags import TAG_CONTROLLER, TAG_DEPLOYMENT

__all__ = ["DrainActions"]


class DrainActions(ActuatorMemory):
    """Drain, cancel and escalate (see the module docstring); thread-safe as the memory is."""

    def _marks(self, now: float) -> dict[str, str]:
        """Whose action this is, written with every boot and tag write: the deployment id and
        this controller (so another controller of the deployment sees us act)."""
        marks = {}
        if self.settings.cloud.deployment_id:
            marks[TAG_DEPLOYMENT] = self.settings.cloud.deployment_id
        if self.controller:
            marks[TAG_CONTROLLER] = controller_tag(self.controller, now)
        return marks

    def _drain(self, item: PlanItem, node: CloudNode | None, worker: Worker | None) -> Outcome:
        now = self.clock()
        size = node.size if node else None
        key = f"drain:{item.node_id}"
        if worker is None:
            return Outcome("drain", item.node_id, SKIPPED, "no worker to drain", now, size)
        wait = self.backoff.wait_reason(key, cloud=False)
        if wait:
            return Outcome("drain", item.node_id, SKIPPED, self.backoff.denial_wait(key) or wait, now, size)
        schedule = DrainSchedule(item.schedule or self.settings.drain.schedule)
        reason = item.reason  # the adapter adds our DRAIN_REASON_PREFIX
        try:
            ticket = self.scheduler.drain(worker, schedule, reason)
        except DrainRefused as err:
            delay = self.backoff.refusal(key)
            again = f"; refused again, next try in {delay:.0f}s" if delay is not None else ""
            return Outcome("drain", item.node_id, REFUSED, f"scheduler refused: {err}{again}", now, size)
        except SchedulerError as err:
            return self._scheduler_failed("drain", item.node_id, key, err, now, size)
        self.backoff.succeeded(key)
        self._remember(InFlight(node=item.node_id, action="drain", since=now, size=size,
                                request_id=ticket.request_id))
        detail = f"{schedule} drain of {worker.name} started (request {ticket.request_id})"
        if node is not None:
            try:
                self.cloud.set_tags(node, {TAG_DRAIN: drain_tag(ticket), **self._marks(now)})
            except CloudError as err:
                # the scheduler still knows the drain is ours (reason prefix), so nothing is lost
                detail += f"; recording it in the cloud tags failed: {err}"
        return Outcome("drain", item.node_id, OK, detail, now, size, request=ticket.request_id)

    def _cancel_drain(self, item: PlanItem, node: CloudNode | None, worker: Worker | None) -> Outcome:
        now = self.clock()
        size = node.size if node else None
        key = f"cancel:{item.node_id}"
        wait = self.backoff.wait_reason(key, cloud=False)
        if wait:
            return Outcome("cancel_drain", item.node_id, SKIPPED, self.backoff.denial_wait(key) or wait, now, size)
        ticket = ticket_for(node, worker, item.worker, item.request_id)
        if ticket is not None:
            try:
                self.scheduler.cancel_drain(ticket)
            except SchedulerError as err:
                return self._scheduler_failed("cancel_drain", item.node_id, key, err, now, size)
        clear = {tag: "" for tag in (TAG_DRAIN, TAG_DESTROY) if node is not None and node.tags.get(tag)}
        if node is not None and clear:
            try:
                self.cloud.set_tags(node, {**clear, **self._marks(now)})
            except CloudError as err:
                if err.kind is not ErrorKind.NOT_FOUND:
                    detail = self._cloud_error(err, key, which=node.cloud)
                    return Outcome("cancel_drain", item.node_id, FAILED,
                                   f"drain cancelled but clearing the tag failed: {detail}", now, size)
        self.backoff.succeeded(key)
        self._remember(InFlight(node=item.node_id, action="cancel_drain", since=now, size=size))
        what = f"drain {ticket.request_id} cancelled" if ticket else f"no drain of ours found; {', '.join(clear)} cleared"
        return Outcome("cancel_drain", item.node_id, OK, f"{what} ({item.reason})", now, size)

    def _escalate(self, item: PlanItem, node: CloudNode | None, worker: Worker | None) -> Outcome:
        now = self.clock()
        size = node.size if node else None
        ticket = ticket_for(node, worker, item.worker, item.request_id)
        if ticket is None:
            return Outcome("escalate", item.node_id, SKIPPED, "no drain of ours to escalate", now, size)
        key = f"escalate:{item.node_id}"
        wait = self.backoff.wait_reason(key, cloud=False)
        if wait:
            return Outcome("escalate", item.node_id, SKIPPED, self.backoff.denial_wait(key) or wait, now, size)
        schedule = DrainSchedule(item.schedule or DrainSchedule.QUICK.value)
        try:
            self.scheduler.escalate(ticket, schedule)
        except SchedulerError as err:
            return self._scheduler_failed("escalate", item.node_id, key, err, now, size)
        self.backoff.succeeded(key)
        return Outcome("escalate", item.node_id, OK, f"drain {ticket.request_id} made {schedule} "
                       f"({item.reason})", now, size)

    def _scheduler_failed(self, kind: str, node_id: str, key: str, err: SchedulerError, now: float,
                          size: str | None = None) -> Outcome:
        """A scheduler call that raised: refused for lack of rights (probed again later), else
        failed (retried after the backoff)."""
        if err.denied:
            return Outcome(kind, node_id, REFUSED, self.backoff.no_permission(key, str(err)), now, size)
        delay = self.backoff.failed(key)
        return Outcome(kind, node_id, FAILED, f"{err}; retry in {delay:.0f}s", now, size)
