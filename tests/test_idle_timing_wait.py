"""``idle_timing = wait``: break-even idle timing that keeps each size's last free cores for
``idle_grace``, through ``nodemanager plan`` on a snapshot and through replays of the controller."""

import json
from dataclasses import replace

import policy_matrix
import pytest

from nodemanager.cli import main
from nodemanager.configuration.config import ConfigError, loads
from nodemanager.sim import baselines as B
from nodemanager.sim.figures import lower_bounds
from nodemanager.sim.replay import replay
from nodemanager.sim.swf import SwfJob

NOW = 1767225600
BREAK_EVEN = " (idle grace 60s (the floor): break-even: boot+join 120s, 0 % of the last 50 idle periods re-used within it)"


def _plan(tmp_path, capsys, timing: str, busy_cores: int, down: bool = False, ini: str = "",
          arrivals: list[float] | None = None) -> dict[str, tuple[str, str | None, str]]:
    """Node -> (idle grace tuple value, action, why) for two idle nodes (a idle 150 s, b 120 s) and
    one busy node using ``busy_cores`` of 8 (and with ``down`` a node d without jobs, down for
    10 s), the size's break-even grace 60 s; ``ini``: more [Daemon] lines; ``arrivals``: the
    snapshot's."""
    (tmp_path / "nm.ini").write_text(f"[Daemon]\nprofile = cost\nidle_timing = {timing}\n{ini}\n"
                                     "[Size small]\ncores = 8\nram_mb = 32000\nprice = 0.34\n")

    def worker(name: str, state: str, since: int, busy: int) -> dict:
        return {"name": name, "scheduler": "slurm", "state": state, "cloud_id": name, "last_heard": NOW - 5,
                "state_since": since, "registered_at": NOW - 3500, "cpus": 8, "cpus_busy": busy,
                "ram_mb": 32000, "running_jobs": 1 if busy else 0}

    (tmp_path / "snap.json").write_text(json.dumps({
        "now": NOW, "polled_at": {"cloud": NOW - 5, "scheduler": NOW - 5},
        "cloud_nodes": [{"id": n, "name": n, "size": "small", "launched_at": NOW - 3600}
                        for n in ("abcd" if down else "abc")],
        "workers": [worker("a", "idle", NOW - 150, 0), worker("b", "idle", NOW - 120, 0),
                    worker("c", "mix" if busy_cores < 8 else "alloc", NOW - 900, busy_cores)]
        + ([worker("d", "down", NOW - 10, 0)] if down else []),
        "demand": [], "idle_graces": {"small": [60, BREAK_EVEN]},
        **({"arrivals": arrivals} if arrivals is not None else {})}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config", str(tmp_path / "nm.ini"),
                 "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {n["id"]: (n["tuple"]["idle_grace"], n["action"], n["reason"]) for n in json.loads(out)["nodes"]}


def test_wait_keeps_the_last_idle_node_when_no_busy_node_has_a_free_core(tmp_path, capsys):
    money = _plan(tmp_path, capsys, "money", busy_cores=8)
    assert [money[n][:2] for n in "ab"] == [("idle exceeded", "drain"), ("idle exceeded", "drain")]
    wait = _plan(tmp_path, capsys, "wait", busy_cores=8)
    # a goes by the break-even grace; b, idle the shortest, keeps idle_grace (300 s) as the size's last free cores
    assert wait["a"][:2] == ("idle exceeded", "drain") and "break-even" in wait["a"][2]
    assert wait["b"][:2] == ("idle wait", None)
    assert "idle_grace 300s: idle_timing = wait keeps the size's last free cores" in wait["b"][2]


def test_wait_keeps_an_idle_node_not_one_that_is_down(tmp_path, capsys):
    wait = _plan(tmp_path, capsys, "wait", busy_cores=8, down=True)
    assert wait["a"][:2] == ("idle exceeded", "drain")
    assert wait["b"][:2] == ("idle wait", None) and "idle_timing = wait" in wait["b"][2]


def test_wait_gives_back_every_idle_node_while_a_busy_node_has_a_free_core(tmp_path, capsys):
    wait = _plan(tmp_path, capsys, "wait", busy_cores=7)
    assert [wait[n][:2] for n in "ab"] == [("idle exceeded", "drain"), ("idle exceeded", "drain")]


def test_idle_timing_is_money_in_the_cost_profile_and_checked():
    assert loads("[Daemon]\nprofile = cost\n").core.idle_timing == "money"
    assert loads("[Daemon]\nprofile = cost\nidle_timing = wait\n").core.idle_timing == "wait"
    with pytest.raises(ConfigError) as info:
        loads("[Daemon]\nprofile = cost\nidle_timing = speed\n", "site.ini")
    assert "site.ini:3" in str(info.value) and "money, wait" in str(info.value)


def _cost(timing: str, max_nodes: int = 2):
    base = loads("", "<test>", profile="cost")
    core = replace(base.core, sizes=(B.default_size(8),), max_nodes=max_nodes, idle_timing=timing)
    return B.ours(replace(base, core=core), policy_matrix.load(base.matrix_file), "nodemanager-cost")


def test_a_replay_whose_pool_empties_before_each_job_waits_less_with_wait():
    """Three 8-core jobs boot three nodes (break-even needs three joins), then one 1-core job of 10
    minutes every 15 minutes: the one node idles 5 minutes between jobs. Break-even learns that a give-back after 60 s pays least (a re-boot costs 120 s), so with
    ``money`` every job waits for a boot; with ``wait`` the node is the size's last free cores and
    stays the configured 300 s, so the next job starts on it at once, for more node-hours."""
    jobs = [SwfJob(id=i + 1, submit=0.0, runtime=600.0, cores=8) for i in range(3)]
    jobs += [SwfJob(id=i + 4, submit=900.0 * (i + 1), runtime=600.0, cores=1) for i in range(40)]
    bounds = lower_bounds(jobs, 8)
    money = replay(jobs, _cost("money", max_nodes=3), B.SimParams(), bounds, record_series=False).figures
    wait = replay(jobs, _cost("wait", max_nodes=3), B.SimParams(), bounds, record_series=False).figures
    assert money.jobs_completed == wait.jobs_completed == 43
    assert money.jobs_killed == wait.jobs_killed == 0
    # the three first jobs wait for their boots either way; most later ones only with money
    assert money.wait_p50 >= 120 and wait.wait_p50 <= 60
    assert wait.boots == 3 and money.boots > 20
    assert money.paid_node_hours < wait.paid_node_hours


def test_skipping_quiet_cycles_changes_no_wait_figure():
    """Whether a busy node has a free core decides the last idle node's grace, so a replay in
    ``wait`` mode runs a cycle when free cores change: skipping the others changes no figure."""
    jobs = [SwfJob(id=i + 1, submit=i * 500.0 + (i % 4) * 170.0, runtime=250.0 + 90 * (i % 5),
                   cores=1 + 3 * (i % 3)) for i in range(60)]
    skipping_changes_no_figure(jobs, _cost("wait", max_nodes=4))


def skipping_changes_no_figure(jobs: list[SwfJob], policy) -> None:
    """Replay ``jobs`` under ``policy`` skipping quiet cycles and running every cycle: the first
    runs fewer cycles, and every figure but the cycle counts and the wall time is the same."""
    bounds = lower_bounds(jobs, 8)
    fast = replay(jobs, policy, B.SimParams(), bounds, record_series=False).figures
    slow = replay(jobs, policy, B.SimParams(), bounds, record_series=False, skip_cycles=False).figures
    own = {"wall_seconds", "cycles", "cycles_skipped"}
    assert fast.cycles < slow.cycles
    assert {k: v for k, v in fast.as_dict().items() if k not in own} == \
        {k: v for k, v in slow.as_dict().items() if k not in own}
