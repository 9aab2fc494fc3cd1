"""A disruption reason is one module and one line in ``REASONS``: the toy ``sunset`` reason
(``tests/fixtures/toy_reason.py``) registered by one line runs through ``nodemanager plan`` on a
snapshot, where a ``[Budget NAME]`` naming its budget word limits it, and through the simulator,
whose cycle skipping honours the setting it declares makes it depend on time. And the shipped
reasons are what the budgets and the skip rules read."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from nodemanager.configuration.config import loads
from nodemanager.core import reasons
from nodemanager.core.disruption_budgets import tuple_reasons
from nodemanager.model import Action
from nodemanager.sim import baselines as B
from nodemanager.sim.figures import lower_bounds
from nodemanager.sim.replay import replay
from nodemanager.sim.skip_rules import time_reads
from nodemanager.sim.synthetic import synthetic_jobs
from policy_matrix import load_default
from tests.core_world import plan_json
from tests.fixtures.toy_reason import Sunset

NOW = 1_800_000_000.0
SIZES = "[Size small]\ncores = 2\nram_mb = 8000\nprice = 0.10\n"
_OWN = {"wall_seconds", "cycles", "cycles_skipped"}


@pytest.fixture
def sunset(monkeypatch):
    monkeypatch.setattr(reasons, "REASONS", (*reasons.REASONS, Sunset()))  # the one registration line


def _idle(i: int, launched_ago: float) -> tuple[dict, dict]:
    """An idle node well inside its idle grace (idle 60 s of the default 300 s)."""
    node = {"id": f"i-{i}", "name": f"small-{i}", "size": "small", "launched_at": NOW - launched_ago}
    worker = {"name": f"small-{i}", "scheduler": "slurm", "state": "idle", "cloud_id": f"i-{i}",
              "last_heard": NOW - 5, "registered_at": NOW - launched_ago + 100, "state_since": NOW - 60,
              "cpus": 2, "cpus_busy": 0, "ram_mb": 8000, "running_jobs": 0}
    return node, worker


def test_a_registered_reason_plans_and_a_budget_naming_it_limits_it(tmp_path, capsys, sunset):
    old = [_idle(i, 3 * 3600) for i in range(1, 5)]       # up 3 h: past victim_horizon (2 h)
    young = [_idle(9, 1800)]
    out = plan_json(tmp_path, capsys, SIZES, NOW, old + young)
    acts = {n["id"]: (n["action"], n["blocked_by"]) for n in out["nodes"]}
    assert [acts[f"i-{i}"] for i in range(1, 5)] == [("drain", None)] * 4
    assert acts["i-9"] == (None, None)                     # the matrix keeps it for its idle grace
    assert "sunset: up 10800s" in next(n for n in out["nodes"] if n["id"] == "i-1")["reason"]
    # a [Budget NAME] names the reason by the word it declares, and binds
    out = plan_json(tmp_path, capsys, SIZES + "\n[Budget slow-sunset]\nreasons = sunset\nnodes = 1\n", NOW,
                    old + young)
    assert Counter((n["action"], n["blocked_by"]) for n in out["nodes"] if n["id"] != "i-9") == {
        ("drain", None): 1, (None, "budget"): 3}
    held = next(n for n in out["nodes"] if n["blocked_by"] == "budget")
    assert "held back by budget slow-sunset (sunset: 1 node(s) at once allowed, 1 going)" in held["reason"]
    assert {b["name"]: b["held"] for b in out["budgets"]} == {"slow-sunset": 3}


def test_a_budget_word_no_reason_declares_is_refused(tmp_path, capsys):
    (tmp_path / "nm.ini").write_text(SIZES + "\n[Budget b]\nreasons = sunset\nnodes = 1\n")
    with pytest.raises(Exception, match="unknown reason sunset"):
        loads((tmp_path / "nm.ini").read_text(), str(tmp_path / "nm.ini"))


def _pool():
    jobs = synthetic_jobs(0.25, 12 * 8, 3)
    bounds = lower_bounds(jobs, 8)
    base = loads("")
    settings = replace(base, core=replace(base.core, sizes=(B.default_size(8),), victim_horizon=900.0,
                                          max_nodes=bounds.nowait_peak_nodes))
    return jobs, bounds, settings


def _run(jobs, bounds, settings, skip: bool) -> dict:
    f = replay(jobs, B.ours(settings), B.SimParams(), bounds, record_series=False, skip_cycles=skip).figures
    return {k: v for k, v in f.as_dict().items() if k not in _OWN}


def test_a_registered_reason_runs_in_the_simulator_and_skipping_honours_its_time(monkeypatch):
    jobs, bounds, settings = _pool()
    without = _run(jobs, bounds, settings, skip=True)
    monkeypatch.setattr(reasons, "REASONS", (*reasons.REASONS, Sunset()))
    every_cycle = _run(jobs, bounds, settings, skip=False)
    skipping = _run(jobs, bounds, settings, skip=True)
    assert every_cycle["destroys"] > without["destroys"]   # it acts: idle nodes go before their grace ends
    assert skipping == every_cycle                          # and a skipped cycle never hides its moment


def test_the_shipped_reasons_declare_what_budgets_and_skipping_read():
    assert sorted(reasons.budget_words()) == ["consolidate", "drift", "matrix_drain", "matrix_shutdown",
                                              "max_lifetime", "warm_gives_way"]
    core = loads("").core
    assert reasons.time_dependent(core) == ()
    assert [r.name for r in reasons.time_dependent(replace(core, max_lifetime=3600.0))] == ["max_lifetime"]
    assert tuple_reasons("expired", "busy", "booting", Action.START_DRAIN) == ("drift", "max_lifetime")
    assert tuple_reasons("underused", "busy", "booting", Action.START_DRAIN) == ("consolidate",)
    # settings drift is turned on by the digests, but depends on no time; max_lifetime does: with it
    # every worker state reads every time dimension
    drifting = replace(core, size_digests=(("small", "abc"),))
    assert [r.name for r in reasons.switched_on(drifting, reasons.Stage.LABELS)] == ["drift"]
    assert reasons.time_dependent(drifting) == ()
    matrix = load_default()
    assert time_reads(matrix, drifting)["busy"] == frozenset()
    reads = time_reads(matrix, replace(core, max_lifetime=3600.0))
    assert all(r == frozenset({"window", "boot_grace", "idle_grace"}) for r in reads.values())
