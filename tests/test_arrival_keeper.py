"""``wait_grace = arrivals``: each size's last free cores kept while the recent job arrivals say a
job is likely soon, through ``nodemanager plan`` on a snapshot and through replays of the controller."""

from dataclasses import replace

import policy_matrix
import pytest

from nodemanager.configuration.config import ConfigError, loads
from nodemanager.cycle.memories import Memories
from nodemanager.model import Demand, RunningJob, Worker
from nodemanager.scheduler.port import SchedulerPoll
from nodemanager.sim import baselines as B
from nodemanager.sim.figures import lower_bounds
from nodemanager.sim.replay import replay
from nodemanager.sim.swf import SwfJob
from tests.core_world import settings as core_settings
from tests.test_idle_timing_wait import NOW, _plan as wait_plan, skipping_changes_no_figure


def _plan(tmp_path, capsys, grace: str, arrivals: list[float]) -> dict[str, tuple[str, str | None, str]]:
    """Node -> (idle grace tuple value, action, why) for two idle nodes (a idle 150 s, b 120 s) and
    one full busy node, the size's break-even grace 60 s, ``idle_timing = wait`` with ``wait_grace``."""
    return wait_plan(tmp_path, capsys, "wait", busy_cores=8, ini=f"wait_grace = {grace}\n", arrivals=arrivals)


# a job a minute for half an hour, the last one 30 s ago: a busy spell
BUSY = [NOW - 30 - 60.0 * k for k in range(30, -1, -1)]
# the same spell, then nothing for 50 minutes: a quiet one
QUIET = [t - 3000 for t in BUSY]


def test_the_last_free_cores_stay_in_a_busy_spell_and_go_at_break_even_in_a_quiet_one(tmp_path, capsys):
    busy = _plan(tmp_path, capsys, "arrivals", BUSY)
    assert busy["a"][:2] == ("idle exceeded", "drain")   # not the last free cores: break-even
    assert busy["b"][:2] == ("idle wait", None)
    # every remembered gap (60 s) ends within 120 s of 30 s: kept until a minute after the last job
    assert "idle grace 150s: kept for arrivals: a job within 120s is 100 % likely after 30s without one" \
        in busy["b"][2]
    quiet = _plan(tmp_path, capsys, "arrivals", QUIET)
    assert quiet["b"][:2] == ("idle exceeded", "drain")
    assert "idle grace 60s (the floor): break-even" in quiet["b"][2]
    assert "not kept: after 3030s without a job, 0 of the last 30 arrival gaps lasted as long" in quiet["b"][2]
    # wait_grace = fixed keeps it the configured idle_grace whatever the arrivals
    fixed = _plan(tmp_path, capsys, "fixed", QUIET)
    assert fixed["b"][:2] == ("idle wait", None) and "idle_grace 300s: idle_timing = wait" in fixed["b"][2]


def test_too_few_arrivals_keep_the_configured_idle_grace(tmp_path, capsys):
    few = _plan(tmp_path, capsys, "arrivals", QUIET[-10:])
    assert few["b"][:2] == ("idle wait", None) and "idle_grace 300s: idle_timing = wait" in few["b"][2]


def test_wait_grace_and_the_arrival_options_are_checked():
    core = loads("[Daemon]\nprofile = cost\n").core
    assert (core.wait_grace, core.arrival_chance, core.arrival_window) == ("fixed", 0.2, 120.0)
    core = loads("[Daemon]\nidle_timing = wait\nwait_grace = arrivals\narrival_chance = 25%\n"
                 "arrival_window = 3m\n").core
    assert (core.wait_grace, core.arrival_chance, core.arrival_window) == ("arrivals", 0.25, 180.0)
    for line, words in (("wait_grace = rate", "fixed, arrivals"), ("arrival_chance = 1.5", "share"),
                        ("arrival_window = soon", "arrival_window")):
        with pytest.raises(ConfigError) as info:
            loads(f"[Daemon]\nidle_timing = wait\n{line}\n", "site.ini")
        assert "site.ini:3" in str(info.value) and words in str(info.value)


def _cost(grace: str):
    base = loads("", "<test>", profile="cost")
    core = replace(base.core, sizes=(B.default_size(8),), max_nodes=3, idle_timing="wait", wait_grace=grace)
    return B.ours(replace(base, core=core), policy_matrix.load(base.matrix_file), "nodemanager-cost")


def _spells() -> list[SwfJob]:
    """Three 8-core jobs boot three nodes (break-even needs three joins); then six busy spells, each
    of twelve 8-core jobs of a minute every 150 s, three hours apart."""
    jobs = [SwfJob(id=i + 1, submit=0.0, runtime=600.0, cores=8) for i in range(3)]
    for spell in range(6):
        start = 1800.0 + spell * 12600.0
        jobs += [SwfJob(id=4 + 12 * spell + k, submit=start + 150.0 * k, runtime=60.0, cores=8) for k in range(12)]
    return jobs


def test_a_replay_of_busy_spells_and_quiet_hours_pays_less_than_fixed_for_the_same_waits():
    """In a spell the node idles 90 s between jobs and is the size's last free cores: ``fixed``
    keeps it the configured 300 s, ``arrivals`` while a job is likely within a boot's time, so both
    run each spell's jobs on it at once; after each spell's last job ``arrivals`` gives it back once
    the spell's gaps have passed, where ``fixed`` keeps it the whole 300 s."""
    jobs = _spells()
    bounds = lower_bounds(jobs, 8)
    fixed, arrivals = (replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
                       for policy in (_cost("fixed"), _cost("arrivals")))
    assert fixed.jobs_completed == arrivals.jobs_completed == len(jobs)
    assert fixed.jobs_killed == arrivals.jobs_killed == 0
    assert fixed.wait_p50 <= 60   # a negotiation cycle, no boot
    assert (arrivals.wait_p50, arrivals.wait_p95, arrivals.boots) == (fixed.wait_p50, fixed.wait_p95, fixed.boots)
    assert arrivals.paid_node_hours < fixed.paid_node_hours


def test_skipping_quiet_cycles_changes_no_arrivals_figure():
    """The arrivals are seen at the cycles that run: a replay that skips quiet cycles remembers the
    same instants and changes no figure."""
    skipping_changes_no_figure(_spells(), _cost("arrivals"))


def test_the_controller_remembers_each_new_job_once_and_only_for_wait_grace_arrivals():
    """A job queued at one poll and running at the next is one arrival, at the poll it was queued;
    a poll with nothing new adds none; without ``wait_grace = arrivals`` the snapshot has none."""
    def poll(at: float, queued: int, running: tuple[str, ...]) -> SchedulerPoll:
        jobs = tuple(RunningJob(job_id=j, user="u", start=at) for j in running)
        w = Worker(name="w1", scheduler="slurm", cpus=8, cpus_busy=len(jobs), running_jobs=len(jobs), jobs=jobs)
        return SchedulerPoll(workers=(w,), demand=(Demand(count=queued),) if queued else (), polled_at=at)

    polls = [poll(0, 0, ("1",)), poll(10, 1, ("1",)), poll(20, 0, ("1", "2")), poll(30, 0, ("1", "2")),
             poll(40, 0, ("2", "3"))]
    for grace, expected in (("arrivals", (10.0, 40.0)), ("fixed", ())):
        memories, core = Memories(), core_settings(idle_timing="wait", wait_grace=grace)
        seen = [memories.recall(p, core, p.polled_at)["arrivals"] for p in polls]
        assert seen[-1] == expected
