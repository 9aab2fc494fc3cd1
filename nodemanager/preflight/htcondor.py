"""HTCondor's part of ``nodemanager check``: the collector reachable, and the authorization the
node manager needs there (READ: every poll queries the collector's slot and schedd ads), asked of
the collector itself with a ``ping`` (what ``condor_ping -type collector READ`` asks: a
collector that refuses READ refuses to say where it is too, so it is reached by address). With
``[Daemon] steering`` on: whether the negotiator ranks by the controller's attribute. Then READ
at the schedds the poll reads, and the drain right (``DRAIN_JOBS``, ADMINISTRATOR) at a few of our
startds: without it every drain is refused and idle VMs stay paid."""

from __future__ import annotations

import socket
from typing import Any, Iterator, Mapping

from nodemanager.configuration.settings import Settings
from nodemanager.preflight.checklist import Check

__all__ = ["htcondor_checks", "LEVELS"]

# the authorization levels the node manager needs at the collector
LEVELS = ("READ",)
# startds asked for the drain right (one per machine): enough to catch a pool-wide setting
STARTDS_ASKED = 3


def kind_checks(settings: Settings, polled: bool, scripts: Mapping[str, str]) -> Iterator[Check]:
    """The HTCondor kind's checks for ``nodemanager check`` (:attr:`SchedulerKind.preflight
    <nodemanager.configuration.kinds.SchedulerKind>`), also after a failed poll: they say which
    part failed."""
    return htcondor_checks(settings)


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
        answer, who = _granted(module, sinful, level)
        granted = bool(answer)                       # a collector reached that does not answer refuses
        who = who if answer is not None else f"refused ({who})"
        yield Check(f"htcondor {level} at the collector", granted, f"{where}: {level} {who}",
                    f"allow this host and user {level} at the collector (ALLOW_{level}), "
                    "see docs/htcondor.md")
    if settings.core.steering:
        yield _steering(module, sinful)
    yield from _schedds_and_startds(module, settings, sinful)


def _granted(module: Any, location: Any, level: str) -> tuple[bool | None, str]:
    """Whether ``level`` is granted at the daemon, and to whom, in words; None and the error
    when the ping got no answer."""
    try:
        reply = module.ping(location, level)
    except (module.HTCondorException, OSError) as exc:
        return None, str(exc)
    granted = bool(reply.get("AuthorizationSucceeded"))
    return granted, f"{'granted' if granted else 'refused'} to {reply.get('MyRemoteUserName') or 'this user'}"


def _schedds_and_startds(module: Any, settings: Settings, collector: str) -> Iterator[Check]:
    """READ at every schedd the poll reads; DRAIN_JOBS at up to :data:`STARTDS_ASKED` of our startds."""
    from nodemanager.scheduler.htcondor_attributes import DEFAULT_CONSTRAINT

    coll = module.Collector(collector)
    names = [s.strip() for s in str(settings.scheduler.options.get("schedd") or "").split(",") if s.strip()]
    try:
        schedds = [a for a in coll.query(module.AdType.Schedd, "true", ["Name", "MyAddress"])
                   if not names or a.get("Name") in names]
        startds = coll.query(module.AdType.Startd, settings.scheduler.options.get("constraint") or DEFAULT_CONSTRAINT,
                             ["Name", "Machine", "MyAddress"])
    except (module.HTCondorException, OSError, ValueError):
        return                                       # the collector's own check says why
    fix = "allow this host and user READ at the schedds (ALLOW_READ), see docs/htcondor.md"
    if not schedds:
        yield Check("htcondor READ at the schedds", None,
                    f"no schedd {'named ' + ', '.join(names) + ' ' if names else ''}in the collector", fix)
    for ad in schedds:
        granted, who = _granted(module, ad, "READ")
        yield Check("htcondor READ at the schedds", granted,
                    f"{ad.get('Name')}: READ {who if granted is not None else f'not answered ({who})'}", fix)
    fix = ("allow this host and user ADMINISTRATOR at the execute nodes' startds (ALLOW_ADMINISTRATOR), "
           "see docs/htcondor.md")
    machines = {str(a.get("Machine") or a.get("Name")): a for a in startds}
    if not machines:
        yield Check("htcondor DRAIN_JOBS at the startds", None, "no startd of ours in the pool yet: ask one "
                    "once a VM joined (condor_ping -type startd -name <its name> DRAIN_JOBS)", fix)
        return
    asked = [machines[m] for m in sorted(machines)[:STARTDS_ASKED]]
    said: dict[bool | None, list[str]] = {True: [], False: [], None: []}
    for ad in asked:
        address = str(ad.get("MyAddress"))
        granted, who = _granted(module, address, "DRAIN_JOBS")
        if granted is None and _granted(module, address, "READ")[0] is not None:
            granted, who = False, f"refused ({who})"  # the startd answers, but not this command
        said[granted].append(f"{ad.get('Machine') or ad.get('Name')}: DRAIN_JOBS "
                             + (who if granted is not None else f"not answered ({who})"))
    if said[False]:
        yield Check("htcondor DRAIN_JOBS at the startds", False,
                    f"{'; '.join(said[False])}: every drain of these is refused", fix)
    elif said[True]:
        yield Check("htcondor DRAIN_JOBS at the startds", True, f"{'; '.join(said[True])} "
                    f"({len(said[True])} of {len(machines)} asked)")
    else:                                            # a dead VM's ad lingers in the collector a while
        yield Check("htcondor DRAIN_JOBS at the startds", None, "; ".join(said[None]), fix)


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
