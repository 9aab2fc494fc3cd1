"""How a drain of ours is recorded and recognised: the ``TAG_DRAIN`` value written on the cloud
node (it survives restarts), the ticket rebuilt from it or from the scheduler's record, and the
tests on a polled worker (busy; our drain is :func:`nodemanager.core.is_our_drain`) that the
actuator and the controller share.
"""

from __future__ import annotations

from typing import TypeGuard

from nodemanager.cloud import TAG_DRAIN
from nodemanager.core import is_our_drain
from nodemanager.model import CloudNode, Worker
from nodemanager.scheduler import DrainTicket

__all__ = ["drain_tag", "parse_drain_tag", "is_our_drain", "ticket_for", "worker_is_busy"]


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
