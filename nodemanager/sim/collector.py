"""A simulated HTCondor collector, schedd and startd clients that look like the ``htcondor2`` module.

:class:`SimCondor` is passed as ``module=`` to
:class:`~nodemanager.scheduler.htcondor_bindings.Htcondor2Bindings`, so the adapter's real binding calls run
against simulated startds (:class:`~nodemanager.sim.startd.SimStartd`). What it reproduces
(``../shared/notes/htcondor-draining.md`` §2 and §5):

* ``Collector(pool).query(AdType.Startd, constraint, projection)`` answers from the collector's
  *copies* of the slot ads, as ``classad2.ClassAd`` objects, with the constraint evaluated by
  ``classad2``. A startd sends its ads when its state changes (after ``change_delay`` seconds,
  the update's latency) and every ``update_interval`` seconds (UPDATE_INTERVAL, 300);
  ``LastHeardFrom`` is when the copy arrived. Ads of a startd that vanished without a clean exit
  stay until ``classad_lifetime`` (CLASSAD_LIFETIME, 900) passes; a clean exit removes them at once.
* ``Collector(startd_ad)`` (a ClassAd with the startd's ``MyAddress``) asks the startd itself:
  live ads, as ``condor_status -direct`` does.
* ``Startd(ad).drainJobs(...)`` / ``cancelDrainJobs(id)`` / ``vacate(...)`` go to the startd
  named by ``MyAddress``, with the bindings' argument checks, their generic ``HTCondorException``
  messages, a missing ADMINISTRATOR authorization, and the hard-coded 20 s command timeout of an
  unresponsive startd (60 s, QUERY_TIMEOUT, for a direct query of it); the injected ``sleep``
  moves the injected clock, nothing really waits.
* ``Schedd(location).query(constraint, projection)`` over submitted job ads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from nodemanager.classad.expressions import bind_time, is_true
from nodemanager.sim.startd import COMPLETIONS, DrainError, SimStartd

__all__ = ["SimCondor", "COMMAND_TIMEOUT", "QUERY_TIMEOUT"]

COMMAND_TIMEOUT = 20.0     # DRAIN_JOBS / CANCEL_DRAIN_JOBS (dc_startd.cpp, hard-coded)
QUERY_TIMEOUT = 60.0       # QUERY_TIMEOUT's default, for queries of an unresponsive startd


@dataclass
class _Copy:
    """The collector's copy of one startd's ads."""

    ads: list[dict[str, Any]]
    received: float
    signature: tuple


@dataclass
class _StartdEntry:
    startd: SimStartd
    copy: _Copy | None = None
    gone_at: float | None = None           # the VM vanished (ads linger until they expire)
    flags: set[str] = field(default_factory=set)


class SimCondor:
    """A simulated pool behind the ``htcondor2`` API (see module doc).

    Fault switches, per startd (by machine name): :meth:`hang` (no answer: commands time out after
    20 s), :meth:`lose_replies` (the command is carried out but the answer never arrives),
    :meth:`deny` (the caller lacks ADMINISTRATOR authorization). ``collector_down`` makes collector
    queries fail at once (connection refused); ``collector_hung`` after QUERY_TIMEOUT.
    """

    def __init__(self, clock: Callable[[], float], *, sleep: Callable[[float], Any] | None = None,
                 update_interval: float = 300.0, change_delay: float = 0.0,
                 classad_lifetime: float = 900.0) -> None:
        import htcondor2

        self.AdType = htcondor2.AdType
        self.DaemonType = htcondor2.DaemonType
        self.DrainType = htcondor2.DrainType
        self.CompletionType = htcondor2.CompletionType
        self.VacateType = htcondor2.VacateType
        self.HTCondorException = htcondor2.HTCondorException
        self.clock = clock
        self.sleep = sleep or (lambda seconds: None)
        self.update_interval = update_interval
        self.change_delay = change_delay
        self.classad_lifetime = classad_lifetime
        self.collector_down = False
        self.collector_hung = False
        self.entries: dict[str, _StartdEntry] = {}
        self.jobs: list[dict[str, Any]] = []
        self.schedd_name = "schedd@sim"
        self.calls: list[tuple[str, str]] = []   # (command, machine) of every startd command

    # ---------------------------------------------------------------- the simulated world

    def add(self, startd: SimStartd) -> SimStartd:
        """A startd joins: it sends its ads at once."""
        self.entries[startd.name] = _StartdEntry(startd)
        self._publish(self.entries[startd.name], self.clock())
        return startd

    def startd(self, name: str) -> SimStartd:
        return self.entries[name].startd

    def vanish(self, name: str, *, clean: bool = False) -> None:
        """The VM is gone. A clean exit invalidates the ads at once; otherwise they linger."""
        e = self.entries[name]
        e.startd.stop(self.clock())
        if clean:
            del self.entries[name]
        else:
            e.gone_at = self.clock()

    def hang(self, name: str, on: bool = True) -> None:
        self._flag(name, "hang", on)

    def lose_replies(self, name: str, on: bool = True) -> None:
        self._flag(name, "lose", on)

    def deny(self, name: str, on: bool = True) -> None:
        self._flag(name, "deny", on)

    def _flag(self, name: str, flag: str, on: bool) -> None:
        (self.entries[name].flags.add if on else self.entries[name].flags.discard)(flag)

    def submit(self, **job: Any) -> None:
        """Queue a job ad (``JobStatus`` defaults to 1, idle)."""
        ad = {"JobStatus": 1, "ClusterId": len(self.jobs) + 1, "ProcId": 0, "QDate": int(self.clock())}
        ad.update(job)
        self.jobs.append(ad)

    # ---------------------------------------------------------------- collector updates

    @staticmethod
    def _signature(st: SimStartd) -> tuple:
        return (st.alive, st.state, st.activity, st.draining, st.drain_request, st.daemon_start,
                st.free_cpus, tuple(sorted((s.n, s.phase) for s in st.dslots.values())))

    def _publish(self, e: _StartdEntry, now: float) -> None:
        ads = e.startd.slot_ads(now)
        for ad in ads:
            ad["LastHeardFrom"] = int(now)
        e.copy = _Copy(ads, now, self._signature(e.startd))

    def refresh(self) -> None:
        """Bring the collector's copies up to the clock: updates on change and on the interval,
        expiry of ads not refreshed within the lifetime."""
        now = self.clock()
        for name in list(self.entries):
            e = self.entries[name]
            st = e.startd
            if e.gone_at is None and not st.alive:   # a clean exit invalidates its ads at once
                del self.entries[name]
                continue
            if e.gone_at is not None:
                if e.copy is None or now - e.copy.received >= self.classad_lifetime:
                    del self.entries[name]
                continue
            st.advance(now)
            if e.copy is None or now - e.copy.received >= self.update_interval:
                self._publish(e, now)
                continue
            if self._signature(st) != e.copy.signature and now - st.last_change >= self.change_delay:
                self._publish(e, now)

    # ---------------------------------------------------------------- htcondor2 look-alikes

    def Collector(self, pool: Any = None, security: Any = None) -> "_Collector":  # noqa: N802
        return _Collector(self, pool)

    def Schedd(self, location: Any = None) -> "_Schedd":  # noqa: N802
        return _Schedd(self)

    def Startd(self, location: Any = None) -> "_Startd":  # noqa: N802
        import classad2

        if location is None:
            raise self.HTCondorException("Unable to locate local daemon.")
        if not isinstance(location, classad2.ClassAd):
            raise TypeError("location must be a ClassAd")
        return _Startd(self, location)

    def ping(self, location: Any, level: str = "READ") -> dict[str, Any]:
        """``htcondor2.ping``: whether the startd at ``location`` (an address) grants ``level``
        (a startd told to :meth:`deny` grants nothing)."""
        e = self._entry_at(location)
        if e is None:
            raise self.HTCondorException("Failed to ping")
        return {"AuthorizationSucceeded": "deny" not in e.flags, "MyRemoteUserName": "nodemanager@sim"}

    def _entry_at(self, address: Any) -> _StartdEntry | None:
        for e in self.entries.values():
            if e.startd.address == address and e.gone_at is None and e.startd.alive:
                return e
        return None


def _project(ad: Mapping[str, Any], projection: list[str] | None) -> Any:
    import classad2

    if projection:
        keep = {k.lower() for k in projection} | {"mytype"}
        ad = {k: v for k, v in ad.items() if k.lower() in keep}
    return classad2.ClassAd({k: v for k, v in ad.items() if v is not None})


def _select(ads: list[dict[str, Any]], constraint: Any, now: float,
            exc: type[Exception]) -> list[dict[str, Any]]:
    import classad2

    if constraint is None or constraint is True or str(constraint).strip().lower() in ("", "true"):
        return ads
    try:
        tree = classad2.ExprTree(bind_time(str(constraint), now))
    except Exception:
        raise exc("Invalid query.") from None
    return [ad for ad in ads
            if is_true(tree.eval(classad2.ClassAd({k: v for k, v in ad.items() if v is not None})))]


class _Collector:
    def __init__(self, sim: SimCondor, pool: Any) -> None:
        import classad2

        self._sim = sim
        self._direct = pool.get("MyAddress") if isinstance(pool, classad2.ClassAd) else None

    def query(self, ad_type: Any = None, constraint: Any = None, projection: list[str] | None = None,
              statistics: str | None = None) -> list[Any]:
        sim = self._sim
        if ad_type is not None and not isinstance(ad_type, sim.AdType):
            raise TypeError("ad_type must be an AdType")
        now = sim.clock()
        if self._direct is not None:
            e = sim._entry_at(self._direct)
            if e is None or "hang" in e.flags:
                if e is not None:
                    sim.sleep(QUERY_TIMEOUT)
                raise sim.HTCondorException("Failed communication with collector.")
            ads = e.startd.live_slot_ads(now)
        else:
            if sim.collector_hung:
                sim.sleep(QUERY_TIMEOUT)
            if sim.collector_down or sim.collector_hung:
                raise sim.HTCondorException("Failed communication with collector.")
            sim.refresh()
            ads = [ad for e in sim.entries.values() if e.copy is not None for ad in e.copy.ads]
        return [_project(ad, projection) for ad in _select(ads, constraint, now, sim.HTCondorException)]

    def locate(self, daemon_type: Any, name: str | None = None) -> Any:
        import classad2

        if daemon_type == self._sim.DaemonType.Schedd and name in (None, self._sim.schedd_name):
            return classad2.ClassAd({"MyType": "Scheduler", "Name": self._sim.schedd_name,
                                     "MyAddress": "<127.0.0.1:9618?sock=schedd>"})
        return None

    def locateAll(self, daemon_type: Any) -> list[Any]:  # noqa: N802
        ad = self.locate(daemon_type)
        return [ad] if ad is not None else []


class _Schedd:
    def __init__(self, sim: SimCondor) -> None:
        self._sim = sim

    def query(self, constraint: Any = "True", projection: list[str] | None = None, callback: Any = None,
              limit: int = -1, opts: Any = None) -> list[Any]:
        sim = self._sim
        ads = _select(sim.jobs, constraint, sim.clock(), sim.HTCondorException)
        return [_project(ad, list(projection or []) or None) for ad in ads]


class _Startd:
    """``htcondor2.Startd``: drain, cancel and vacate commands to one simulated startd."""

    def __init__(self, sim: SimCondor, location: Any) -> None:
        self._sim = sim
        self._address = location.get("MyAddress")

    def _command(self, what: str, failure: str, fn: Callable[[SimStartd, float], Any]) -> Any:
        sim = self._sim
        e = sim._entry_at(self._address)
        if e is None:  # nothing listens there: connection refused, at once
            raise sim.HTCondorException(failure)
        sim.calls.append((what, e.startd.name))
        if "hang" in e.flags:
            sim.sleep(COMMAND_TIMEOUT)
            raise sim.HTCondorException(failure)
        if "deny" in e.flags:
            raise sim.HTCondorException(failure)
        try:
            result = fn(e.startd, sim.clock())
        except DrainError:
            raise sim.HTCondorException(failure) from None
        if "lose" in e.flags:
            sim.sleep(COMMAND_TIMEOUT)
            raise sim.HTCondorException(failure)
        return result

    def drainJobs(self, drain_type: Any = None, on_completion: Any = None,  # noqa: N802
                  check_expr: str | None = None, start_expr: str | None = None,
                  reason: str | None = None) -> str:
        sim = self._sim
        drain_type = sim.DrainType.Graceful if drain_type is None else drain_type
        on_completion = sim.CompletionType.Nothing if on_completion is None else on_completion
        if not isinstance(drain_type, sim.DrainType):
            raise TypeError("drain_type must be a DrainType")
        if not isinstance(on_completion, sim.CompletionType):
            raise TypeError("on_completion must be a CompletionType")
        if check_expr is not None and not isinstance(check_expr, str):
            raise TypeError("check_expr must be a string")
        if start_expr is not None and not isinstance(start_expr, str):
            raise TypeError("start_expr must be a string")
        how = drain_type.name.lower()
        completion = COMPLETIONS[int(on_completion)]
        return self._command("drain", "Startd failed to start draining jobs.",
                             lambda st, now: st.drain(now, how, on_completion=completion,
                                                      check_expr=check_expr, start_expr=start_expr,
                                                      reason=reason if reason is not None else "by command"))

    def cancelDrainJobs(self, request_id: str | None = None) -> None:  # noqa: N802
        if request_id is not None and not isinstance(request_id, str):
            raise TypeError("request_id must be a string")
        self._command("cancel", "Startd failed to cancel draining jobs.",
                      lambda st, now: st.cancel(now, request_id))

    def vacate(self, vacate_fast: Any = None) -> None:
        sim = self._sim
        fast = vacate_fast == sim.VacateType.Fast
        self._command("vacate", "Failed to send vacate command.", lambda st, now: st.vacate(now, fast=fast))
