"""Placement steering in the core and the cycle: ranks follow the victim order reversed (the node
given back last is filled first), nodes being given back come last, and the cycle sends only
what changed (nothing when steering is off and nothing was ranked)."""

from __future__ import annotations

from dataclasses import replace

import policy_matrix
from nodemanager.core import estimate, plan
from nodemanager.core.steering import keep_ranks
from nodemanager.cycle.steering import Steering
from nodemanager.model import ItemKind, Outcome
from tests.core_world import NOW, node, settings, snap, worker

DEFAULT = policy_matrix.load_default()


def mixed(name: str, busy: int, ends_in: float):
    return worker(name, "mix", cpus=8, cpus_busy=busy, running_jobs=busy,
                  job_end_times=tuple(NOW + ends_in for _ in range(busy)))


def world():
    """a: 1 job ending in 20 min; b: 3 jobs ending in 5 h; c: idle, within its idle grace."""
    nodes = [node("a"), node("b"), node("c")]
    workers = [mixed("a", 1, 1200.0), mixed("b", 3, 18000.0), worker("c", "idle", cpus=8)]
    return nodes, workers


def test_the_node_kept_longest_is_filled_first_and_the_idle_one_last():
    nodes, workers = world()
    s = snap(nodes, workers)
    p = plan(s, settings(idle_grace=3600.0), DEFAULT)
    ranks = keep_ranks(p, s, 7200.0, estimate)
    assert sorted(ranks, key=ranks.get) == ["b", "a", "c"]


def test_a_node_the_plan_gives_back_comes_last():
    nodes, workers = world()
    s = snap(nodes, workers)
    p = plan(s, settings(idle_grace=3600.0), DEFAULT)
    leaving = replace(p, nodes=tuple(e._replace(action=ItemKind.DRAIN)
                                     if e.node_id == "b" else e for e in p.nodes))
    ranks = keep_ranks(leaving, s, 7200.0, estimate)
    assert sorted(ranks, key=ranks.get) == ["a", "c", "b"]


def test_the_cycle_sends_only_changes_and_releases_when_switched_off():
    nodes, workers = world()
    s = snap(nodes, workers)
    on = settings(idle_grace=3600.0, steering=True)
    p = plan(s, on, DEFAULT)
    steering = Steering()
    first = steering.request(p, s, on)
    assert first is not None and {(w.name, r) for w, r in first.ranks} == {("b", 1), ("a", 2), ("c", 3)}
    assert steering.request(p, s, on) is None                 # one request out at a time
    steering.observe(Outcome("steer", "placement", "failed", "timed out", NOW))
    again = steering.request(p, s, on)
    assert again is not None and len(again.ranks) == 3        # a failed request is sent again
    steering.observe(Outcome("steer", "placement", "ok", "3 ranked", NOW))
    assert steering.request(p, s, on) is None                 # taken, unchanged: nothing to send
    off = settings(idle_grace=3600.0)
    released = steering.request(p, s, off)
    assert released is not None and {(w.name, r) for w, r in released.ranks} == {("b", None), ("a", None),
                                                                                  ("c", None)}
    steering.observe(Outcome("steer", "placement", "ok", "3 released", NOW))
    assert steering.request(p, s, off) is None
    assert Steering().request(p, s, off) is None              # off and never on: no call at all


def test_a_request_without_an_outcome_is_sent_again_after_the_pending_timeout():
    from nodemanager.cycle.steering import PENDING_TIMEOUT

    nodes, workers = world()
    s = snap(nodes, workers)
    on = settings(idle_grace=3600.0, steering=True)
    p = plan(s, on, DEFAULT)
    steering = Steering()
    assert steering.request(p, s, on) is not None          # handed out; its actuator is lost
    assert steering.request(replace(p, now=NOW + PENDING_TIMEOUT - 1), s, on) is None
    again = steering.request(replace(p, now=NOW + PENDING_TIMEOUT), s, on)
    assert again is not None and len(again.ranks) == 3


def test_the_simulated_negotiator_puts_a_job_on_the_lowest_rank_with_room():
    from nodemanager.actors.clock import ManualClock
    from nodemanager.model import CloudNode, Size
    from nodemanager.sim.pool import Job, SimPool

    size = Size("m4", cores=4, ram_mb=8000)
    t0 = 1_200_000.0

    def landed(placement: str, steer: bool) -> list[str]:
        clock = ManualClock(t0)
        pool = SimPool(clock, join_delay=0.0, negotiation_interval=0.0, placement=placement)
        for i in (1, 2, 3):
            pool.vm_started(CloudNode(f"i-{i}", f"n{i}", size.name, t0, private_ip=f"10.0.0.{i}"), size)
        pool.advance(t0)
        if steer:
            by_id = {w.cloud_id: w for w in pool.poll().workers}
            assert pool.steer([(by_id["i-2"], 2), (by_id["i-3"], 1)]) == 2
        pool.submit(Job("a", cpus=1, ram_mb=100, runtime=1000.0, submit_time=t0))
        pool.advance(t0)
        return [nid for nid in ("i-1", "i-2", "i-3") if pool.startd(nid).dslots]

    assert landed("breadth", steer=True) == ["i-1"]     # breadth ignores ranks
    assert landed("steered", steer=False) == ["i-1"]    # nothing ranked: join order
    # i-1 carries no rank (a node not ours, or not ranked yet): it comes first, as with the
    # negotiator snippet; among ranked ones the lowest
    assert landed("steered", steer=True) == ["i-1"]


def test_the_simulated_negotiator_prefers_rank_1_among_ranked_nodes():
    from nodemanager.actors.clock import ManualClock
    from nodemanager.model import CloudNode, Size
    from nodemanager.sim.pool import Job, SimPool

    size = Size("m4", cores=4, ram_mb=8000)
    t0 = 1_200_000.0
    clock = ManualClock(t0)
    pool = SimPool(clock, join_delay=0.0, negotiation_interval=0.0, placement="steered")
    for i in (1, 2, 3):
        pool.vm_started(CloudNode(f"i-{i}", f"n{i}", size.name, t0, private_ip=f"10.0.0.{i}"), size)
    pool.advance(t0)
    by_id = {w.cloud_id: w for w in pool.poll().workers}
    assert pool.steer([(by_id["i-1"], 3), (by_id["i-2"], 2), (by_id["i-3"], 1)]) == 3
    ranked = {w.cloud_id: w.ad.get("NodeManagerKeepRank") for w in pool.poll().workers}
    assert ranked == {"i-1": 3, "i-2": 2, "i-3": 1}
    assert pool.steer([(w, {"i-1": 3, "i-2": 2, "i-3": 1}[w.cloud_id]) for w in pool.poll().workers]) == 0
    for k in range(5):
        pool.submit(Job(f"j{k}", cpus=1, ram_mb=100, runtime=1000.0, submit_time=t0))
    pool.advance(t0)
    assert [len(pool.startd(f"i-{i}").dslots) for i in (1, 2, 3)] == [0, 1, 4]
    by_id = {w.cloud_id: w for w in pool.poll().workers}
    assert pool.steer([(by_id["i-3"], None)]) == 1        # released: the attribute goes
    assert "NodeManagerKeepRank" not in pool.startd("i-3").attrs


def test_a_replay_with_steered_placement_gives_the_short_lived_node_back_sooner(tmp_path, capsys):
    """Two 4-core nodes boot for a 3-core job of 10 minutes and one of 2.5 hours; a 1-core job of
    50 minutes comes while each has a core free. First fit puts it beside the short job, which
    keeps that node 50 minutes more; steered, it goes beside the long job."""
    from tests.sim_cli import replay_rows

    rows = [(1000, 600, 3, 700), (1000, 9000, 3, 9100), (1300, 3000, 1, 3100)]

    def paid(placement: str) -> float:
        run = replay_rows(tmp_path, capsys, rows, placement)
        assert run["jobs_completed"] == 3 and run["jobs_killed"] == 0
        return float(run["paid_node_hours"])

    first_fit, steered = paid("breadth"), paid("steered")
    # the node of the short job goes about 40 minutes sooner (its idle grace after 10, not 50)
    assert first_fit - steered > 0.6, (first_fit, steered)
