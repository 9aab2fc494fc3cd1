"""Spot priced by the predicted runtime: jobs that ask for the same walltime go to spot when their
user's recent jobs ran briefly and to on-demand when they ran long (the requested time is often
10-1000x the runtime, so pricing by it keeps every job off a busy spot market)."""

from __future__ import annotations

import json

from nodemanager.cli import main

HOUR, DAY = 3600.0, 86400.0
NOW = 1767225600.0

INI = """\
[Daemon]
runtime_prediction = recent
[Cloud]
driver = ec2
cluster = spot-test
[Cloud Create]
image = ami-12345678
[Size od]
cores = 8
ram_mb = 32000
price = 0.34
billing_period = 0
[Size od-spot]
instance_type = od
cores = 8
ram_mb = 32000
price = 0.102
market = spot
interruptions_per_day = 0.2
billing_period = 0
"""


def _plan(tmp_path, capsys, demand: list[dict]) -> list[dict]:
    ini = tmp_path / "spot.ini"
    ini.write_text(INI)
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"now": NOW, "polled_at": {"cloud": NOW, "scheduler": NOW},
                                "cloud_nodes": [], "workers": [], "in_flight": [], "demand": demand}))
    capsys.readouterr()
    assert main(["plan", "--snapshot", str(snap), "--config", str(ini), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["boots"]


def test_plan_sends_a_short_predicted_group_to_spot_and_a_long_one_to_on_demand(tmp_path, capsys):
    """Both groups ask for 72 hours; at 0.2 reclaims per VM-day spot takes up to about 11 hours."""
    boots = _plan(tmp_path, capsys, [
        {"cpus": 8, "ram_mb": 1000, "count": 2, "walltime": 72 * HOUR, "runtime": 15 * 60},
        {"cpus": 8, "ram_mb": 1000, "count": 3, "walltime": 72 * HOUR, "runtime": 64 * HOUR}])
    assert {b["size"]: b["count"] for b in boots} == {"od-spot": 2, "od": 3}, boots


def _swf(path, jobs: list[tuple[int, float, float, int]]) -> None:
    """SWF lines: (id, submit, runtime, user); 8 cores, 72 hours asked, executable 1."""
    path.write_text("".join(f"{i} {t:.0f} 0 {r:.0f} 8 -1 -1 8 {72 * HOUR:.0f} -1 1 {u} 1 1 1 1 -1 -1\n"
                            for i, t, r, u in sorted(jobs, key=lambda j: j[1])))


def _two_users(tmp_path, capsys, ini_text: str | None, *flags: str) -> dict:
    """User 1's jobs run 5 minutes, user 2's 60 hours, all asking for 72 hours; one replay's
    figures with a spot copy of the size at 0.3 of its price. (Each user's jobs come while the
    other's nodes are busy or gone: the pool, not the controller, places a job on any idle node.)"""
    jobs = [(1, 0.0, 60 * HOUR, 2), (2, 60.0, 60 * HOUR, 2)]               # learnt: 60 h
    jobs += [(10 + k, 600.0 + k * 1800.0, 300.0, 1) for k in range(20)]    # learnt: 5 min, then spot
    jobs += [(50 + k, 70 * HOUR + k * 60.0, 60 * HOUR, 2) for k in range(4)]
    jobs += [(60 + k, 70 * HOUR + 600.0 + k * 1800.0, 300.0, 1) for k in range(10)]
    trace = tmp_path / "two-users.swf"
    _swf(trace, jobs)
    config: tuple[str, ...] = ()
    if ini_text is not None:
        ini = tmp_path / "pred.ini"
        ini.write_text(ini_text)
        config = ("--config", str(ini))
    capsys.readouterr()
    assert main(["simulate", "--trace", str(trace), *config, "--max-nodes", "20",
                 "--jobs", "1", "--json", "--by", "size", "--spot-price-factor", "0.3", *flags]) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert run["jobs_killed_by"]["by_us"] == 0 and run["jobs_submitted"] == len(jobs), run
    return run


def _hours(run: dict) -> dict[str, float]:
    return {row["size"]: row["node_hours"] for row in run["spend"]}


def test_simulate_runs_the_short_users_jobs_on_spot_and_the_long_users_on_demand(tmp_path, capsys):
    """Once each user's first jobs finished, the predicted runtime in the demand sends user 1's
    jobs to spot and keeps user 2's on on-demand: the spot size's paid time stays under one of
    user 2's jobs. A spot size turns the prediction on without a setting (the embedded defaults);
    ``runtime_prediction = off`` still wins, and prices every job by the 72 hours it asks for."""
    for ini in ("[Daemon]\nruntime_prediction = recent\n", None):
        hours = _hours(_two_users(tmp_path, capsys, ini, "--spot-interruptions-per-day", "0.2"))
        assert 0 < hours.get("sim8-spot", 0) < 60 and hours["sim8"] >= 6 * 60, (ini, hours)
    off = _hours(_two_users(tmp_path, capsys, "[Daemon]\nruntime_prediction = off\n",
                            "--spot-interruptions-per-day", "0.2"))
    assert off.get("sim8-spot", 0) == 0, off


def test_with_the_defaults_spot_backs_off_after_reclaims_it_was_not_told_of(tmp_path, capsys):
    """The spot size is configured with 0.0073 reclaims per VM-day while the market reclaims 6:
    the long user's jobs, which spot takes at the configured rate, move to on-demand once the
    controller has watched reclaims, with no setting beyond the spot size."""
    told = _hours(_two_users(tmp_path, capsys, None, "--spot-interruptions-per-day", "0.0073"))
    harsh = _two_users(tmp_path, capsys, None, "--spot-interruptions-per-day", "6",
                       "--spot-configured-rate", "0.0073")
    assert harsh["reclaims"] >= 1, harsh
    # the long user's 60-hour jobs leave spot; the 5-minute ones, re-run cheaply, stay
    assert 0 < _hours(harsh).get("sim8-spot", 0) < 0.5 * told["sim8-spot"], (_hours(harsh), told)


def test_groups_alike_but_for_their_user_merge_and_with_prediction_off_the_demand_passes_as_polled():
    from nodemanager.cycle.runtime_memory import RuntimeMemory
    from nodemanager.model import Demand

    memory = RuntimeMemory()
    memory.record("ann", "sim", 400.0)
    memory.record("bob", "fit", 500.0)
    memory.record("cat", "fit", 40 * HOUR)
    polled = (Demand(cpus=8, count=2, walltime=72 * HOUR, user="ann", name="sim", oldest_submit=NOW),
              Demand(cpus=8, count=3, walltime=72 * HOUR, user="bob", name="other", oldest_submit=NOW - 60),
              Demand(cpus=8, count=1, walltime=72 * HOUR, user="cat", name="fit"),
              Demand(cpus=8, count=4, walltime=72 * HOUR, user="dan", name="new"))
    assert memory.demand(polled, "off") == polled
    out = memory.demand(polled, "recent")
    # ann's and bob's (bob's by his other job name) run minutes: one group at the 15-minute bucket;
    # cat's 40 hours (the 64-hour bucket); dan has no history: his requested time's bucket
    assert [(d.count, d.runtime, d.user, d.oldest_submit) for d in out] == [
        (5, 900.0, None, NOW - 60), (1, 64 * HOUR, None, None), (4, 128 * HOUR, None, None)]
    assert all(d.walltime == 72 * HOUR for d in out)
