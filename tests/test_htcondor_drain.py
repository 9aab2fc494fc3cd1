"""The drain transaction (HTCondor's draining design, "Race Conditions") through the adapter and the simulated startds."""

from __future__ import annotations

import dataclasses

import pytest

from nodemanager.scheduler.htcondor_drain import (cost_growth, drain_check_expression, is_our_drain,
                                                  ticket_from_worker)
from nodemanager.scheduler.port import DrainRefused, DrainSchedule, DrainTicket, SchedulerError
from tests.fixtures.htcondor import CondorWorld

GRACEFUL, QUICK, FAST = DrainSchedule.GRACEFUL, DrainSchedule.QUICK, DrainSchedule.FAST


def drained_ticket(condor, name="a.example", schedule=GRACEFUL) -> DrainTicket:
    ticket = condor.htc.drain(condor.worker(name), schedule, "idle exceeded")
    condor.advance(1)
    return ticket


def test_idle_node_drains_and_is_confirmed(condor):
    st = condor.add("a.example")
    w = condor.worker("a.example")
    condor.advance(5)
    ticket = condor.htc.drain(w, GRACEFUL, "idle exceeded (rule default.matrix:134)")
    assert ticket.request_id == "1" and ticket.daemon_start == st.daemon_start
    assert ticket.reason.startswith("nodemanager ") and "rule default.matrix:134" in ticket.reason
    p = st.pslot_ad(condor.clock())
    assert (p["State"], p["Activity"], p["DrainReason"]) == ("Drained", "Idle", ticket.reason)
    assert p["Start"] is False                       # CompletionType.Nothing: it takes no new job
    assert not st.accepts(dataclasses.replace(_job(), cpus=1), condor.clock())
    # the state must be newer than the drain's start
    assert not condor.htc.confirm_drained(ticket).ok
    condor.advance(1)
    c = condor.htc.confirm_drained(ticket)
    assert c.ok, c.reason
    assert condor.htc.draining_stats().completed == 1


def _job():
    from nodemanager.sim.startd import Job
    return Job("x", cpus=1, ram_mb=1, runtime=10)


def test_node_that_gets_a_job_between_snapshot_and_drain_is_refused_and_kept(condor):
    condor.add("a.example")
    snapshot = condor.worker("a.example")            # idle when the decision was made
    condor.run_job("a.example")                      # the negotiator matched a job meanwhile
    with pytest.raises(DrainRefused, match="became busy since the snapshot"):
        condor.htc.drain(snapshot, GRACEFUL, "idle exceeded")
    st = condor.sim.startd("a.example")
    assert not st.draining and len(st.dslots) == 1 and st.pslot_ad(condor.clock())["Start"] is True
    assert condor.htc.draining_stats().refused == 1


def test_refused_even_when_the_collector_has_not_heard_of_the_job_yet():
    world = CondorWorld(change_delay=60.0)
    world.add("a.example")
    world.run_job("a.example")
    world.advance(5)
    stale = world.worker("a.example")
    assert stale.running_jobs == 0                   # the collector still says idle
    with pytest.raises(DrainRefused):
        world.htc.drain(stale, GRACEFUL, "idle exceeded")
    assert not world.sim.startd("a.example").draining


def test_a_startd_restarted_since_the_snapshot_is_judged_afresh(condor):
    # the startd evaluates the check against its own slot ads, which have no DaemonStartTime
    st = condor.add("a.example")
    snapshot = condor.worker("a.example")
    condor.advance(10)
    st.restart(condor.clock())
    ticket = condor.htc.drain(snapshot, GRACEFUL, "idle exceeded")      # still idle: drained
    assert st.draining and st.drain_request == ticket.request_id
    restarted = condor.add("b.example")
    snapshot = condor.worker("b.example")
    condor.advance(10)
    restarted.restart(condor.clock())
    condor.run_job("b.example")                                          # busy now: refused
    with pytest.raises(DrainRefused, match="restarted|busy"):
        condor.htc.drain(snapshot, GRACEFUL, "idle exceeded")


def test_a_refusal_by_the_cost_guard_names_the_estimate_that_grew():
    # a poll taken within an update of a new claim: the snapshot's estimate does not count it yet
    snapshot = {"ExpectedMachineGracefulDrainingBadput": 0, "ExpectedMachineGracefulDrainingCompletion": 1000}
    live = {"ExpectedMachineGracefulDrainingBadput": 7200, "ExpectedMachineGracefulDrainingCompletion": 1000}
    assert cost_growth(snapshot, live, GRACEFUL) == (
        "ExpectedMachineGracefulDrainingBadput 7200 s, 0 s in the snapshot")
    assert cost_growth(snapshot, snapshot, GRACEFUL) is None
    # a completion is a time: said as how much later, never as epoch seconds
    later = {**snapshot, "ExpectedMachineGracefulDrainingCompletion": 1_795_000_000 + 3 * 3600}
    assert cost_growth({**snapshot, "ExpectedMachineGracefulDrainingCompletion": 1_795_000_000}, later, GRACEFUL) == (
        "ExpectedMachineGracefulDrainingCompletion 3h 00m later than in the snapshot")
    assert cost_growth(snapshot, live, FAST) is None                 # fast is guarded by Quick's


def test_busy_node_drain_guarded_by_its_estimates(condor):
    st = condor.add("a.example", max_retirement=3600.0)
    condor.run_job("a.example")
    snapshot = condor.worker("a.example")
    check = drain_check_expression(snapshot.ad, GRACEFUL)
    assert "ExpectedMachineGracefulDrainingBadput <=" in check and "DynamicSlot" not in check
    for _ in range(4):                               # the cost grows past the bound: refused
        condor.run_job("a.example", cpus=1)
    condor.advance(1500)
    with pytest.raises(DrainRefused):
        condor.htc.drain(snapshot, GRACEFUL, "forced by the operator")
    ticket = condor.htc.drain(condor.worker("a.example"), GRACEFUL, "forced by the operator")
    assert st.draining and st.drain_request == ticket.request_id


def test_check_expressions():
    idle = {"NumDynamicSlots": 0, "DaemonStartTime": 1234, "ChildState": []}
    check = drain_check_expression(idle, GRACEFUL)
    assert check == ('DynamicSlot =!= true && (NumDynamicSlots =?= 0 || NumDynamicSlots =?= undefined) '
                     '&& (State =?= "Unclaimed" || State =?= "Owner")')     # no DaemonStartTime
    busy = {"NumDynamicSlots": 2, "ExpectedMachineQuickDrainingCompletion": 1000,
            "ExpectedMachineQuickDrainingBadput": 800}
    assert drain_check_expression(busy, FAST) == ("ExpectedMachineQuickDrainingCompletion <= 2200 && "
                                                  "ExpectedMachineQuickDrainingBadput <= 2200")


def test_only_one_drain_per_node(condor):
    st = condor.add("a.example")
    ticket = condor.htc.drain(condor.worker("a.example"), GRACEFUL, "idle exceeded")
    with pytest.raises(DrainRefused, match="already draining"):
        condor.htc.drain(condor.worker("a.example"), GRACEFUL, "again")
    # someone else drains another node: we are refused and say whose drain it is
    other = condor.add("b.example")
    snapshot = condor.worker("b.example")
    other.drain(condor.clock(), "graceful", reason="Defrag pool")
    with pytest.raises(DrainRefused, match="Defrag pool"):
        condor.htc.drain(snapshot, GRACEFUL, "idle exceeded")
    assert st.drain_request == ticket.request_id and other.drain_reason == "Defrag pool"


def test_missing_administrator_authorization_is_a_denial_not_a_passing_refusal(condor):
    condor.add("a.example")
    condor.sim.deny("a.example")
    with pytest.raises(SchedulerError, match="DRAIN_JOBS .ADMINISTRATOR. not granted") as err:
        condor.htc.drain(condor.worker("a.example"), GRACEFUL, "idle exceeded")
    assert err.value.denied and not err.value.transient


def test_a_startd_that_does_not_answer_times_out_after_20_seconds(condor):
    condor.add("a.example")
    w = condor.worker("a.example")
    condor.sim.hang("a.example")
    start = condor.clock()
    with pytest.raises(SchedulerError, match="within 20 s") as err:
        condor.htc.drain(w, GRACEFUL, "idle exceeded")
    assert err.value.transient and not isinstance(err.value, DrainRefused)
    assert condor.clock() - start == 20.0            # one 20 s timeout; the collector answers the re-check
    assert not condor.sim.startd("a.example").draining


def test_a_drain_whose_answer_was_lost_is_adopted(condor):
    st = condor.add("a.example")
    w = condor.worker("a.example")
    condor.sim.lose_replies("a.example")
    ticket = condor.htc.drain(w, GRACEFUL, "idle exceeded")
    assert st.draining and ticket.request_id == st.drain_request and ticket.reason == st.drain_reason
    condor.sim.lose_replies("a.example", on=False)
    condor.advance(1)
    assert condor.htc.confirm_drained(ticket).ok


def test_no_destroy_confirmation_for_a_drain_that_is_not_finished(condor):
    condor.add("a.example", max_retirement=3600.0, vacate_time=60.0)
    condor.run_job("a.example", runtime=100000.0)
    ticket = condor.htc.drain(condor.worker("a.example"), GRACEFUL, "forced")
    condor.advance(3000)
    c = condor.htc.confirm_drained(ticket)
    assert not c.ok and "Drained/Retiring" in c.reason
    condor.advance(555)                              # vacating: the d-slot is still there
    assert not condor.htc.confirm_drained(ticket).ok
    condor.advance(60)
    assert condor.htc.confirm_drained(ticket).ok


def test_no_destroy_confirmation_for_a_drain_with_another_reason(condor):
    st = condor.add("a.example")
    ticket = drained_ticket(condor)
    st.cancel(condor.clock())
    st.drain(condor.clock(), "graceful", reason="by condor_drain")   # an operator's drain, id 2
    condor.advance(1)
    c = condor.htc.confirm_drained(ticket)
    assert not c.ok and "not ours" in c.reason
    forged = dataclasses.replace(ticket, request_id="2")
    c = condor.htc.confirm_drained(forged)
    assert not c.ok and "by condor_drain" in c.reason


def test_no_destroy_confirmation_for_another_request_id(condor):
    st = condor.add("a.example")
    ticket = drained_ticket(condor)
    st.cancel(condor.clock())
    st.drain(condor.clock(), "graceful", reason=ticket.reason)       # same reason, request 2
    condor.advance(1)
    c = condor.htc.confirm_drained(ticket)
    assert not c.ok and "request 2 is not ours" in c.reason


def test_no_destroy_confirmation_after_a_startd_restart_with_the_same_request_id(condor):
    st = condor.add("a.example")
    ticket = drained_ticket(condor)
    condor.advance(10)
    st.restart(condor.clock())                       # ids start again at 1
    assert st.drain(condor.clock(), "graceful", reason="by command") == ticket.request_id
    condor.advance(1)
    c = condor.htc.confirm_drained(ticket)
    assert not c.ok and "reason 'by command' is not ours" in c.reason
    # a ticket rebuilt after a controller restart (no DaemonStartTime) is refused too
    rebuilt = dataclasses.replace(ticket, daemon_start=None)
    assert not condor.htc.confirm_drained(rebuilt).ok


def test_no_destroy_confirmation_when_the_startd_cannot_be_asked(condor):
    condor.add("a.example")
    ticket = drained_ticket(condor)
    condor.sim.hang("a.example")
    before = condor.clock()
    c = condor.htc.confirm_drained(ticket)
    assert not c.ok and "did not answer" in c.reason
    assert condor.clock() - before == 60.0           # QUERY_TIMEOUT


def test_cancel_by_request_id_lets_the_node_take_jobs_again(condor):
    st = condor.add("a.example", max_retirement=3600.0)
    condor.run_job("a.example")
    ticket = condor.htc.drain(condor.worker("a.example"), GRACEFUL, "forced")
    condor.advance(100)
    condor.htc.cancel_drain(ticket)
    p = st.pslot_ad(condor.clock())
    assert "Draining" not in p and p["Start"] is True and p["ChildActivity"] == ["Busy"]
    assert ("cancel", "a.example") in condor.sim.calls
    assert condor.htc.draining_stats().cancelled == 1
    condor.htc.cancel_drain(ticket)                  # already gone: nothing to do
    assert condor.sim.calls.count(("cancel", "a.example")) == 1


def test_cancel_never_touches_a_drain_that_is_not_ours(condor):
    st = condor.add("a.example")
    ticket = drained_ticket(condor)
    condor.advance(10)
    st.restart(condor.clock())
    st.drain(condor.clock(), "graceful", reason="Defrag pool")          # id 1 again, someone else's
    with pytest.raises(DrainRefused, match="not cancelling"):
        condor.htc.cancel_drain(ticket)
    assert st.draining and st.drain_reason == "Defrag pool"
    assert ("cancel", "a.example") not in condor.sim.calls


def test_escalation_to_fast_renews_our_drain_and_counts_its_badput(condor):
    st = condor.add("a.example", max_retirement=36000.0, vacate_time=300.0)
    condor.run_job("a.example", cpus=2)
    ticket = condor.htc.drain(condor.worker("a.example"), GRACEFUL, "forced")
    condor.advance(60)
    # a retiring claim cannot be soft-killed: "quick" is refused, never reported done
    with pytest.raises(DrainRefused, match="retire"):
        condor.htc.escalate(ticket, QUICK)
    assert st.pslot_ad(condor.clock())["ChildActivity"] == ["Retiring"]
    condor.htc.escalate(ticket, FAST)
    condor.advance(1)
    p = st.pslot_ad(condor.clock())
    assert (p["State"], p["Activity"], p["DrainReason"]) == ("Drained", "Idle", ticket.reason)
    assert p["DrainingRequestId"] != ticket.request_id          # renewed, and still ours
    assert p["TotalMachineDrainingBadput"] == 2 * 60
    assert condor.htc.confirm_drained(ticket).ok
    condor.htc.escalate(ticket, FAST)                # nothing left to kill: not counted again
    assert condor.htc.draining_stats().escalated == 1


def test_escalation_refuses_a_drain_that_is_not_ours(condor):
    st = condor.add("a.example", max_retirement=36000.0)
    condor.run_job("a.example")
    ticket = condor.htc.drain(condor.worker("a.example"), GRACEFUL, "forced")
    st.cancel(condor.clock())
    st.drain(condor.clock(), "graceful", reason="Defrag pool")
    with pytest.raises(DrainRefused):
        condor.htc.escalate(ticket, FAST)
    assert len(st.dslots) == 1


def test_draining_statistics_survive_restarts_and_departures(condor):
    a = condor.add("a.example", vacate_time=0.0)
    condor.add("b.example")
    condor.run_job("a.example", cpus=2)
    condor.advance(100)
    condor.htc.drain(condor.worker("a.example"), FAST, "forced")     # 200 core-s of badput
    condor.advance(50)                                                  # 8 cores x 50 s unclaimed
    condor.advance(250)                                                 # the collector's next update
    stats = condor.htc.poll() and condor.htc.draining_stats()
    node = {n.name: n for n in stats.nodes}["a.example"]
    assert (node.badput, node.unclaimed, node.draining) == (200, 8 * 300, True)
    a.restart(condor.clock())                                           # the startd's totals restart
    condor.htc.poll()
    stats = condor.htc.draining_stats()
    assert (stats.badput, stats.unclaimed, stats.started) == (200, 8 * 300, 1)
    condor.sim.vanish("b.example", clean=True)
    condor.htc.poll()
    assert condor.htc.draining_stats().badput == 200


def test_ticket_rebuilt_from_a_polled_worker(condor):
    condor.add("a.example")
    ticket = condor.htc.drain(condor.worker("a.example"), GRACEFUL, "idle exceeded")
    rebuilt = ticket_from_worker(condor.worker("a.example"))
    assert rebuilt is not None
    assert (rebuilt.request_id, rebuilt.reason, rebuilt.daemon_start, rebuilt.started_at) == (
        ticket.request_id, ticket.reason, ticket.daemon_start, ticket.started_at)
    assert is_our_drain(condor.worker("a.example").ad, rebuilt) == (True, "our drain")
    other = condor.add("b.example")
    other.drain(condor.clock(), "graceful", reason="Defrag pool")
    assert ticket_from_worker(condor.worker("b.example")) is None


def test_a_drained_startd_whose_job_count_cannot_be_read_is_not_confirmed(condor):
    """Issue 12 item 3: a destroy is never confirmed on counts we cannot trust (INF, undefined)."""
    import classad2

    st = condor.add("a.example")
    ticket = drained_ticket(condor)
    st.attrs["NumDynamicSlots"] = classad2.ExprTree('real("INF")')
    c = condor.htc.confirm_drained(ticket)
    assert not c.ok and "node a.example: field 'NumDynamicSlots' is not finite: inf" in c.reason
    del st.attrs["NumDynamicSlots"]
    assert condor.htc.confirm_drained(ticket).ok


@pytest.mark.parametrize("retirement, vacate, refused", [
    (0, 600, True),        # HTCondor's default MAXJOBRETIREMENTTIME
    (600, 600, True),      # equal: the startd evicts at once ("538s of retirement time remaining ...")
    (620, 600, False),     # the job's 10 s run leaves it 610 s: above the vacate time
    (7200, 600, False),
])
def test_a_graceful_drain_of_a_busy_node_whose_retirement_is_not_above_its_vacate_time_is_refused(
        condor, retirement, vacate, refused):
    condor.add("a.example", max_retirement=float(retirement), vacate_time=float(vacate))
    condor.run_job("a.example")
    condor.advance(10)
    w = condor.worker("a.example")
    if refused:
        with pytest.raises(DrainRefused, match=rf"MaxJobRetirementTime \({retirement} s\) is not above "
                                               rf"MachineMaxVacateTime \({vacate} s\)"):
            condor.htc.drain(w, GRACEFUL, "consolidation")
        assert not condor.worker("a.example").draining
    else:
        condor.htc.drain(w, GRACEFUL, "consolidation")
        condor.advance(1)
        assert condor.worker("a.example").draining
