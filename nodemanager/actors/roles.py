"""The daemon's actors: two pollers, one controller, a bounded pool of actuators.

- :class:`PollerActor` calls ``fetch()`` every ``interval`` seconds (monotonic) and sends the result
  to the controller; a failure is logged and retried after ``interval * 2**failures`` seconds, capped at
  ``max_backoff`` (at least the error's ``retry_after``).
- :class:`ControllerActor` keeps the latest cloud listing and scheduler poll, runs one
  :meth:`Controller.prepare` every ``interval`` seconds (and as soon as both inputs first arrive),
  and hands each task to the least-loaded actuator. Two tasks about the same node (or two boots
  of the same size) never run at once.
- :class:`ActuatorActor` runs :meth:`Actuator.run` for one task at a time; a blocking cloud call
  holds up only its own actor. While the daemon stops, queued tasks are skipped, not started.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from nodemanager.actors.system import ActorSystem, BaseActor, is_fatal
from nodemanager.cycle.actuate import Actuator, Task
from nodemanager.cycle.steering import SteerRequest
from nodemanager.cycle.controller import Controller
from nodemanager.model import BootRequest, CycleReport, Outcome

__all__ = ["PollerActor", "ControllerActor", "ActuatorActor", "CLOUD_POLLER", "SCHEDULER_POLLER",
           "CONTROLLER", "actuator_role"]

log = logging.getLogger("nodemanager.actors")

CLOUD_POLLER = "cloud-poller"
SCHEDULER_POLLER = "scheduler-poller"
CONTROLLER = "controller"


Interval = float | Callable[[], float]   # a callable is read each time (reloadable settings)


def _seconds(value: Interval) -> Callable[[], float]:
    return value if callable(value) else (lambda: float(value))


def actuator_role(index: int) -> str:
    return f"actuator-{index}"


class PollerActor(BaseActor):
    """Polls with ``fetch()`` and delivers ``(result, started_at)`` to the controller's ``deliver``."""

    def __init__(self, system: ActorSystem, role: str, incarnation: int, fetch: Callable[[], Any],
                 deliver: str, interval: Interval, max_backoff: Interval) -> None:
        super().__init__(system, role, incarnation)
        self.fetch = fetch
        self.deliver = deliver
        self._interval = _seconds(interval)
        self._max_backoff = _seconds(max_backoff)
        self.failures = 0

    @property
    def interval(self) -> float:
        return self._interval()

    @property
    def max_backoff(self) -> float:
        return self._max_backoff()

    def on_start(self) -> None:
        self.send_self("poll")

    def poll(self) -> None:
        if self.system.stopping:
            return
        started, begun = self.clock(), self.clock.monotonic()  # the wall time goes to the controller
        try:
            result = self.fetch()
        except Exception as exc:  # noqa: BLE001 - every poll failure is retried with backoff
            if is_fatal(exc):
                raise
            self.failures += 1
            delay = min(self.interval * 2 ** self.failures, max(self.max_backoff, self.interval))
            retry_after = getattr(exc, "retry_after", None)
            if retry_after:
                delay = max(delay, float(retry_after))
            log.warning("%s: poll failed (%s); failure %d, next try in %.0fs", self.role, exc,
                        self.failures, delay)
            self.later(delay, "poll")
            return
        if self.failures:
            log.info("%s: poll succeeded again after %d failure(s)", self.role, self.failures)
        self.failures = 0
        self.system.tell(CONTROLLER, self.deliver, result, started)
        took = self.clock.monotonic() - begun
        self.later(self.interval - took if took < self.interval else self.interval, "poll")


class ControllerActor(BaseActor):
    """Runs the controller cycle on its own timer and dispatches tasks to the actuator pool."""

    def __init__(self, system: ActorSystem, role: str, incarnation: int, controller: Controller,
                 interval: Interval, pool: tuple[str, ...],
                 on_report: Callable[[CycleReport], None] | None = None) -> None:
        super().__init__(system, role, incarnation)
        self.controller = controller
        self._interval = _seconds(interval)
        self.pool = pool
        self.on_report = on_report
        self.nodes: list[Any] | None = None
        self.cloud_at = 0.0
        self.poll: Any = None
        self.assigned: dict[str, str] = {}      # task key -> actuator role
        self.load = {r: 0 for r in pool}
        self.cycles = 0
        self.planning = True

    @property
    def interval(self) -> float:
        return self._interval()

    def on_start(self) -> None:
        self.later(self.interval, "tick")

    def cloud_listing(self, nodes: list[Any], polled_at: float) -> None:
        first = self.nodes is None
        self.nodes, self.cloud_at = nodes, polled_at
        if first and self.poll is not None:
            self.cycle()

    def scheduler_poll(self, poll: Any, started_at: float) -> None:
        first = self.poll is None
        self.poll = poll
        if first and self.nodes is not None:
            self.cycle()

    def tick(self) -> None:
        self.cycle()
        self.later(self.interval, "tick")

    def stop_planning(self) -> None:
        """No more cycles (the daemon is stopping); outcomes still get logged."""
        self.planning = False

    def cycle(self) -> CycleReport | None:
        if not self.planning or self.system.stopping:
            return None
        if self.nodes is None or self.poll is None:
            log.info("controller: waiting for the first %s", " and ".join(
                w for w, v in (("cloud listing", self.nodes), ("scheduler poll", self.poll)) if v is None))
            return None
        report, tasks = self.controller.prepare(self.nodes, self.cloud_at, self.poll)
        self.cycles += 1
        if self.on_report is not None:
            self.on_report(report)
        for task in tasks:
            self.dispatch(task)
        return report

    def dispatch(self, task: Task) -> None:
        key = task.key
        if key in self.assigned:
            log.debug("controller: %s still in progress on %s; not sent again", key, self.assigned[key])
            return
        role = min(self.pool, key=lambda r: self.load[r])
        if self.system.tell(role, "run", task):
            self.assigned[key] = role
            self.load[role] += 1

    def outcomes(self, key: str, role: str, outcomes: list[Outcome]) -> None:
        self.controller.record(outcomes)
        if self.assigned.get(key) == role:
            del self.assigned[key]
            self.load[role] = max(0, self.load[role] - 1)

    def actuator_lost(self, role: str) -> None:
        """An actuator was restarted: its queued tasks are gone; plan them again next cycle."""
        for key in [k for k, r in self.assigned.items() if r == role]:
            del self.assigned[key]
        self.load[role] = 0

    def in_progress(self) -> dict[str, str]:
        return dict(self.assigned)


class ActuatorActor(BaseActor):
    """Carries out one task at a time and reports the outcomes to the controller."""

    def __init__(self, system: ActorSystem, role: str, incarnation: int, actuator: Actuator,
                 controller: Controller) -> None:
        super().__init__(system, role, incarnation)
        self.actuator = actuator
        self.controller = controller

    def run(self, task: Task) -> None:
        if self.system.stopping:
            item = task.item
            if isinstance(item, SteerRequest):
                kind, node = "steer", "placement"
            else:
                node = item.size if isinstance(item, BootRequest) else item.node_id
                kind = "boot" if isinstance(item, BootRequest) else item.kind.value
            outcomes = [Outcome(kind, node, "skipped", "daemon stopping: not started", self.clock())]
        else:
            outcomes = self.actuator.run(task)
        if not self.system.tell(CONTROLLER, "outcomes", task.key, self.role, outcomes):
            self.controller.record(outcomes)
