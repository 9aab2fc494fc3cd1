"""The gate every mutation passes: only the acting leader mutates, and it signs with its fence.

:class:`FencedCloud` and :class:`FencedScheduler` wrap the ports. Reads pass through (a standby
polls and plans). A mutation is checked against ``lease.acting()`` when the port is called, and
again by the port itself right before it sends the request (``send_gate``: after the cloud's rate
limit and call lock, before each ``scontrol``/``scancel`` or HTCondor command), so a wait inside
the port never carries a call past the lease: if this process is not the acting leader at that
moment, nothing is sent and the call fails as refused. Every cloud
mutation carries ``TAG_FENCE`` (the leader's fencing revision): created VMs get it among their
tags, tag writes include it, and a destroy first tags the node with it unless it already carries
ours, so a late action of a deposed leader shows as an older fence on the VM.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

from nodemanager.cloud import CloudDriver, CloudError, ErrorKind, TAG_FENCE
from nodemanager.model import CloudNode, Size
from nodemanager.scheduler import (Confirmation, DrainSchedule, DrainTicket, SchedulerError,
                                   SchedulerPoll)

__all__ = ["FencedCloud", "FencedScheduler", "Gate", "NOT_LEADER"]

NOT_LEADER = "not the HA leader (standby or lease lapsing): nothing sent"


class Gate(Protocol):
    def acting(self) -> bool: ...

    @property
    def fence(self) -> int | None: ...


class _Gated:
    """A port behind the gate; what is not a mutation passes through."""

    def __init__(self, inner: Any, gate: Gate) -> None:
        self._inner, self._gate = inner, gate
        self.name = getattr(inner, "name", type(inner).__name__)
        if hasattr(inner, "send_gate"):  # the port checks again right before it sends
            inner.send_gate = self._check

    def _check(self, what: str) -> None:
        raise NotImplementedError

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)


class FencedCloud(_Gated):
    """The cloud port, mutating only while ``gate.acting()``, every mutation tagged with the fence."""

    _inner: CloudDriver

    def _fence(self, call: str) -> str:
        fence = self._gate.fence
        if fence is None or not self._gate.acting():
            raise CloudError(ErrorKind.PERMANENT, NOT_LEADER, call=call)
        return str(fence)

    def _check(self, what: str) -> None:
        self._fence(what)

    def list_nodes(self) -> list[CloudNode]:
        return self._inner.list_nodes()

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        fence = self._fence("create_node")
        return self._inner.create_node(size, name, {**tags, TAG_FENCE: fence})

    def set_tags(self, node: CloudNode, tags: Mapping[str, str]) -> None:
        fence = self._fence("set_tags")
        self._inner.set_tags(node, {**tags, TAG_FENCE: fence})

    def destroy_node(self, node: CloudNode) -> None:
        fence = self._fence("destroy_node")
        if node.tags.get(TAG_FENCE) != fence:
            self._inner.set_tags(node, {TAG_FENCE: fence})
            self._fence("destroy_node")  # the tag write took time: check again before the destroy
        self._inner.destroy_node(node)


class FencedScheduler(_Gated):
    """The scheduler port, draining, cancelling, escalating and marking destroyed nodes only while
    ``gate.acting()``."""

    def _check(self, node: str) -> None:
        if not self._gate.acting():
            raise SchedulerError(NOT_LEADER, node=node, transient=False)

    def poll(self) -> SchedulerPoll:
        return self._inner.poll()

    def drain(self, worker: Any, schedule: DrainSchedule, reason: str) -> DrainTicket:
        self._check(worker.name)
        return self._inner.drain(worker, schedule, reason)

    def cancel_drain(self, ticket: DrainTicket) -> None:
        self._check(ticket.worker)
        self._inner.cancel_drain(ticket)

    def escalate(self, ticket: DrainTicket, schedule: DrainSchedule) -> None:
        self._check(ticket.worker)
        self._inner.escalate(ticket, schedule)

    def confirm_drained(self, ticket: DrainTicket) -> Confirmation:
        return self._inner.confirm_drained(ticket)

    def node_destroyed(self, worker_name: str) -> None:
        self._check(worker_name)
        self._inner.node_destroyed(worker_name)

    def steer(self, ranks: Any) -> int:
        for worker, _ in ranks:
            self._check(worker.name)
        return int(self._inner.steer(ranks))
