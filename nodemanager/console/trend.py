"""The pool over the last hours, for the status page's charts: one point per minute (nodes by the
state the core reads and spend per hour at the minute's last cycle, the most cores queued in the
minute), taken from each cycle's report, the last
:data:`SPAN` seconds kept in memory (a restart starts the charts afresh). Thread-safe: the daemon
adds after each cycle, the status server reads."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from nodemanager.console.summary import booting, spend_per_hour
from nodemanager.model import CycleReport

__all__ = ["PoolTrend", "TrendPoint", "SPAN", "STEP", "STATES"]

SPAN = 6 * 3600.0          # seconds of history the charts show
STEP = 60.0                # one point per minute: 360 points at most
STATES = ("busy", "idle", "booting", "down")   # stacked in this order


@dataclass(frozen=True, slots=True)
class TrendPoint:
    at: float
    busy: int
    idle: int
    booting: int
    down: int
    queued_cores: int
    spend_per_hour: float

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "busy": self.busy, "idle": self.idle, "booting": self.booting,
                "down": self.down, "queued_cores": self.queued_cores,
                "spend_per_hour": round(self.spend_per_hour, 4)}


def trend_point(report: CycleReport, core: Any) -> TrendPoint:
    """One report's point: nodes as the core reads their state (booting: waiting for a worker,
    or created and not listed yet), the cores queued jobs ask for, and what the nodes cost now."""
    counts = {"busy": 0, "idle": 0, "down": 0}
    for e in report.plan.nodes:
        state = report.core_state(e.tuple.worker_state)
        if state in counts:
            counts[state] += 1
    snap = report.snapshot
    return TrendPoint(at=snap.now, busy=counts["busy"], idle=counts["idle"], booting=booting(report),
                      down=counts["down"], queued_cores=sum(d.count * d.cpus for d in snap.demand),
                      spend_per_hour=spend_per_hour(report, core))


class PoolTrend:
    """The last :data:`SPAN` seconds of points, one per :data:`STEP` (the latest of each step)."""

    def __init__(self, span: float = SPAN, step: float = STEP) -> None:
        self.span, self.step = span, step
        self._points: deque[TrendPoint] = deque(maxlen=int(span // step) + 1)
        self._lock = threading.Lock()

    def observe(self, report: CycleReport, core: Any) -> None:
        point = trend_point(report, core)
        with self._lock:
            points = self._points
            if points and point.at < points[-1].at:
                points.clear()      # the clock stepped back: the old points no longer line up
            if points and point.at // self.step == points[-1].at // self.step and len(points) > 1:
                # the same minute: its latest state, and the most cores queued in it (a burst
                # met within the minute still shows)
                points[-1] = replace(point, queued_cores=max(point.queued_cores, points[-1].queued_cores))
            else:
                points.append(point)
            while points and points[0].at < point.at - self.span:
                points.popleft()

    def to_json(self) -> list[dict[str, Any]]:
        with self._lock:
            return [p.to_json() for p in self._points]
