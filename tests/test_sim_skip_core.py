"""The replay skips a cycle only where the core, run on that moment's inputs, plans nothing.

Every time the cycle watch says "skip", the test builds the controller's snapshot of the cloud's
listing and the pool's poll at that instant and runs the policy's own planner on it: no action,
no boot. Each finer skip rule (a queue that fits, a busy/idle turn the matrix leaves alone, no
spare core for consolidation, destroys that settle, time changes the plan does not read) is
exercised here by the policies, sizes and billing that switch it on."""

from __future__ import annotations

import pytest

from nodemanager.cycle.controller import Controller
from nodemanager.sim import baselines as B
from nodemanager.sim import replay as R
from nodemanager.sim.replay_world import ReplayWorld
from tests.test_sim_skip import _variant, synthetic_pool


@pytest.fixture(scope="module")
def pool_hours():
    """Three hours of jobs keeping about 60 8-core nodes busy."""
    return synthetic_pool(0.125, 7)


def _checked_replay(monkeypatch, jobs, policy, bounds):
    controllers: list[Controller] = []
    checked: list[int] = []

    class Watched(Controller):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            controllers.append(self)

    unchanged = ReplayWorld.unchanged

    def check(world):
        skip = unchanged(world)
        if skip:
            ctrl = controllers[-1]
            snap = ctrl.snapshot(world.cloud.list_nodes(), world.now, world.pool.poll(), world.now)
            plan = ctrl.planner(snap, ctrl.settings.core, ctrl.matrix, estimator=ctrl.estimator,
                                escalation=ctrl.escalation or None)
            assert not plan.items and not plan.boots, (world.now, plan.items, plan.boots)
            checked.append(1)
        return skip

    monkeypatch.setattr(R, "Controller", Watched)
    monkeypatch.setattr(ReplayWorld, "unchanged", check)
    figures = R.replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
    return figures, len(checked)


@pytest.mark.parametrize("name", ["default", "cost", "sizes", "hourly"])
def test_a_cycle_is_skipped_only_where_the_core_would_plan_nothing(monkeypatch, pool_hours, name):
    jobs, bounds, settings = pool_hours
    policy = B.ours(settings) if name == "default" else _variant(settings, bounds, name)
    figures, checked = _checked_replay(monkeypatch, jobs, policy, bounds)
    # the ticks the replay jumps over (no input changed, before the next time change) are not asked
    assert checked > 100, (checked, figures.cycles_skipped, figures.cycles)


def test_with_warm_capacity_a_cycle_is_skipped_only_where_the_core_would_plan_nothing(monkeypatch, pool_hours):
    from dataclasses import replace
    jobs, bounds, settings = pool_hours
    warm = replace(settings, core=replace(settings.core, sizes=tuple(replace(s, warm_nodes=2)
                                                                    for s in settings.core.sizes)))
    figures, checked = _checked_replay(monkeypatch, jobs, B.ours(warm), bounds)
    assert checked >= 10, (checked, figures.cycles_skipped, figures.cycles)
