"""HTCondor's part of ``nodemanager check``: the collector reachable, and the authorization the
node manager needs there (READ: every poll queries the collector's slot and schedd ads), asked of
the collector itself with a ``ping`` (what ``condor_ping -type collector READ`` asks: a
collector that refuses READ refuses to say where it is too, so it is reached by address). With
``[Daemon] steering`` on: whether the negotiator ranks by the controller's attribute."""

from __future__ import annotations

import socket
from typing import Any, Iterator

from nodemanager.configuration.settings import Settings
from nodemanager.preflight.checklist import Check

__all__ = ["htcondor_checks", "LEVELS"]

# the authorization levels the node manager needs at the collector
LEVELS = ("READ",)


def htcondor_checks(settings: Settings, module: Any = None) -> Iterator[Check]:
    """The collector of ``[Scheduler] collector`` (else COLLECTOR_HOST) reached over TCP, then
    pinged for each of :data:`LEVELS`. ``module``: the ``htcondor2`` module."""
    if module is None:
        import htcondor2

        module = htcondor2
    where = settings.scheduler.options.get("collector") or str(module.param.get("COLLECTOR_HOST", ""))
    host, _, port = where.split(",")[0].strip().rpartition(":")
    if not port.isdigit():
        host, port = where.split(",")[0].strip(), "9618"
    try:
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            address = conn.getpeername()[0]
    except OSError as exc:
        yield Check("htcondor collector", False, f"{where or 'no COLLECTOR_HOST'}: not reachable: "
                    f"{exc.strerror or exc}", "set [Scheduler] collector (host:port) to the pool's "
                    "collector, and let this host reach it")
        return
    yield Check("htcondor collector", True, f"{where}: reachable")
    sinful = f"<{address}:{port}>" if ":" not in address else f"<[{address}]:{port}>"
    for level in LEVELS:
        try:
            reply = module.ping(sinful, level)
        except (module.HTCondorException, OSError) as exc:
            granted, who = False, f"refused ({exc})"
        else:
            granted = bool(reply.get("AuthorizationSucceeded"))
            who = f"{'granted' if granted else 'refused'} to {reply.get('MyRemoteUserName') or 'this user'}"
        yield Check(f"htcondor {level} at the collector", granted, f"{where}: {level} {who}",
                    f"allow this host and user {level} at the collector (ALLOW_{level}), "
                    "see docs/htcondor.md")
    if settings.core.steering:
        yield _steering(module, sinful)


def _steering(module: Any, collector: str) -> Check:
    """Steering sets ``NodeManagerKeepRank`` on the startds; only a negotiator whose
    ``NEGOTIATOR_PRE_JOB_RANK`` reads it places jobs by it (its configuration, read remotely)."""
    from nodemanager.scheduler.htcondor_steer import KEEP_RANK

    fix = ("install deploy/htcondor/70-nodemanager-steering.conf on the central manager and run "
           "condor_reconfig, or set [Daemon] steering = no")
    try:
        ad = module.Collector(collector).locate(module.DaemonType.Negotiator)
        rank = module.RemoteParam(ad).get("NEGOTIATOR_PRE_JOB_RANK", "")
    except (module.HTCondorException, OSError, ValueError) as exc:
        return Check("htcondor steering", None, f"cannot read the negotiator's NEGOTIATOR_PRE_JOB_RANK: {exc}",
                     fix)
    if KEEP_RANK.lower() in str(rank).lower():
        return Check("htcondor steering", True, f"the negotiator ranks by {KEEP_RANK}")
    return Check("htcondor steering", None,
                 f"[Daemon] steering is on but the negotiator's NEGOTIATOR_PRE_JOB_RANK "
                 f"({rank or 'unset'}) does not read {KEEP_RANK}: jobs are placed as without steering", fix)
