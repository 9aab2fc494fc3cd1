"""The ads a simulated startd publishes: its partitionable slot's, its dynamic slots', and the
draining estimates in them (``ResMgr::compute_draining_attrs`` / ``publish_draining_attrs``).

:class:`SlotAds` renders them from the state :class:`~nodemanager.sim.startd.SimStartd` keeps; the
attributes below are that state, as the startd's state machine sets it.
"""

from __future__ import annotations

from typing import Any, Iterable

from nodemanager.sim.drain_requests import GRACEFUL
from nodemanager.sim.dynamic_slot import BUSY, PHASE_STATE, RETIRING, VACATING, DSlot
from nodemanager.sim.job import Job

__all__ = ["SlotAds", "COLLECTOR_ONLY"]

# What the collector adds to a startd's ads; the startd's own slot ads lack it.
COLLECTOR_ONLY = ("DaemonStartTime",)

# Equal values in many ads held at once (100,000 startds' ads in the collector's copy) are one
# object each: times and counts as one int per value, the child states as one list per sequence.
_SHARED_MAX = 65536
_ints: dict[int, int] = {}
_children: dict[tuple[int, ...], tuple[list[str], list[str]]] = {}


def shared_int(value: float) -> int:
    """``int(value)``, the same object as the last equal one (bounded: forgotten past a size)."""
    i = int(value)
    got = _ints.get(i)
    if got is None:
        if len(_ints) >= _SHARED_MAX:
            _ints.clear()
        got = _ints[i] = i
    return got


def _child_states(phases: tuple[int, ...]) -> tuple[list[str], list[str]]:
    """``ChildState`` and ``ChildActivity`` of dynamic slots in these phases (shared: never
    mutated by a reader of the ad)."""
    got = _children.get(phases)
    if got is None:
        if len(_children) >= _SHARED_MAX:
            _children.clear()
        got = _children[phases] = ([PHASE_STATE[p][0] for p in phases], [PHASE_STATE[p][1] for p in phases])
    return got


class SlotAds:
    """The ad side of a startd (mixed into :class:`~nodemanager.sim.startd.SimStartd`)."""

    __slots__ = ("_grace_done", "_quick_done")  # the estimates this side keeps up to date

    name: str
    address: str
    cpus: int
    memory: int
    gpus: int
    max_retirement: float
    vacate_time: float
    attrs: dict[str, Any]
    dslots: dict[int, DSlot]
    free_cpus: int
    free_memory: int
    free_gpus: int
    state: str
    activity: str
    entered_state: float
    entered_activity: float
    daemon_start: float
    job_starts: int
    draining: bool
    drain_how: str
    drain_reason: str | None
    drain_request: str | None
    drain_complete: bool
    start_expr: str | None
    last_drain_start: float | None
    last_drain_stop: float | None
    reclaim_deadline: float | None
    total_badput: float
    total_unclaimed: float
    _unclaimed_mark: float
    _grace_done: float | None
    _quick_done: float | None

    def advance(self, now: float) -> None:
        """Run the startd forward to ``now`` (the state machine's own)."""
        raise NotImplementedError

    def _estimate(self, now: float) -> tuple[float, float]:
        """``compute_draining_attrs``: returns (graceful badput, quick badput) and updates the
        completion times (frozen at the idle-since time while no claim is active)."""
        if not self.dslots:
            if self._grace_done is None or self._grace_done > now:
                self._grace_done = now
            if self._quick_done is None or self._quick_done > now:
                self._quick_done = now
            return 0.0, 0.0
        gb = qb = 0.0
        gmax = qmax = 0.0
        for s in self.dslots.values():
            runtime = now - s.start
            p = s.phase
            if p == BUSY or p == RETIRING:
                r = 0.0 if s.awd else max(0.0, s.retire_end - now)
                v = s.vacate
            elif p == VACATING:
                r, v = 0.0, max(0.0, s.kill_at - now)
            else:
                r = v = 0.0
            c = s.job.cpus
            qb += c * (runtime + v)
            rv = r if r > v else v
            gb += c * (runtime + rv)
            if rv > gmax:
                gmax = rv
            if v > qmax:
                qmax = v
        self._grace_done = now + gmax
        self._quick_done = now + qmax
        return gb, qb

    def pslot_ad(self, now: float) -> dict[str, Any]:
        """The partitionable slot's ad as of ``now`` (the startd's live copy), as a plain dict."""
        self.advance(now)
        gb, qb = self._estimate(now)
        unclaimed = self.total_unclaimed
        if self.draining and now > self._unclaimed_mark:
            unclaimed += self.free_cpus * (now - self._unclaimed_mark)
        children = sorted(self.dslots.values(), key=lambda s: s.n) if self.dslots else ()
        ad = self._static_ad()
        ad["State"] = self.state
        ad["Activity"] = self.activity
        ad["EnteredCurrentState"] = shared_int(self.entered_state)
        ad["EnteredCurrentActivity"] = shared_int(self.entered_activity)
        ad["MyCurrentTime"] = shared_int(now)
        ad["DaemonStartTime"] = shared_int(self.daemon_start)
        ad["Cpus"] = self.free_cpus
        ad["Memory"] = self.free_memory
        if self.gpus:
            ad["GPUs"] = self.free_gpus
            ad["TotalSlotGPUs"] = self.gpus
        ad["NumDynamicSlots"] = len(children)
        ad["ChildState"], ad["ChildActivity"] = _child_states(tuple(s.phase for s in children))
        if children:  # each job's own retirement left, as the real p-slot publishes it
            ad["ChildRetirementTimeRemaining"] = [
                0 if s.awd or s.phase not in (BUSY, RETIRING) else max(0, int(s.retire_end - now))
                for s in children]
        ad["Start"] = self._start_value()
        ad["JobStarts"] = self.job_starts
        if self.reclaim_deadline is not None:
            ad["ReclaimNoticeDeadline"] = int(self.reclaim_deadline)
        ad["ExpectedMachineGracefulDrainingCompletion"] = shared_int(self._grace_done or now)
        ad["ExpectedMachineQuickDrainingCompletion"] = shared_int(self._quick_done or now)
        ad["ExpectedMachineGracefulDrainingBadput"] = shared_int(gb)
        ad["ExpectedMachineQuickDrainingBadput"] = shared_int(qb)
        if self.total_badput > 0:
            ad["TotalMachineDrainingBadput"] = int(self.total_badput)
        if unclaimed > 0:
            ad["TotalMachineDrainingUnclaimedTime"] = int(unclaimed)
        if self.last_drain_start is not None:
            ad["LastDrainStartTime"] = shared_int(self.last_drain_start)
        if self.last_drain_stop is not None:
            ad["LastDrainStopTime"] = int(self.last_drain_stop)
        if self.draining:
            ad["Draining"] = True
            ad["DrainReason"] = self.drain_reason
            ad["DrainingRequestId"] = self.drain_request
        ad.update(self.attrs)
        return ad

    def _static_ad(self) -> dict[str, Any]:
        """A fresh dict of the attributes that do not change while the startd runs (built each
        time rather than kept: a kept copy costs about 450 bytes a startd)."""
        return {
            "MyType": "Machine",
            "Name": f"slot1@{self.name}",
            "Machine": self.name,
            "MyAddress": self.address,
            "SlotID": 1,
            "SlotType": "Partitionable",
            "PartitionableSlot": True,
            "TotalSlotCpus": self.cpus,
            "TotalCpus": self.cpus,
            "TotalSlotMemory": self.memory,
            "TotalMemory": self.memory,
            "MaxJobRetirementTime": shared_int(self.max_retirement),
            "MachineMaxVacateTime": shared_int(self.vacate_time),
        }

    def _start_value(self) -> Any:
        if not self.draining:
            return True
        if self.drain_how == GRACEFUL and self.start_expr is not None and not self.drain_complete:
            return self.start_expr
        return False

    def slot_ads(self, now: float) -> list[dict[str, Any]]:
        """Every slot ad of this startd as of ``now``: the p-slot first, then each dynamic slot."""
        p = self.pslot_ad(now)
        out = [p]
        shared = {k: p[k] for k in p if k.startswith(("ExpectedMachine", "TotalMachineDraining",
                                                        "LastDrain", "Drain"))}
        for s in sorted(self.dslots.values(), key=lambda s: s.n):
            st, act = PHASE_STATE[s.phase]
            r = 0.0 if s.awd or s.phase not in (BUSY, RETIRING) else max(0.0, s.retire_end - now)
            ad = {
                "MyType": "Machine",
                "Name": f"slot1_{s.n}@{self.name}",
                "Machine": self.name,
                "MyAddress": self.address,
                "SlotID": 1,
                "SlotType": "Dynamic",
                "DynamicSlot": True,
                "State": st,
                "Activity": act,
                "EnteredCurrentState": int(s.entered),
                "MyCurrentTime": int(now),
                "DaemonStartTime": int(self.daemon_start),
                "Cpus": s.job.cpus,
                "Memory": s.job.ram_mb,
                "RemoteOwner": "user@sim",
                "GlobalJobId": f"sim#{s.job.id}",
                "JobStart": int(s.start),
                "RetirementTimeRemaining": int(r),
                "AcceptedWhileDraining": s.awd,
                **shared,
                **self.attrs,
            }
            out.append(ad)
        return out

    def live_slot_ads(self, now: float) -> list[dict[str, Any]]:
        """:meth:`slot_ads` as the startd itself has them (a direct query, a drain's check
        expression): without what only the collector's copy carries (:data:`COLLECTOR_ONLY`)."""
        return [{k: v for k, v in ad.items() if k not in COLLECTOR_ONLY} for ad in self.slot_ads(now)]

    @property
    def idle_since(self) -> int:
        """While no claim is active: the idle-since time its ad tells the classifier, in whole
        seconds as advertised (the later of ``EnteredCurrentState`` and the frozen
        ``ExpectedMachineGracefulDrainingCompletion``)."""
        return max(int(self.entered_state), int(self._grace_done or self.entered_state))

    def running(self) -> Iterable[tuple[Job, float]]:
        """The jobs running now, with their start times."""
        return ((s.job, s.start) for s in self.dslots.values())
