"""Victim costs (Sfiligoi et al.'s equations, HTCondor estimates, SLURM end times) and victim order."""

import math

import pytest

from nodemanager.core import estimate, order_victims
from nodemanager.model import VictimCost, Worker

NOW = 10_000.0


def htc(ad, cpus=8, **kw):
    return Worker(name="n", scheduler="htcondor", cpus=cpus, ad=ad, **kw)


def test_pilot_ad_equations_1_to_5():
    ad = {"LAST_JOB_START": 9000, "FIRST_EXP_JOB_END": 10600, "LAST_EXP_JOB_END": 12000,
          "LAST_MAX_JOB_END": 15000, "USED_FRACTION1k": 512, "ADD_UNCOM_TIME1k": 100 * 1024,
          "ADD_FINAL_EXP_WASTE1k": 50 * 1024, "PRIORITY_FACTOR": 3, "CAN_POSTPONE_LAST_JOB": True}
    c = estimate(htc(ad), NOW)
    j = (NOW - 9000) * 0.5          # (1)
    k = (10600 - NOW) * (1 - 0.5)   # (2)
    assert c.time_to_go == 12000 - NOW            # (3), good-faith end
    assert c.drain_waste == 8 * (50 + k)          # (4)
    assert c.kill_waste == 8 * (100 + j)          # (5)
    assert c.priority == 3 and not c.stuck and not c.winding_down


def test_pilot_ad_falls_back_to_guaranteed_max_end():
    c = estimate(htc({"LAST_MAX_JOB_END": 15000, "USED_FRACTION1k": 1024}), NOW)
    assert c.time_to_go == 5000


def test_pilot_heartbeat_older_than_an_hour_is_stuck():
    base = {"LAST_EXP_JOB_END": 12000, "USED_FRACTION1k": 1024}
    assert estimate(htc({**base, "PilotAdUpdated": NOW - 3601}), NOW).stuck
    assert not estimate(htc({**base, "PilotAdUpdated": NOW - 3599}), NOW).stuck
    assert not estimate(htc(base), NOW).stuck


def test_pilot_that_cannot_postpone_is_winding_down():
    ad = {"LAST_EXP_JOB_END": 12000, "CAN_POSTPONE_LAST_JOB": False}
    assert estimate(htc(ad), NOW).winding_down


def test_htcondor_expected_machine_draining_attributes():
    ad = {"ExpectedMachineGracefulDrainingCompletion": NOW + 900,
          "ExpectedMachineGracefulDrainingBadput": 1200, "ExpectedMachineQuickDrainingBadput": 3400}
    c = estimate(htc(ad), NOW)
    assert (c.time_to_go, c.drain_waste, c.kill_waste) == (900, 1200, 3400)


def test_htcondor_seed_000_fast_name_and_frozen_idle_completion():
    ad = {"ExpectedMachineGracefulDrainingCompletion": NOW - 500,  # idle: frozen in the past
          "ExpectedMachineGracefulDrainingBadput": 0, "ExpectedMachineFastDrainingBadput": 77}
    c = estimate(htc(ad), NOW)
    assert (c.time_to_go, c.kill_waste) == (0, 77)


def test_slurm_job_end_times():
    w = Worker(name="n", scheduler="slurm", cpus=8, cpus_busy=4, running_jobs=2,
               job_end_times=(NOW + 100, NOW + 400), state_since=NOW - 1000)
    c = estimate(w, NOW)
    assert c.time_to_go == 400
    # job 1's 2 cores wait 300 s for job 2; 4 idle cores wait 400 s
    assert c.drain_waste == 300 * 2 + 4 * 400
    assert c.kill_waste == 4 * 1000


def test_idle_worker_costs_nothing_and_busy_without_estimates_never_goes():
    assert estimate(Worker(name="n", scheduler="slurm", cpus=4), NOW) == VictimCost()
    c = estimate(Worker(name="n", scheduler="slurm", cpus=4, cpus_busy=4, running_jobs=1), NOW)
    assert math.isinf(c.time_to_go)


def test_order_prefers_stuck_then_soon_least_drain_waste_then_least_kill_waste():
    costs = [
        ("late-cheap-kill", VictimCost(time_to_go=99999, drain_waste=1, kill_waste=10)),
        ("late-dear-kill", VictimCost(time_to_go=99999, drain_waste=1, kill_waste=500)),
        ("soon-dear", VictimCost(time_to_go=600, drain_waste=900, kill_waste=10**6)),
        ("soon-cheap", VictimCost(time_to_go=3000, drain_waste=100, kill_waste=10**6)),
        ("stuck", VictimCost(time_to_go=99999, drain_waste=10**6, kill_waste=10**6, stuck=True)),
    ]
    assert order_victims(costs, 7200) == ["stuck", "soon-cheap", "soon-dear", "late-cheap-kill",
                                          "late-dear-kill"]


@pytest.mark.parametrize("horizon, first", [(7200, "a"), (60, "b")])
def test_horizon_decides_between_drain_and_kill_waste(horizon, first):
    costs = [("a", VictimCost(time_to_go=600, drain_waste=10, kill_waste=900)),
             ("b", VictimCost(time_to_go=600, drain_waste=50, kill_waste=100))]
    assert order_victims(costs, horizon)[0] == first


def test_ties_prefer_lower_priority_then_winding_down_then_id():
    costs = [("b", VictimCost(priority=5)), ("a", VictimCost(priority=5)),
             ("c", VictimCost(priority=1)), ("d", VictimCost(priority=5, winding_down=True))]
    assert order_victims(costs, 7200) == ["c", "d", "a", "b"]
