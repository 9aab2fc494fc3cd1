"""Drain escalation written as ClassAd expressions (HTCondor's starter-enforced eviction policy), evaluated by classad2."""

from __future__ import annotations

import classad2
import pytest

from nodemanager.classad.expressions import bind_time, evaluate, is_true
from nodemanager.core.escalation import escalation_ad, make_escalation, validate_expression
from nodemanager.model import InFlight, Worker
from nodemanager.configuration.settings import DrainSettings
from tests.fixtures.htcondor import CondorWorld
from nodemanager.scheduler.port import DrainSchedule

T0 = 1_000_000.0
HOUR = 3600.0


def htcondor_worker(**ad) -> Worker:
    base = {"Name": "slot1@a", "Machine": "a", "State": "Drained", "Activity": "Retiring",
            "NumDynamicSlots": 1, "ChildActivity": ["Retiring"], "Draining": True}
    base.update(ad)
    return Worker(name="a", scheduler="htcondor", running_jobs=base["NumDynamicSlots"], cpus=8,
                  cpus_busy=2 if base["NumDynamicSlots"] else 0, draining=True, ad=base, native_ad=True)


def flight(since: float = T0) -> InFlight:
    return InFlight(node="i-a", action="drain", since=since, request_id="1")


def test_undefined_and_error_are_truthy_in_python_but_never_escalate():
    ad = classad2.ClassAd({"LastDrainStartTime": T0})
    raw = classad2.ExprTree("(time() - NoSuchAttr) > 60").eval(ad)
    assert raw is classad2.Value.Undefined and bool(raw) is True          # the pitfall
    assert not is_true(raw)
    assert bool(classad2.ExprTree("1/0").eval(ad)) is True
    esc = make_escalation(DrainSettings(escalate_fast="(time() - LastDrainStartTime) > NoSuchLimit",
                                        escalate_quick='LastDrainStartTime > "soon"'))
    assert esc(htcondor_worker(LastDrainStartTime=T0), flight(), T0 + 100 * HOUR) is None


def test_graceful_then_quick_then_fast_by_drain_age():
    esc = make_escalation(DrainSettings(escalate_quick="(time() - LastDrainStartTime) > 3600",
                                        escalate_fast="(time() - LastDrainStartTime) > 2 * 3600"))
    w = htcondor_worker(LastDrainStartTime=T0)
    assert esc(w, flight(), T0 + HOUR - 1) is None
    assert esc(w, flight(), T0 + HOUR + 1) == "quick"
    assert esc(w, flight(), T0 + 2 * HOUR + 1) == "fast"


def test_expressions_read_startd_attributes():
    esc = make_escalation(DrainSettings(escalate_fast="ExpectedMachineGracefulDrainingBadput < 1000"))
    assert esc(htcondor_worker(ExpectedMachineGracefulDrainingBadput=999), flight(), T0) == "fast"
    assert esc(htcondor_worker(ExpectedMachineGracefulDrainingBadput=5000), flight(), T0) is None


def test_last_drain_start_falls_back_to_our_drain():
    esc = make_escalation(DrainSettings(escalate_fast="(time() - LastDrainStartTime) > 3600"))
    stale = htcondor_worker(LastDrainStartTime=T0 - 10 * HOUR)      # an older drain's time
    assert esc(stale, flight(T0), T0 + 60) is None
    assert esc(htcondor_worker(), flight(T0), T0 + HOUR + 1) == "fast"   # startd restarted: none


def test_slurm_workers_get_an_ad_from_their_fields():
    w = Worker(name="c1", scheduler="slurm", state="drng", cpus=16, cpus_busy=4, running_jobs=2,
               draining=True, drain_reason="nodemanager 1 idle", ad={"partition": "cloud", "nested": {"x": 1}})
    ad = escalation_ad(w, flight(T0), T0 + 10)
    assert (ad["LastDrainStartTime"], ad["DrainElapsed"], ad["NumDynamicSlots"], ad["Cpus"]) == (T0, 10, 2, 12)
    assert ad["partition"] == "cloud" and "nested" not in ad
    esc = make_escalation(DrainSettings(escalate_fast='(time() - LastDrainStartTime) > 600 && partition == "cloud"'))
    assert esc(w, flight(T0), T0 + 601) == "fast"
    assert esc(w, flight(T0), T0 + 599) is None


def test_nothing_to_kill_means_no_escalation():
    esc = make_escalation(DrainSettings(escalate_quick="true", escalate_fast="DrainElapsed > 100"))
    idle = htcondor_worker(NumDynamicSlots=0, ChildActivity=[])
    assert esc(idle, flight(), T0 + 1000) is None
    vacating = htcondor_worker(ChildActivity=["Vacating"])
    assert esc(vacating, flight(), T0 + 50) is None                 # quick already under way
    assert esc(vacating, flight(), T0 + 101) == "fast"
    assert esc(htcondor_worker(ChildActivity=["Killing"]), flight(), T0 + 101) is None


def test_only_drains_escalate_and_the_deadline_forces_fast():
    esc = make_escalation(DrainSettings(deadline=4 * HOUR))
    w = htcondor_worker()
    assert esc(w, flight(), T0 + 4 * HOUR - 1) is None
    assert esc(w, flight(), T0 + 4 * HOUR) == "fast"
    assert esc(w, InFlight(node="i-a", action="destroy", since=T0), T0 + 5 * HOUR) is None


@pytest.mark.parametrize("text, words", [
    ("(time() - LastDrainStartTime >", "not a valid ClassAd expression"),
    ("kill = (time() - LastDrainStartTime) > 3600", "not a valid ClassAd expression"),
    ("nosuchfunction(LastDrainStartTime) > 3", "evaluates to an error"),
    ('"yes"', "constant str"),
    ("3600", "constant int"),
    ("", "empty"),
])
def test_bad_expressions_are_config_errors_that_show_the_text(text, words):
    with pytest.raises(ValueError, match=words) as err:
        validate_expression(text)
    assert repr(text) in str(err.value)
    if text:
        with pytest.raises(ValueError) as err:
            make_escalation(DrainSettings(escalate_fast=text))
        assert "[Drain] escalate_fast" in str(err.value) and repr(text) in str(err.value)


def test_good_expressions_validate():
    for text in ("(time() - LastDrainStartTime) > 3600", "DrainElapsed > 60 && NumDynamicSlots > 0",
                 "isUndefined(Foo) || Foo", "true"):
        validate_expression(text)


def test_time_is_the_injected_time_not_the_wall_clock():
    assert bind_time('time() > 5 && Name == "time()" && CurrentTime < 9', 7) == '7 > 5 && Name == "time()" && 7 < 9'
    assert is_true(evaluate("time() == 12345", {}, 12345.9))


def test_escalation_on_a_simulated_startd_end_to_end():
    """The callback reads the polled ad; the adapter then vacates the claims."""
    world = CondorWorld()
    world.add("a.example", max_retirement=10 * HOUR, vacate_time=60.0)
    world.run_job("a.example", cpus=2)
    ticket = world.htc.drain(world.worker("a.example"), DrainSchedule.GRACEFUL, "forced")
    esc = make_escalation(DrainSettings(escalate_fast="(time() - LastDrainStartTime) > 3600"))
    fl = InFlight(node="i-a", action="drain", since=ticket.started_at, request_id=ticket.request_id)
    world.advance(HOUR - 10)
    assert esc(world.worker("a.example"), fl, world.clock()) is None
    world.advance(20)
    w = world.worker("a.example")
    assert esc(w, fl, world.clock()) == "fast"
    world.htc.escalate(ticket, DrainSchedule.FAST)
    world.advance(1)
    assert world.htc.confirm_drained(ticket).ok
    assert esc(world.worker("a.example"), fl, world.clock()) is None
