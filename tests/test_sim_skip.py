"""Replays of a busy pool skip the cycles that cannot decide anything, and skipping changes no
figure: every policy, the same replay with every cycle of the grid run (``skip_cycles=False``)."""

from dataclasses import replace

import pytest

from nodemanager.configuration.config import loads
from nodemanager.configuration.cron import parse_schedule
from nodemanager.sim import baselines as B
from nodemanager.sim.figures import Figures, lower_bounds
from nodemanager.sim.replay import replay
from nodemanager.sim.spot import spot_size
from nodemanager.sim.swf import SwfJob
from nodemanager.sim.synthetic import synthetic_jobs

# what a run says about itself, not about the policy
_OWN = {"wall_seconds", "cycles", "cycles_skipped"}


def synthetic_pool(days: float, seed: int):
    """``days`` of jobs keeping about 60 8-core nodes busy, with the embedded defaults, one 8-core
    size and max_nodes the no-wait peak: (jobs, bounds, settings)."""
    jobs = synthetic_jobs(days, 60 * 8, seed)
    bounds = lower_bounds(jobs, 8)
    base = loads("")
    settings = replace(base, core=replace(base.core, sizes=(B.default_size(8),),
                                          max_nodes=bounds.nowait_peak_nodes))
    return jobs, bounds, settings


@pytest.fixture(scope="module")
def busy_pool():
    """Half a day of jobs keeping about 60 8-core nodes busy: the queue changes every few
    seconds, and jobs usually fit on the free cores of busy nodes."""
    return synthetic_pool(0.5, 7)


def _figures(f: Figures) -> dict:
    return {k: v for k, v in f.as_dict().items() if k not in _OWN}


def test_queue_changes_that_fit_on_free_cores_run_no_cycle(busy_pool):
    jobs, bounds, settings = busy_pool
    fast = replay(jobs, B.ours(settings), B.SimParams(), bounds, record_series=False).figures
    ticks = fast.cycles + fast.cycles_skipped
    # the grid has ~9,000 ticks; a cycle runs for actions, node state changes and queue growth
    # that the free cores cannot hold (it ran 1,602 before the queue was looked at this way)
    assert fast.cycles < 1300, (fast.cycles, ticks)
    assert fast.jobs_completed == len(jobs) and fast.jobs_killed == 0


def test_busy_idle_and_free_core_changes_that_cannot_act_run_no_cycle(busy_pool):
    """A node's turn from busy to idle or back that the matrix leaves alone (default profile), a
    VM coming up, a queue that fits on the free cores of nodes left alone or booting, and a
    free-core change that leaves consolidation no spare node (cost profile) run no cycle (982
    and 1,819 cycles ran here before those rules; the figures are the slow tests' concern)."""
    jobs, bounds, settings = busy_pool
    default = replay(jobs, B.ours(settings), B.SimParams(), bounds, record_series=False).figures
    cost = replay(jobs, _variant(settings, bounds, "cost"), B.SimParams(), bounds,
                  record_series=False).figures
    assert default.cycles < 700, default.cycles
    assert cost.cycles < 1250, cost.cycles


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nodemanager", "static", "arvados", "cluster-autoscaler", "slurm-power-save"])
def test_skipping_cycles_in_a_busy_pool_changes_no_figure(busy_pool, name):
    jobs, bounds, settings = busy_pool
    policy = next(p for p in [B.ours(settings)] + B.baselines(settings, bounds.nowait_peak_nodes)
                  if p.name == name)
    fast = replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
    slow = replay(jobs, policy, B.SimParams(), bounds, record_series=False,
                  skip_cycles=False).figures
    assert fast.cycles < slow.cycles
    assert _figures(fast) == _figures(slow)


def _variant(settings, bounds, name):
    """The default policy of ``settings`` as the cost profile, several sizes, spot or hourly
    billing would run it (``nodemanager simulate``'s options)."""
    import policy_matrix

    od = B.default_size(8)
    if name == "cost":
        cost = loads("", profile="cost")
        cost = replace(cost, core=replace(cost.core, sizes=settings.core.sizes,
                                          max_nodes=settings.core.max_nodes))
        return B.ours(cost, policy_matrix.load(cost.matrix_file), "nodemanager-cost")
    if name == "lifetime":
        # the cost matrix drains a busy node past max_lifetime: a time-based relabel
        cost = loads("[Daemon]\nprofile = cost\nconsolidate = no\nmax_lifetime = 40m\n")
        cost = replace(cost, core=replace(cost.core, sizes=settings.core.sizes,
                                          max_nodes=settings.core.max_nodes))
        return B.ours(cost, policy_matrix.load(cost.matrix_file), "nodemanager-lifetime")
    if name == "sizes":
        several = replace(settings, core=replace(settings.core, sizes=tuple(
            B.default_size(c) for c in (2, 4, 8, 16))))
        return B.ours(B.several_sizes_caps(several, bounds.nowait_peak_nodes))
    if name == "spot":
        # a reclaim about every two hours of each spot VM: dozens in an hour of this pool
        return B.ours(replace(settings, core=replace(settings.core, sizes=(od, spot_size(od, 0.3, 12.0)))))
    if name == "warm_hours":
        # two warm nodes from 03:00 to 05:00 (UTC, the trace's clock) only: no node's tuple
        # changes when the window opens or closes, the schedule wakes the replay
        hours = parse_schedule("0 3 * * *", "2h", "UTC")
        return B.ours(replace(settings, core=replace(settings.core, sizes=(
            replace(od, warm_nodes=2, warm_schedule=hours),))))
    assert name == "hourly"
    return B.ours(replace(settings, core=replace(settings.core, sizes=(B.default_size(8, billing_period=3600),))))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cost", "sizes", "hourly", "spot", "lifetime", "warm_hours"])
def test_skipping_cycles_changes_no_figure_under_other_profiles_sizes_markets_and_billing(busy_pool, name):
    jobs, bounds, settings = busy_pool
    if name == "spot":
        jobs = jobs[:len(synthetic_jobs(0.05, 60 * 8, 7))]   # the first hour: reclaims stretch the tail
        bounds = lower_bounds(jobs, 8)
    policy = _variant(settings, bounds, name)
    fast = replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
    slow = replay(jobs, policy, B.SimParams(), bounds, record_series=False,
                  skip_cycles=False).figures
    # with max_lifetime on, the replay runs every cycle (its relabel under skipping is unproven)
    assert fast.cycles < slow.cycles or (name == "lifetime" and fast.cycles == slow.cycles)
    assert _figures(fast) == _figures(slow)


@pytest.mark.parametrize("billing_period", [0, 3600])
def test_a_long_job_runs_as_many_cycles_however_long_it_runs(billing_period):
    """A busy node's billing window opening and closing (every hour under hourly billing) and a
    booting node's window opening change nothing the default matrix decides: no cycle runs for
    them, so one job's replay costs the same cycles whether it runs 10 or 20 hours."""
    base = loads("")
    settings = replace(base, core=replace(base.core, max_nodes=2, sizes=(
        B.default_size(8, billing_period=billing_period),)))
    cycles = {}
    for hours in (10, 20):
        jobs = [SwfJob(id=1, submit=1000, runtime=hours * 3600, cores=1, mem_mb=1024, requested_time=0)]
        bounds = lower_bounds(jobs, 8)
        fast = replay(jobs, B.ours(settings), B.SimParams(), bounds, record_series=False).figures
        assert fast.jobs_completed == 1 and fast.boots == fast.destroys == 1
        cycles[hours] = fast.cycles
        if hours == 10:
            slow = replay(jobs, B.ours(settings), B.SimParams(), bounds, record_series=False,
                          skip_cycles=False).figures
            assert _figures(fast) == _figures(slow)
    assert cycles[20] == cycles[10], cycles


def test_the_time_dimensions_each_worker_state_reads():
    """Under the shipped matrix a busy node's plan reads no time dimension, a booting one's only
    its boot grace (outside the matrix too), an idle one's its window and idle grace; under the
    cost profile (consolidation relabels busy nodes) every state reads all three."""
    import policy_matrix

    from nodemanager.sim.skip import TIME_DIMENSIONS, time_reads

    reads = time_reads(policy_matrix.load_default(), loads("").core)
    assert reads["busy"] == frozenset()
    assert reads["unpaired"] == {"boot_grace"}
    assert reads["idle"] == {"window", "idle_grace"}
    cost = loads("", profile="cost")
    assert set(time_reads(policy_matrix.load(cost.matrix_file), cost.core).values()) == {
        frozenset(TIME_DIMENSIONS)}


def test_a_queue_said_to_fit_is_placed_by_the_core_without_boots():
    """The bound behind skipping against the core's own placement: whenever :func:`fits` says
    the queue fits on busy and idle nodes' free cores, ``place_demand`` boots nothing and leaves
    nothing unmet."""
    import random

    from nodemanager.core.placement import place_demand
    from nodemanager.core.classify import Classification
    from nodemanager.core.plan_node import Decision, NodeFacts
    from nodemanager.model import Action, CloudNode, Demand, Snapshot, StateTuple, Worker
    from nodemanager.sim.skip import fits
    from policy_matrix.vocabulary import BUSY, IDLE

    rng = random.Random(18)
    size = B.default_size(8)
    settings = replace(loads("").core, sizes=(size,), max_nodes=10_000)
    said_fit = said_not = 0
    for case in range(1500):
        free: dict[tuple[int, int, int], int] = {}
        nodes = []
        for k in range(rng.randint(0, 12)):
            cores, mem = 8, rng.choice((32768, 31129, 16000))
            f = rng.randint(0, cores)
            state = IDLE if f == cores else BUSY
            nodes.append(Decision(NodeFacts(
                node=CloudNode(id=f"n{k}", name=f"n{k}", size=size.name, launched_at=0.0),
                worker=Worker(name=f"n{k}", scheduler="htcondor", cpus=cores, cpus_busy=cores - f, ram_mb=mem),
                size=size, cls=Classification(state, state),
                tuple=StateTuple(state, "closed", "boot wait", "not idle"), rule="-", maction=Action.NONE,
                core_state=state, next_change=None, next_what=None, theirs=None, foreign=False, flights={},
                held=False, lost=False, gone=False, our_drain=None, ours_draining=False, drained=False,
                up=True)))
            if f:
                free[(f, cores, mem)] = free.get((f, cores, mem), 0) + 1
        demand = tuple(Demand(cpus=c, ram_mb=rng.choice((0, 1024, 2048 * c, 3900 * c, 7000)),
                              count=rng.randint(1, 6))
                       for c in rng.sample((1, 2, 3, 4, 8), rng.randint(1, 3)))
        if not fits(demand, free):
            said_not += 1
            continue
        said_fit += 1
        placed = place_demand(Snapshot(now=0.0, polled_at={}, cloud_nodes=tuple(n.facts.node for n in nodes),
                                       demand=demand), settings, {size.name: size}, nodes, [], [],
                              [size.name] * len(nodes))
        assert not placed.boots and not placed.unmet, (case, demand, free)
    assert said_fit > 100 and said_not > 100


def test_a_boot_held_back_after_a_destroy_is_looked_at_again_when_the_hold_ends(busy_pool):
    """``rebuy_hold`` holds a boot for a while after a destroy: the cycles after it must run
    (nothing else changes in a quiet pool), or the queued job waits until the next submit. A
    sparse trace (one short job every ~10 minutes, often right after the idle node went) with
    and without skipping: the same figures, and no job waits much past boot + join + the hold."""
    import policy_matrix
    from nodemanager.sim.swf import SwfJob

    submits = [0.0]
    for k in range(80):
        submits.append(submits[-1] + 230.0 + (k * 37) % 170)
    jobs = [SwfJob(id=k, submit=t, runtime=30.0, cores=1, mem_mb=0, requested_time=600.0)
            for k, t in enumerate(submits)]
    bounds = lower_bounds(jobs, 8)
    cost = loads("[Daemon]\nprofile = cost\nidle_grace = 60\nrebuy_hold = 60\nmax_nodes = 2\n")
    cost = replace(cost, core=replace(cost.core, sizes=(B.default_size(8),)))
    policy = B.ours(cost, policy_matrix.load(cost.matrix_file), "nodemanager-cost")
    fast = replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
    slow = replay(jobs, policy, B.SimParams(), bounds, record_series=False,
                  skip_cycles=False).figures
    assert fast.destroys > 5, fast                 # the idle node goes between jobs
    assert _figures(fast) == _figures(slow)
    # boot 90 s + join 30 s + the 60 s hold + a negotiation cycle and a controller cycle
    assert fast.wait_max <= 90 + 30 + 60 + 60 + 10 + 10, fast.wait_max


def _quiet_pool_replays(settings, jobs):
    """One replay of ``jobs`` under the default policy of ``settings``, with skipping and with every
    cycle: (fast, slow) figures."""
    bounds = lower_bounds(jobs, 8)
    fast = replay(jobs, B.ours(settings), B.SimParams(), bounds, record_series=False).figures
    slow = replay(jobs, B.ours(settings), B.SimParams(), bounds, record_series=False,
                  skip_cycles=False).figures
    return fast, slow


def test_no_cycle_runs_after_destroys_that_leave_nothing_to_do(monkeypatch):
    """Four nodes going idle together are drained and destroyed; in the quiet pool they leave
    (nothing queued, nothing held back, a fifth node busy for hours) no cycle runs right after
    the last destroys, and the figures are those of running every cycle. With
    ``max_concurrent_drains = 1`` the destroys go one a cycle, each with the next drain."""
    from nodemanager.cycle.controller import Controller

    jobs = [SwfJob(id=k, submit=1000.0, runtime=3600.0 * (3 if k == 4 else 1), cores=8, mem_mb=1024,
                   requested_time=0) for k in range(5)]
    base = loads("")
    cycle = Controller.cycle
    for cap in (1, 10):
        plans = []

        def seen(self, *args, **kwargs):
            report = cycle(self, *args, **kwargs)
            plans.append(report.plan)
            return report

        settings = replace(base, core=replace(base.core, max_nodes=5, max_concurrent_drains=cap,
                                              sizes=(B.default_size(8),)))
        with monkeypatch.context() as m:
            m.setattr(Controller, "cycle", seen)
            fast = replay(jobs, B.ours(settings), B.SimParams(), lower_bounds(jobs, 8),
                          record_series=False).figures
        slow = _quiet_pool_replays(settings, jobs)[1]
        assert fast.destroys == 5 and _figures(fast) == _figures(slow), cap
        last = max(k for k, p in enumerate(plans) if p.items and p.now < 3 * 3600.0)
        assert {i.kind.value for i in plans[last].items} == {"destroy"}, plans[last].items
        assert plans[last + 1].now > plans[last].now + settings.poll.cycle_interval, cap


def test_the_cycle_after_a_destroy_that_frees_room_under_max_nodes_runs():
    """``max_nodes = 1``: a wide job queued behind a small node it cannot use is booted for only
    once that node is destroyed; the cycle after the destroy must run (skipped, nothing would
    ever wake the replay for it). The same figures as with every cycle, and the wide job runs."""
    jobs = [SwfJob(id=1, submit=1000.0, runtime=3600.0, cores=2, mem_mb=1024, requested_time=0),
            SwfJob(id=2, submit=1500.0, runtime=600.0, cores=8, mem_mb=1024, requested_time=0)]
    base = loads("")
    settings = replace(base, core=replace(base.core, max_nodes=1,
                                          sizes=(B.default_size(2), B.default_size(8))))
    fast, slow = _quiet_pool_replays(settings, jobs)
    assert fast.jobs_completed == 2 and fast.destroys == 2, fast
    assert fast.cycles < slow.cycles
    assert _figures(fast) == _figures(slow)
