"""The simulated startd follows HTCondor's draining design: states, ids, refusals, estimates."""

from __future__ import annotations

import pytest

from nodemanager.sim.startd import (DRAINING_ALREADY_IN_PROGRESS, DRAINING_CHECK_EXPR_FAILED,
                                    DRAINING_NO_MATCHING_REQUEST_ID, DrainError, Job, SimStartd)

T0 = 1_000_000.0


def startd(**kw) -> SimStartd:
    kw.setdefault("max_retirement", 3600.0)
    kw.setdefault("vacate_time", 600.0)
    return SimStartd("node1.example", 8, 16000, T0, **kw)


def job(jid: str, cpus: int = 1, runtime: float = 36000.0, **kw) -> Job:
    return Job(jid, cpus=cpus, ram_mb=1000, runtime=runtime, **kw)


def slot_states(st: SimStartd, now: float) -> list[tuple[str, str]]:
    return [(a["State"], a["Activity"]) for a in st.slot_ads(now)]


def test_pslot_stays_unclaimed_while_dynamic_slots_run_jobs():
    st = startd()
    st.start_job(job("a", cpus=3), T0)
    ad = st.pslot_ad(T0 + 10)
    assert (ad["State"], ad["Activity"]) == ("Unclaimed", "Idle")
    assert ad["Cpus"] == 5 and ad["TotalSlotCpus"] == 8 and ad["NumDynamicSlots"] == 1
    assert ad["ChildState"] == ["Claimed"]
    assert "Draining" not in ad and "DrainingRequestId" not in ad and "DrainReason" not in ad


def test_estimates_follow_compute_draining_attrs():
    st = startd()
    st.start_job(job("a", cpus=2), T0)            # runtime 100 s at T0+100: R = 3500, V = 600
    st.start_job(job("b", cpus=1), T0 + 50)       # runtime 50 s: R = 3550
    now = T0 + 100
    ad = st.pslot_ad(now)
    assert ad["ExpectedMachineGracefulDrainingBadput"] == 2 * (100 + 3500) + 1 * (50 + 3550)
    assert ad["ExpectedMachineQuickDrainingBadput"] == 2 * (100 + 600) + 1 * (50 + 600)
    assert ad["ExpectedMachineGracefulDrainingCompletion"] == now + 3550
    assert ad["ExpectedMachineQuickDrainingCompletion"] == now + 600


def test_completion_estimate_freezes_at_idle_since():
    st = startd(max_retirement=0.0, vacate_time=0.0)
    assert st.pslot_ad(T0 + 5)["ExpectedMachineGracefulDrainingCompletion"] == T0  # idle since start
    st.start_job(job("a", runtime=100.0), T0 + 10)
    assert st.pslot_ad(T0 + 50)["ExpectedMachineGracefulDrainingCompletion"] == T0 + 50
    # the job ends at T0+110; long after, the value still says when the machine became idle
    later = st.pslot_ad(T0 + 5000)
    assert later["ExpectedMachineGracefulDrainingCompletion"] == T0 + 110
    assert later["ExpectedMachineQuickDrainingCompletion"] == T0 + 110
    assert later["ExpectedMachineGracefulDrainingBadput"] == 0


def test_graceful_drain_retires_together_then_vacates_and_kills():
    st = startd(kill_time=5.0)
    st.start_job(job("old", cpus=2), T0 - 3000)   # its retirement ends at T0+600
    st.start_job(job("new", cpus=1), T0 - 100)    # its retirement ends at T0+3500
    rid = st.drain(T0, "graceful", reason="nodemanager test")
    assert rid == "1"
    p = st.pslot_ad(T0)
    assert (p["State"], p["Activity"]) == ("Drained", "Retiring")
    assert p["Draining"] is True and p["DrainingRequestId"] == "1" and p["DrainReason"] == "nodemanager test"
    assert p["Start"] is False
    # both jobs may run until the longest retirement (T0+3500) and are soft-killed 600 s before it
    assert slot_states(st, T0 + 2899)[1:] == [("Claimed", "Retiring")] * 2
    assert slot_states(st, T0 + 2901)[1:] == [("Preempting", "Vacating")] * 2
    assert slot_states(st, T0 + 3501)[1:] == [("Preempting", "Killing")] * 2
    p = st.pslot_ad(T0 + 3506)
    assert (p["State"], p["Activity"]) == ("Drained", "Idle") and p["NumDynamicSlots"] == 0
    # badput: whole runtime of the killed jobs, in core-seconds
    assert p["TotalMachineDrainingBadput"] == 2 * 6505 + 1 * 3605
    killed = [e for e in st.ended if e.killed]
    assert {e.job.id for e in killed} == {"old", "new"} and all(e.by_drain for e in killed)


def test_a_job_whose_own_retirement_is_lower_is_evicted_when_it_runs_out_as_the_real_startd_does():
    """A job-dependent MAXJOBRETIREMENTTIME gives one job none: a graceful drain evicts it at
    once (the real 23.9 startd did, while the other job's 7200 s ran on); the p-slot publishes
    each job's retirement left."""
    st = startd(max_retirement=7200.0, vacate_time=0.0)
    st.start_job(job("preemptible", max_retirement=0.0), T0)
    st.start_job(job("other"), T0)
    assert st.pslot_ad(T0 + 10)["ChildRetirementTimeRemaining"] == [0, 7190]
    st.drain(T0 + 10)
    st.advance(T0 + 20)
    assert [(e.job.id, e.killed, e.evicted) for e in st.ended] == [("preemptible", True, True)]
    assert [s.job.id for s in st.dslots.values()] == ["other"]


def test_graceful_drain_lets_jobs_finish_within_retirement():
    st = startd()
    st.start_job(job("short", runtime=1000.0), T0)
    st.drain(T0 + 10, "graceful")
    p = st.pslot_ad(T0 + 1001)
    assert (p["State"], p["Activity"]) == ("Drained", "Idle")
    assert "TotalMachineDrainingBadput" not in p
    assert [(e.job.id, e.killed) for e in st.ended] == [("short", False)]


def test_graceful_end_moves_earlier_when_the_longest_retiring_job_finishes():
    st = startd(vacate_time=0.0)
    st.start_job(job("long", runtime=3000.0), T0)     # retirement to T0+3600, but ends at T0+3000
    st.start_job(job("other"), T0 - 3000)             # its own retirement ended at T0+600
    st.drain(T0 + 100, "graceful")
    assert slot_states(st, T0 + 2999)[1:] == [("Claimed", "Retiring")] * 2
    p = st.pslot_ad(T0 + 3000)                        # "long" finished: "other" has no reason to stay
    assert (p["State"], p["Activity"]) == ("Drained", "Idle")
    assert [(e.job.id, e.killed) for e in st.ended] == [("long", False), ("other", True)]


def test_quick_drain_vacates_at_once_and_fast_drain_kills_at_once():
    quick = startd()
    quick.start_job(job("a"), T0)
    quick.drain(T0 + 100, "quick")
    assert slot_states(quick, T0 + 100)[1:] == [("Preempting", "Vacating")]
    assert quick.pslot_ad(T0 + 700)["Activity"] == "Idle"
    assert quick.pslot_ad(T0 + 700)["TotalMachineDrainingBadput"] == 700

    fast = startd()
    fast.start_job(job("a", cpus=4), T0)
    fast.drain(T0 + 100, "fast")
    p = fast.pslot_ad(T0 + 100)
    assert (p["State"], p["Activity"]) == ("Drained", "Idle")
    assert p["TotalMachineDrainingBadput"] == 400
    assert fast.jobs_killed_by_drain == 1


def test_a_job_that_exits_while_vacating_is_evicted_as_the_real_starter_reports_it():
    st = startd()
    st.start_job(job("a", runtime=150.0), T0)
    st.drain(T0 + 100, "quick")                      # soft-killed; it exits on its own at T0 + 150
    st.advance(T0 + 200)
    assert [(e.job.id, e.end, e.killed, e.by_drain) for e in st.ended] == [("a", T0 + 150, True, True)]
    assert st.pslot_ad(T0 + 200)["Activity"] == "Idle"


def test_second_drain_is_refused_with_10001():
    st = startd()
    st.drain(T0, "graceful")
    with pytest.raises(DrainError) as err:
        st.drain(T0 + 1, "fast")
    assert err.value.code == DRAINING_ALREADY_IN_PROGRESS


def test_check_expression_must_be_true_on_every_slot():
    st = startd()
    guard = "DynamicSlot =!= true && (NumDynamicSlots =?= 0 || NumDynamicSlots =?= undefined)"
    st.start_job(job("a"), T0)
    with pytest.raises(DrainError) as err:
        st.drain(T0 + 1, "graceful", check_expr=guard)
    assert err.value.code == DRAINING_CHECK_EXPR_FAILED
    assert not st.draining and st.pslot_ad(T0 + 1)["Start"] is True
    # undefined is not true: refused; a parse error is refused the same way
    idle = startd()
    for expr in ("NoSuchAttribute > 3", "Cpus >"):
        with pytest.raises(DrainError) as err:
            idle.drain(T0, "graceful", check_expr=expr)
        assert err.value.code == DRAINING_CHECK_EXPR_FAILED
    assert idle.drain(T0, "graceful", check_expr=guard) == "1"


def test_check_expression_sees_the_injected_time():
    st = startd()
    with pytest.raises(DrainError):
        st.drain(T0 + 100, "graceful", check_expr=f"time() < {int(T0)}")
    assert st.drain(T0 + 100, "graceful", check_expr=f"time() == {int(T0) + 100}") == "1"


def test_cancel_by_request_id():
    st = startd()
    st.start_job(job("a"), T0)
    st.cancel(T0, "7")                                # not draining: a no-op, with or without an id
    st.cancel(T0)
    rid = st.drain(T0 + 10, "graceful", reason="mine")
    with pytest.raises(DrainError) as err:
        st.cancel(T0 + 20, str(int(rid) + 1))
    assert err.value.code == DRAINING_NO_MATCHING_REQUEST_ID and st.draining
    st.cancel(T0 + 30, rid)
    p = st.pslot_ad(T0 + 30)
    assert (p["State"], p["Activity"]) == ("Unclaimed", "Idle")
    assert p["LastDrainStartTime"] == T0 + 10 and p["LastDrainStopTime"] == T0 + 30
    assert not {"Draining", "DrainReason", "DrainingRequestId"} & set(p)
    assert slot_states(st, T0 + 30)[1:] == [("Claimed", "Busy")]   # the retiring claim unretires
    assert st.drain(T0 + 40, "graceful") == "2"


def test_request_ids_restart_with_the_startd():
    st = startd()
    st.start_job(job("a"), T0)
    assert st.drain(T0, "graceful") == "1"
    st.cancel(T0 + 1)
    assert st.drain(T0 + 2, "graceful") == "2"
    killed = st.restart(T0 + 100)
    assert [e.job.id for e in killed] == ["a"] and not killed[0].by_drain
    p = st.pslot_ad(T0 + 100)
    assert p["DaemonStartTime"] == T0 + 100 and "Draining" not in p and "LastDrainStartTime" not in p
    assert st.drain(T0 + 200, "graceful") == "1"


def test_unclaimed_time_counts_idle_cores_while_draining():
    st = startd(max_retirement=1000.0, vacate_time=0.0)
    st.start_job(job("a", cpus=2), T0)
    st.drain(T0, "graceful")                          # 6 idle cores until the job is killed at T0+1000
    assert st.pslot_ad(T0 + 100)["TotalMachineDrainingUnclaimedTime"] == 600
    p = st.pslot_ad(T0 + 1100)                        # then 8 idle cores for 100 s
    assert p["TotalMachineDrainingUnclaimedTime"] == 6 * 1000 + 8 * 100
    st.cancel(T0 + 1100)
    assert st.pslot_ad(T0 + 5000)["TotalMachineDrainingUnclaimedTime"] == 6800


def test_start_is_false_while_draining_unless_a_graceful_start_expression_accepts():
    st = startd()
    st.drain(T0, "graceful")
    assert not st.accepts(job("x"), T0)
    st.cancel(T0 + 1)
    assert st.accepts(job("x"), T0 + 1)
    busy = startd(vacate_time=100.0)
    busy.start_job(job("orig", runtime=100000.0), T0 - 3000)      # retires until T0+600
    busy.drain(T0, "graceful", start_expr="TARGET.RequestCpus >= 2")
    assert not busy.accepts(job("one"), T0 + 1)
    assert busy.accepts(job("two", cpus=2), T0 + 1)
    busy.start_job(job("two", cpus=2), T0 + 1)
    ads = busy.slot_ads(T0 + 2)
    assert [a["AcceptedWhileDraining"] for a in ads[1:]] == [False, True]
    # accepted while draining: no retirement of its own, evicted with the original job at T0+500
    assert slot_states(busy, T0 + 499)[1:] == [("Claimed", "Retiring")] * 2
    assert slot_states(busy, T0 + 500)[1:] == [("Preempting", "Vacating")] * 2
    assert busy.pslot_ad(T0 + 601)["Activity"] == "Idle"


@pytest.mark.parametrize("completion, state, alive", [("resume", "Unclaimed", True),
                                                      ("nothing", "Drained", True),
                                                      ("restart", "Unclaimed", True),
                                                      ("exit", None, False)])
def test_on_completion(completion, state, alive):
    st = startd()
    st.drain(T0 + 5, "graceful", on_completion=completion)
    assert st.alive is alive
    if alive:
        p = st.pslot_ad(T0 + 5)
        assert p["State"] == state
        assert (p["DaemonStartTime"] == T0 + 5) is (completion == "restart")


def test_vacate_of_a_draining_startd_does_what_the_real_one_does():
    st = startd(max_retirement=100000.0)
    st.start_job(job("a"), T0)
    st.drain(T0, "graceful")
    st.vacate(T0 + 10, fast=False)                   # a retiring claim stays retiring
    assert slot_states(st, T0 + 10)[1:] == [("Claimed", "Retiring")]
    st.vacate(T0 + 20, fast=True)
    p = st.pslot_ad(T0 + 20)
    assert (p["State"], p["Activity"], p["DrainingRequestId"]) == ("Drained", "Idle", "1")
    assert "TotalMachineDrainingBadput" not in p     # a vacate's kill is no drain badput


def test_stop_kills_running_jobs():
    st = startd()
    st.start_job(job("a"), T0)
    st.stop(T0 + 50)
    assert not st.alive and [(e.job.id, e.killed, e.end) for e in st.ended] == [("a", True, T0 + 50)]
