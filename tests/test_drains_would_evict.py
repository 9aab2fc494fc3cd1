"""Graceful drains of ours never end by evicting jobs: consolidation, ``max_lifetime`` and drift
start a drain only when the node's running jobs are expected to end before its retirement ends
(HTCondor's ``ExpectedMachineGracefulDrainingCompletion``; jobs with no known end never end), and
a drain of ours whose jobs would be evicted is cancelled. Through ``nodemanager plan`` on a
snapshot, and through the core."""

from __future__ import annotations

import json
import os

import policy_matrix
from nodemanager.cli import main
from nodemanager.core import plan
from nodemanager.model import Blocked, ItemKind, RunningJob, Size
from tests.core_world import NOW, InFlight, node, settings, snap, worker

COST = policy_matrix.load(os.path.join(os.path.dirname(policy_matrix.default_path()), "cost.matrix"))
SIZES8 = (Size(name="small", cores=8, ram_mb=16000),)
HOUR = 3600.0


def condor(name: str, ends_in: tuple[float | None, ...], retirement: float | None = 2 * HOUR, **kw):
    """A worker running one-core jobs ending ``ends_in`` seconds from now (None: no known end),
    whose graceful drain retires its jobs for ``retirement`` seconds (None: unknown)."""
    return worker(name, "mix", cpus=8, cpus_busy=len(ends_in), running_jobs=len(ends_in),
                  job_end_times=tuple(NOW + e for e in ends_in if e is not None),
                  retirement_end=None if retirement is None else NOW + retirement, **kw)


def by_id(p):
    return {e.node_id: e for e in p.nodes}


def test_consolidation_passes_by_a_node_whose_job_outlives_its_retirement():
    """"long" ends soonest (3 h), so it would be chosen, but its 2-hour retirement would evict it."""
    nodes = [node("long"), node("other"), node("full")]
    workers = [condor("long", (3 * HOUR,)), condor("other", (5 * HOUR, 5 * HOUR), retirement=10 * HOUR),
               condor("full", (HOUR,) * 8)]
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=4), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "other")]
    assert by_id(p)["long"].tuple.worker_state == "busy"
    # with a retirement past its job's end, "long" is the one consolidated
    workers[0] = condor("long", (3 * HOUR,), retirement=4 * HOUR)
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=4), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "long")]


def test_a_90_hour_job_outlives_a_2_hour_retirement():
    nodes = [node("long"), node("full")]
    workers = [condor("long", (90 * HOUR,)), condor("full", (HOUR,) * 8)]
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=0), COST)
    assert p.items == () and by_id(p)["long"].tuple.worker_state == "busy"


def test_a_job_with_no_known_end_or_an_unknown_retirement_counts_as_never_ending():
    nodes = [node("a"), node("b"), node("c")]
    workers = [condor("a", (None,)), condor("b", (HOUR,), retirement=None), condor("c", (HOUR,) * 8)]
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=4), COST)
    assert p.items == ()


def test_a_lifetime_drain_waits_while_its_job_would_be_evicted_and_starts_once_it_would_not():
    nodes = [node("old", age=25 * HOUR)]
    st = settings(max_lifetime=24 * HOUR)
    p = plan(snap(nodes, [condor("old", (90 * HOUR,))]), st, COST)
    old = by_id(p)["old"]
    assert p.items == () and old.tuple.worker_state == "expired"
    assert old.blocked_by == Blocked.WOULD_EVICT
    assert "would evict: its last job ends in 3d 18h; retirement ends in 2h 00m" in old.reason
    p = plan(snap(nodes, [condor("old", (HOUR,))]), st, COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "old")]


def test_a_drift_drain_waits_too():
    tagged = node("d", tags={"nodemanager-settings": "old"})
    st = settings(size_digests=(("small", "new"),))
    p = plan(snap([tagged], [condor("d", (90 * HOUR,))]), st, COST)
    assert p.items == () and by_id(p)["d"].blocked_by == Blocked.WOULD_EVICT


def test_a_drain_of_ours_whose_job_would_be_evicted_is_cancelled():
    nodes = [node("d")]
    drain = InFlight(node="d", action="drain", since=NOW - 600, request_id="r1")
    ours = dict(draining=True, drain_reason="nodemanager: underused")
    p = plan(snap(nodes, [condor("d", (90 * HOUR,), **ours)], in_flight=[drain]), settings(), COST)
    assert [(i.kind, i.node_id, i.request_id) for i in p.items] == [(ItemKind.CANCEL_DRAIN, "d", "r1")]
    assert "cancel our drain: it would evict" in by_id(p)["d"].reason
    # a job that ends before the retirement: the drain goes on
    p = plan(snap(nodes, [condor("d", (HOUR,), **ours)], in_flight=[drain]), settings(), COST)
    assert p.items == ()


def test_an_operators_drain_is_the_operators_choice():
    nodes = [node("a")]
    p = plan(snap(nodes, [condor("a", (90 * HOUR,))], forced_drains=frozenset({"a"})), settings(), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "a")]


def test_a_slurm_drain_never_evicts():
    nodes = [node("a"), node("b")]
    workers = [worker("a", "mix", cpus=8, cpus_busy=1, running_jobs=1, job_end_times=(NOW + 90 * HOUR,)),
               worker("b", "mix", cpus=8, cpus_busy=8, running_jobs=8)]
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=0), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "a")]


CONFIG = """[Daemon]
matrix = {matrix}
consolidate = yes
consolidate_margin = 4

[Size small]
cores = 8
ram_mb = 16000
"""


def _plan(tmp_path, capsys, workers):
    matrix = os.path.join(os.path.dirname(policy_matrix.default_path()), "cost.matrix")
    (tmp_path / "nm.ini").write_text(CONFIG.format(matrix=matrix))
    now = 1767225600
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": now, "polled_at": {"cloud": now - 10, "scheduler": now - 10},
        "cloud_nodes": [{"id": w["name"], "name": w["name"], "size": "small", "launched_at": now - 7200}
                        for w in workers],
        "workers": [dict(w, ad=dict(w["ad"], LastHeardFrom=now - 10)) for w in workers]}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config", str(tmp_path / "nm.ini"),
                 "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), now


def _startd(name: str, jobs: int, retires_by: int, ends: list[int]) -> dict:
    """An HTCondor p-slot ad: ``jobs`` one-core jobs of 8 cores, retirement ending at ``retires_by``."""
    return {"name": name, "scheduler": "htcondor", "job_end_times": ends, "ad": {
        "Name": f"slot1@{name}", "Machine": name, "State": "Claimed", "Activity": "Busy",
        "TotalSlotCpus": 8, "Cpus": 8 - jobs, "NumDynamicSlots": jobs, "TotalSlotMemory": 16000,
        "PartitionableSlot": True, "DaemonStartTime": 1767225600 - 7000,
        "ExpectedMachineGracefulDrainingCompletion": retires_by, "MaxJobRetirementTime": 7200}}


def test_nodemanager_plan_does_not_consolidate_a_node_whose_job_outlives_its_retirement(tmp_path, capsys):
    now = 1767225600
    # "long" ends soonest, but after its retirement: "other" is consolidated in its place
    out, _ = _plan(tmp_path, capsys, [
        _startd("long", 1, now + 7200, [now + 3 * 3600]),
        _startd("other", 1, now + 30 * 86400, [now + 5 * 3600]),
        _startd("full", 8, now + 7200, [now + 3600] * 8)])
    assert [(i["kind"], i["node"]) for i in out["items"]] == [("drain", "other")]


def test_a_snapshots_retirement_end_round_trips_never_and_unknown():
    from nodemanager import snapshot as sj

    s = snap([node("a"), node("b")], [worker("a", "mix"), worker("b", "mix", retirement_end=None)])
    back = sj.loads(json.dumps(sj.to_json(s)), "<test>")
    assert [w.retirement_end for w in back.workers] == [float("inf"), None]
    assert sj.to_json(s)["workers"][0]["retirement_end"] == "never"


def test_a_reclaim_notices_drain_is_not_held_back():
    """The cloud takes the node back whatever we do: its drain keeps new jobs off it."""
    p = plan(snap([node("a", reclaim_at=NOW + 100)], [condor("a", (90 * HOUR,))]), settings(), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "a")]


def test_a_drain_whose_job_runs_past_its_expected_end_is_cancelled_before_the_retirement_evicts_it():
    """The job was due an hour ago (its walltime was no bound): its end is unknown now, so a 2-hour
    retirement may evict it; the drain of ours is cancelled, and consolidation does not pick the node."""
    nodes = [node("d")]
    drain = InFlight(node="d", action="drain", since=NOW - 600, request_id="r1")
    ours = dict(draining=True, drain_reason="nodemanager: underused")
    p = plan(snap(nodes, [condor("d", (-HOUR,), **ours)], in_flight=[drain]), settings(), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.CANCEL_DRAIN, "d")]
    assert "1 of its 1 job(s) run past their expected end" in by_id(p)["d"].reason
    nodes = [node("late"), node("other"), node("full")]
    workers = [condor("late", (-HOUR,)), condor("other", (HOUR, HOUR)), condor("full", (HOUR,) * 8)]
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=4), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "other")]


def _job(started_ago: float, limit: float) -> RunningJob:
    return RunningJob(job_id=f"j{started_ago:.0f}", user="u", start=NOW - started_ago, limit=limit)


def test_a_job_must_end_within_its_own_retirement_not_a_later_jobs():
    """A graceful drain lets jobs run until the longest retirement of the jobs still running: a
    100-hour job 70 h in, beside a 48-hour job just started, is covered only while that job runs.
    With 72 h of retirement each, the node's retirement ends in 72 h (past both ends), yet the
    short job may end first and the long one is then evicted 2 h in: the node is not drained."""
    nodes = [node("two"), node("full")]
    jobs = (_job(70 * HOUR, 100 * HOUR), _job(0.0, 48 * HOUR))
    two = condor("two", (30 * HOUR, 48 * HOUR), retirement=72 * HOUR, jobs=jobs)
    workers = [two, condor("full", (HOUR,) * 8)]
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=0), COST)
    assert p.items == () and by_id(p)["two"].tuple.worker_state == "busy"
    # the same node past max_lifetime: its drain waits, and says why
    old = [node("two", age=25 * HOUR)]
    p = plan(snap(old, [two]), settings(max_lifetime=24 * HOUR), COST)
    assert p.items == () and by_id(p)["two"].blocked_by == Blocked.WOULD_EVICT
    assert "a job ends in 30h 00m, after its own retirement (2h 00m): the jobs whose retirement covers it" in by_id(p)["two"].reason
    # each job within its own 72 hours: drained
    jobs = (_job(10 * HOUR, 60 * HOUR), _job(0.0, 48 * HOUR))
    workers[0] = condor("two", (50 * HOUR, 48 * HOUR), retirement=72 * HOUR, jobs=jobs)
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=0), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "two")]


def test_a_node_whose_jobs_have_outlived_their_retirement_is_not_drained():
    """A job listed a minute past its expected end (it may still run) on a node whose retirement
    has run out: a graceful drain would evict it at once."""
    nodes = [node("late"), node("full")]
    workers = [condor("late", (-60.0,), retirement=-5.0), condor("full", (HOUR,) * 8)]
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=0), COST)
    assert p.items == () and by_id(p)["late"].tuple.worker_state == "busy"
    p = plan(snap([node("late", age=25 * HOUR)], workers[:1]), settings(max_lifetime=24 * HOUR), COST)
    assert p.items == () and by_id(p)["late"].blocked_by == Blocked.WOULD_EVICT
    assert "1 job(s) run and their retirement has run out" in by_id(p)["late"].reason
