"""The actors on an injected clock: poll intervals, backoff, dispatch, watchdog, crash, fatal.

Time only moves with ``ManualClock.advance``; ``system.settle()`` waits for the actors to finish
the messages that caused (no sleeping for timing). The plan comes from a stand-in planner here:
these tests are about the actor machinery, the cycle itself is tested in test_controller*.
"""

import logging
import threading

import pytest

from nodemanager.actors.clock import ManualClock
from nodemanager.actors.roles import (CLOUD_POLLER, CONTROLLER, SCHEDULER_POLLER, ActuatorActor,
                                      ControllerActor, PollerActor, actuator_role)
from nodemanager.actors.system import ActorSystem
from nodemanager.cycle.actuate import Actuator
from nodemanager.cloud.port import CloudError, ErrorKind
from nodemanager.cycle.controller import Controller
from nodemanager.model import BootRequest, Plan
from nodemanager.scheduler.port import SchedulerPoll
from nodemanager.sim.cloud import SimCloud
from tests.fixtures.daemon import SIZES, ScriptedScheduler


class Harness:
    def __init__(self, settings, *, plans=None, cloud_fetch=None, pool=2, watchdog=600.0):
        self.clock = ManualClock(1_000_000.0)
        self.cloud = SimCloud(clock=self.clock, sizes=SIZES, boot_delay=0.0)
        self.sched = ScriptedScheduler(self.clock)
        self.plans = plans or (lambda snap: Plan(now=snap.now))
        self.fatal: list[str] = []
        self.calls = {"cloud": [], "scheduler": []}
        self.reports = []
        self.system = ActorSystem(self.clock, watchdog=watchdog, on_fatal=self.fatal.append,
                                  on_restart=self._restarted)
        self.actuator = Actuator(self.cloud, self.sched, settings, clock=self.clock)
        self.controller = Controller(settings, None, self.actuator, clock=self.clock,
                                     planner=lambda snap, *a, **k: self.plans(snap), escalation=False)
        roles = tuple(actuator_role(i) for i in range(pool))
        self.system.spawn(CONTROLLER, ControllerActor, self.controller, 30.0, roles, self.reports.append)
        for r in roles:
            self.system.spawn(r, ActuatorActor, self.actuator, self.controller)
        self.system.spawn(CLOUD_POLLER, PollerActor, cloud_fetch or self._cloud, "cloud_listing", 60.0, 300.0)
        self.system.spawn(SCHEDULER_POLLER, PollerActor, self._sched, "scheduler_poll", 30.0, 300.0)
        self.system.start_watchdog()

    def _restarted(self, role):
        if role.startswith("actuator-"):
            self.system.tell(CONTROLLER, "actuator_lost", role)

    def _cloud(self):
        self.calls["cloud"].append(self.clock())
        return self.cloud.list_nodes()

    def _sched(self):
        self.calls["scheduler"].append(self.clock())
        return SchedulerPoll(workers=(), demand=(), polled_at=self.clock())

    def step(self, seconds):
        self.clock.advance(seconds)
        assert self.system.settle(30.0)  # a hang still fails; a loaded 2-core machine needs more than 5 s

    def stop(self):
        self.system.stop(timeout=5.0)


@pytest.fixture
def harness_factory(nm_settings):
    made = []

    def make(settle=True, **kw):
        h = Harness(nm_settings, **kw)
        made.append(h)
        assert not settle or h.system.settle(5.0)
        return h
    yield make
    for h in made:
        h.stop()


def test_each_poll_has_its_own_interval_and_cycles_run_on_theirs(harness_factory):
    h = harness_factory()
    t0 = h.clock()
    assert h.calls == {"cloud": [t0], "scheduler": [t0]}
    assert len(h.reports) == 1          # first cycle as soon as both inputs arrived
    for _ in range(4):
        h.step(30)
    assert h.calls["scheduler"] == [t0 + 30 * i for i in range(5)]
    assert h.calls["cloud"] == [t0, t0 + 60, t0 + 120]
    assert len(h.reports) == 5
    # the tick at t0+120 is queued before that instant's polls deliver: it plans on the previous ones
    assert h.reports[-1].snapshot.polled_at == {"cloud": t0 + 60, "scheduler": t0 + 90}


def test_failed_polls_back_off_exponentially_to_the_cap(harness_factory, caplog):
    attempts = []

    def failing():
        attempts.append(h_clock())
        raise CloudError(ErrorKind.TRANSIENT, "connection refused")

    clock_box = {}
    h_clock = lambda: clock_box["c"]()  # noqa: E731
    caplog.set_level(logging.WARNING, "nodemanager.actors")
    h = harness_factory(cloud_fetch=failing)
    clock_box["c"] = h.clock
    attempts.clear()
    attempts.append(h.clock())  # the first attempt happened at start (before the box was set)
    for _ in range(40):
        h.step(30)
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert gaps[:4] == [120, 240, 300, 300]
    assert "cloud-poller: poll failed" in caplog.text
    assert h.reports == []              # never planned without a cloud listing


def test_blocked_actuator_does_not_stall_the_others_and_watchdog_restarts_it(harness_factory, caplog):
    release = threading.Event()
    entered = threading.Event()
    go = []

    def plans(snap):
        if not go or go.pop():
            return Plan(now=snap.now)
        return Plan(now=snap.now, boots=(BootRequest("small", 1, "x"), BootRequest("big", 1, "y")))

    h = harness_factory(plans=plans, watchdog=600.0)
    real_create = h.cloud.create_node

    def create(size, name, tags):
        if size.name == "small":
            entered.set()
            release.wait(10)
        return real_create(size, name, tags)

    h.cloud.create_node = create
    go.extend([True, False])                 # boots in the next cycle only
    h.clock.advance(30)                      # a cycle: one boot blocks, the other completes
    assert entered.wait(5)
    assert h.system.settle(0.5) is False     # the small boot is still running...
    assert h.cloud.live_count() == 1         # ...but the big one was created by the other actuator
    caplog.set_level(logging.ERROR, "nodemanager.actors")
    h.clock.advance(750)                     # watchdog (checks every 150s): stuck for > 600s
    stuck = [r for r in h.system.roles() if h.system.health(r).restarts]
    assert len(stuck) == 1 and stuck[0].startswith("actuator-")
    assert "stuck in run" in caplog.text
    release.set()
    assert h.system.settle(5.0)


def test_crashed_controller_is_restarted_and_fatal_error_stops(harness_factory, caplog):
    boom = {"n": 0}

    def plans(snap):
        if boom["n"] == 0:
            boom["n"] += 1
            raise ValueError("bug in a plan")
        if boom["n"] == 2:
            raise MemoryError()
        return Plan(now=snap.now)

    caplog.set_level(logging.ERROR, "nodemanager.actors")
    h = harness_factory(plans=plans)
    assert h.system.health(CONTROLLER).restarts == 1
    assert "actor controller restarted: crashed with ValueError: bug in a plan" in caplog.text
    h.step(60)                                # the new controller gets fresh polls and plans
    assert len(h.reports) >= 1
    boom["n"] = 2
    h.clock.advance(30)
    h.system.settle(5.0)
    assert h.fatal and "MemoryError" in h.fatal[0]


def test_thread_count_does_not_grow_with_nodes(harness_factory):
    h = harness_factory(plans=lambda snap: Plan(now=snap.now, boots=(BootRequest("small", 500, "load"),)))
    before = threading.active_count()
    for _ in range(4):
        h.step(30)
    assert h.cloud.live_count() >= 1000
    assert threading.active_count() == before


def test_real_clock_fires_timers_in_order_on_its_thread():
    from nodemanager.actors.clock import RealClock
    clock = RealClock().start()
    fired, done = [], threading.Event()
    try:
        clock.call_later(0.02, lambda: fired.append("b") or done.set())
        clock.call_later(0.0, lambda: fired.append("a"))
        cancelled = clock.call_later(0.01, lambda: fired.append("x"))
        clock.cancel(cancelled)
        assert done.wait(5.0)
    finally:
        clock.stop()
    assert fired == ["a", "b"]


def test_a_hanging_api_costs_at_most_one_abandoned_thread_per_role(harness_factory, caplog):
    import queue
    release, entered = threading.Event(), queue.Queue()

    def hanging():
        entered.put(1)
        release.wait(10)
        return []

    caplog.set_level(logging.ERROR, "nodemanager.actors")
    h = harness_factory(settle=False, cloud_fetch=hanging)
    entered.get(timeout=5)
    threads = threading.active_count()
    h.clock.advance(750)                      # stuck > 600s: replaced, and the new poller hangs too
    entered.get(timeout=5)
    assert h.system.health(CLOUD_POLLER).restarts == 1
    h.clock.advance(750)                      # stuck again, but the first one is still stuck
    assert h.system.health(CLOUD_POLLER).restarts == 1
    assert "not restarted again" in caplog.text
    assert entered.empty() and threading.active_count() <= threads + 1
    release.set()
    assert h.system.settle(5.0)
