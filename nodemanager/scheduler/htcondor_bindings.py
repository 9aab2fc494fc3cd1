"""The HTCondor bindings seam: the few calls the adapter makes (:class:`Bindings`), their
production implementation on the official ``htcondor2`` module (:class:`Htcondor2Bindings`), and
:func:`plain_ad`, which turns what they return into plain dicts.

The tests pass the simulated pool's module (``nodemanager.sim.collector``) to
:class:`Htcondor2Bindings`, so exactly this code runs against the simulated collector and startds.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol, Sequence

__all__ = ["Bindings", "Htcondor2Bindings", "plain_ad", "IDLE_JOBS", "PER_REPLY"]

IDLE_JOBS = "JobStatus == 1"
# What the schedd adds to every job ad it sends, whatever the projection: the time of the reply.
# Left in, it would make alike jobs differ from poll to poll.
PER_REPLY = ("ServerTime",)


class Bindings(Protocol):
    """The few HTCondor calls the adapter makes. Ads may be ``classad2.ClassAd`` or dicts."""

    error_types: tuple[type[BaseException], ...]

    def query_slots(self, constraint: str, projection: Sequence[str]) -> list[Mapping[str, Any]]:
        """The collector's slot ads matching ``constraint`` (one query)."""

    def query_startd(self, location: Mapping[str, Any], projection: Sequence[str]) -> list[Mapping[str, Any]]:
        """Every slot ad of one startd, asked of the startd itself (live, not the collector copy)."""

    def query_idle_jobs(self, projection: Sequence[str]) -> list[Mapping[str, Any]]:
        """The idle jobs of the pool's schedds, without what differs per reply (``PER_REPLY``)."""

    def query_history(self, constraint: str, projection: Sequence[str], match: int,
                      stop: str) -> list[Mapping[str, Any]]:
        """The newest ``match`` history ads of each schedd matching ``constraint``, read back from the
        newest until an ad matching ``stop``."""

    def drain_jobs(self, location: Mapping[str, Any], schedule: str, check_expr: str, start_expr: str,
                   reason: str) -> str:
        """``Startd.drainJobs`` with ``CompletionType.Nothing``; returns the request id."""

    def cancel_drain_jobs(self, location: Mapping[str, Any], request_id: str) -> None:
        """``Startd.cancelDrainJobs(request_id)``."""

    def vacate(self, location: Mapping[str, Any], fast: bool) -> None:
        """``Startd.vacate``: soft-kill (graceful) or hard-kill (fast) every claim."""

    def update_machine_ad(self, location: Mapping[str, Any], attributes: Mapping[str, str]) -> None:
        """``condor_update_machine_ad``: attributes (name -> ClassAd expression) added to every
        ad of the startd of the slot ``location``, kept across its later updates."""


class Htcondor2Bindings:
    """:class:`Bindings` on the official ``htcondor2`` bindings (or anything with its API).

    ``pool`` is the collector (None: the configured ``COLLECTOR_HOST``); ``schedds`` the schedd
    names to ask for idle jobs (empty: every schedd the collector knows). ``module`` defaults to
    ``htcondor2``; the tests pass the simulated pool's module here.
    Authorization comes from the HTCondor configuration (``SEC_*``, tokens), not from here.
    """

    def __init__(self, pool: str | None = None, schedds: Iterable[str] = (), *, module: Any = None,
                 query_timeout: float | None = None,
                 update_tool: Sequence[str] = ("condor_update_machine_ad",)) -> None:
        if module is None:
            import htcondor2
            module = htcondor2
        self._htc = module
        if query_timeout:
            module.param["QUERY_TIMEOUT"] = str(int(query_timeout))
        self._pool = pool
        self._schedds = tuple(schedds)
        self._update_tool = tuple(update_tool)
        # socket.gaierror (an OSError) comes out of locate() for unresolvable names.
        self.error_types: tuple[type[BaseException], ...] = (module.HTCondorException, OSError)

    def _location(self, ad: Mapping[str, Any]) -> Any:
        import classad2

        if isinstance(ad, classad2.ClassAd):
            return ad
        return classad2.ClassAd({k: ad[k] for k in ("MyAddress", "Name", "Machine") if ad.get(k) is not None})

    def query_slots(self, constraint: str, projection: Sequence[str]) -> list[Any]:
        htc = self._htc
        return htc.Collector(self._pool).query(htc.AdType.Startd, constraint, list(projection))

    def query_startd(self, location: Mapping[str, Any], projection: Sequence[str]) -> list[Any]:
        htc = self._htc
        return htc.Collector(self._location(location)).query(htc.AdType.Startd, None, list(projection))

    def _schedds_located(self) -> list[Any]:
        htc = self._htc
        collector = htc.Collector(self._pool)
        if self._schedds:
            return [collector.locate(htc.DaemonType.Schedd, name) for name in self._schedds]
        return list(collector.locateAll(htc.DaemonType.Schedd))

    def query_history(self, constraint: str, projection: Sequence[str], match: int, stop: str) -> list[Any]:
        htc = self._htc
        return [ad for loc in self._schedds_located() if loc is not None
                for ad in htc.Schedd(loc).history(constraint=constraint, projection=list(projection),
                                                  match=match, since=stop)]

    def query_idle_jobs(self, projection: Sequence[str]) -> list[Any]:
        htc = self._htc
        jobs: list[Any] = []
        for loc in self._schedds_located():
            if loc is not None:
                for ad in htc.Schedd(loc).query(constraint=IDLE_JOBS, projection=list(projection)):
                    for key in PER_REPLY:
                        if key in ad:
                            del ad[key]
                    jobs.append(ad)
        return jobs

    def drain_jobs(self, location: Mapping[str, Any], schedule: str, check_expr: str, start_expr: str,
                   reason: str) -> str:
        htc = self._htc
        return htc.Startd(self._location(location)).drainJobs(
            drain_type=htc.DrainType[schedule.capitalize()],
            on_completion=htc.CompletionType.Nothing,
            check_expr=check_expr, start_expr=start_expr, reason=reason)

    def authorized(self, location: Mapping[str, Any], level: str) -> bool | None:
        """Whether the daemon at ``location`` grants us ``level`` (what ``condor_ping`` asks);
        None when it does not answer. A daemon that refuses to start the command at all but
        answers a READ ping refuses the level."""
        ping = getattr(self._htc, "ping", None)
        if ping is None:
            return None
        address = str(location.get("MyAddress"))
        try:
            reply = ping(address, level)
        except self.error_types:
            try:
                ping(address, "READ")
            except self.error_types:
                return None
            return False
        return bool(reply.get("AuthorizationSucceeded"))

    def cancel_drain_jobs(self, location: Mapping[str, Any], request_id: str) -> None:
        self._htc.Startd(self._location(location)).cancelDrainJobs(request_id)

    def vacate(self, location: Mapping[str, Any], fast: bool) -> None:
        htc = self._htc
        htc.Startd(self._location(location)).vacate(htc.VacateType.Fast if fast else htc.VacateType.Graceful)


    def update_machine_ad(self, location: Mapping[str, Any], attributes: Mapping[str, str]) -> None:
        import subprocess

        # a slot's Name is slotN@<startd name>; the tool asks the startd by that name
        startd = str(location.get("Name", "")).split("@", 1)[-1]
        pool = ["-pool", self._pool] if self._pool else []
        text = "".join(f"{k} = {v}\n" for k, v in attributes.items())
        try:
            p = subprocess.run([*self._update_tool, *pool, "-name", startd, "/dev/stdin"], input=text,
                               capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise OSError(f"condor_update_machine_ad -name {startd}: timed out") from None
        if p.returncode != 0:
            raise OSError(f"condor_update_machine_ad -name {startd}: exit {p.returncode}: "
                          f"{(p.stderr or p.stdout).strip()}")


def plain_ad(ad: Mapping[str, Any]) -> dict[str, Any]:
    """A plain dict of ``ad``: expressions evaluated in the ad, Undefined/Error left out."""
    import classad2

    if not isinstance(ad, classad2.ClassAd):
        return dict(ad)
    from nodemanager.classad.expressions import plain_value

    out: dict[str, Any] = {}
    for key in ad.keys():
        value = ad[key]
        if isinstance(value, classad2.ExprTree):
            value = ad.eval(key)
        value = plain_value(value)
        if value is not None:
            out[key] = value
    return out
