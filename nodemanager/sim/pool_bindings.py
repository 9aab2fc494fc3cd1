"""In-process HTCondor bindings over a simulated pool's startds, so the real adapter runs on them."""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from nodemanager.scheduler import DEFAULT_CONSTRAINT
from nodemanager.sim.job import Job
from nodemanager.sim.startd import DrainError, SimStartd

__all__ = ["PoolBindings", "StartdIndex"]


class StartdIndex(Protocol):
    """What the bindings read of the pool: its time, its startds and its idle jobs."""

    now: float
    _joined: dict[str, SimStartd]
    _by_address: dict[str, SimStartd]

    def _idle_jobs(self) -> list[tuple[int, Job]]: ...

    def _touch(self, st: SimStartd, freed: bool = False) -> None: ...


class PoolBindings:
    """The adapter's :class:`~nodemanager.scheduler.htcondor_bindings.Bindings`, answered by the pool's startds
    with plain dict ads and the bindings' generic exceptions."""

    def __init__(self, pool: StartdIndex) -> None:
        import htcondor2

        self._pool = pool
        self._exc = htcondor2.HTCondorException
        self.error_types: tuple[type[BaseException], ...] = (htcondor2.HTCondorException, OSError)

    def _startd(self, location: Mapping[str, Any], message: str) -> SimStartd:
        address: Any = location.get("MyAddress")
        st = self._pool._by_address.get(address)
        if st is None or not st.alive:
            raise self._exc(message)
        return st

    def query_slots(self, constraint: str, projection: Sequence[str]) -> list[Mapping[str, Any]]:
        now = self._pool.now
        if constraint == DEFAULT_CONSTRAINT:
            return [st.pslot_ad(now) for st in self._pool._joined.values() if st.alive]
        from nodemanager.classad.expressions import evaluate, is_true

        return [ad for st in self._pool._joined.values() if st.alive for ad in st.slot_ads(now)
                if is_true(evaluate(constraint, ad, now))]

    def query_startd(self, location: Mapping[str, Any], projection: Sequence[str]) -> list[Mapping[str, Any]]:
        return list(self._startd(location, "Failed communication with collector.").live_slot_ads(self._pool.now))

    def query_idle_jobs(self, projection: Sequence[str]) -> list[Mapping[str, Any]]:
        return [{"RequestCpus": j.cpus, "RequestMemory": j.ram_mb, "QDate": int(j.submit_time),
                 **({"RequestGPUs": j.gpus} if j.gpus else {}),
                 **({"Requirements": j.requirements} if j.requirements else {})}
                for _, j in self._pool._idle_jobs()]

    def query_history(self, constraint: str, projection: Sequence[str], match: int,
                      stop: str) -> list[Mapping[str, Any]]:
        """No history: the pool reports its finished jobs in its poll (``SchedulerPoll.finished``)."""
        return []

    def drain_jobs(self, location: Mapping[str, Any], schedule: str, check_expr: str, start_expr: str,
                   reason: str) -> str:
        st = self._startd(location, "Startd failed to start draining jobs.")
        try:
            rid = st.drain(self._pool.now, schedule, on_completion="nothing", check_expr=check_expr,
                           start_expr=start_expr, reason=reason)
        except DrainError:
            raise self._exc("Startd failed to start draining jobs.") from None
        self._pool._touch(st)
        return rid

    def cancel_drain_jobs(self, location: Mapping[str, Any], request_id: str) -> None:
        st = self._startd(location, "Startd failed to cancel draining jobs.")
        try:
            st.cancel(self._pool.now, request_id)
        except DrainError:
            raise self._exc("Startd failed to cancel draining jobs.") from None
        self._pool._touch(st, freed=True)

    def update_machine_ad(self, location: Mapping[str, Any], attributes: Mapping[str, str]) -> None:
        st = self._startd(location, "Failed to update the machine ad.")
        st.attrs.update({k: int(v) for k, v in attributes.items() if v != "undefined"})
        for k in [k for k, v in attributes.items() if v == "undefined"]:
            st.attrs.pop(k, None)
        self._pool._touch(st)

    def vacate(self, location: Mapping[str, Any], fast: bool) -> None:
        st = self._startd(location, "Startd failed to vacate.")
        st.vacate(self._pool.now, fast=fast)
        self._pool._touch(st)
