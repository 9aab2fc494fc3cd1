"""Issue 18 in the core: consolidation (``underused``), ``max_lifetime`` (``expired``) and
``min_lifetime``, through :func:`nodemanager.core.plan` with the default and the cost matrix."""

from __future__ import annotations

import os
from dataclasses import replace

import policy_matrix
from nodemanager.core import plan
from nodemanager.model import ItemKind
from nodemanager.model import Size
from tests.core_world import NOW, Demand, InFlight, node, settings, snap, worker

COST = policy_matrix.load(os.path.join(os.path.dirname(policy_matrix.default_path()), "cost.matrix"))
DEFAULT = policy_matrix.load_default()
SIZES8 = (Size(name="small", cores=8, ram_mb=16000),)


def mixed(name: str, busy: int, ends_in: float, cpus: int = 8, **kw):
    """A SLURM worker running ``busy`` one-core jobs that end ``ends_in`` seconds from now."""
    return worker(name, "mix", cpus=cpus, cpus_busy=busy, running_jobs=busy,
                  job_end_times=tuple(NOW + ends_in for _ in range(busy)), **kw)


def two_half_empty():
    """a: 1 job ending in 20 min, 7 cores free; b: 3 jobs ending in 5 h, 5 free; c: full."""
    nodes = [node("a"), node("b"), node("c")]
    workers = [mixed("a", 1, 1200.0), mixed("b", 3, 18000.0), mixed("c", 8, 3600.0)]
    return nodes, workers


def by_id(p):
    return {e.node_id: e for e in p.nodes}


def test_cost_profile_drains_the_node_whose_work_ends_soonest_and_says_why():
    nodes, workers = two_half_empty()
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=4), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "a")]
    a = by_id(p)["a"]
    assert a.tuple.worker_state == "underused"
    assert "consolidating: its 1 job(s) end within 20m 00s, 5 free cores elsewhere" in a.reason
    assert by_id(p)["b"].tuple.worker_state == "busy"


def test_default_matrix_shows_underused_but_keeps_todays_behaviour():
    nodes, workers = two_half_empty()
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=4), DEFAULT)
    assert by_id(p)["a"].tuple.worker_state == "underused"
    assert p.items == ()


def test_consolidation_is_off_by_default():
    nodes, workers = two_half_empty()
    p = plan(snap(nodes, workers), settings(), COST)
    assert p.items == ()
    assert {e.tuple.worker_state for e in p.nodes} == {"busy"}


def test_the_margin_keeps_enough_free_cores_elsewhere():
    nodes, workers = two_half_empty()
    # a's 7 free cores would leave b's 5 elsewhere, b's 5 would leave a's 7: both below 8
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=8), COST)
    assert p.items == ()
    # with a margin of 6, a must stay but b, whose jobs end later, may go
    p = plan(snap(nodes, workers), settings(consolidate=True, consolidate_margin=6), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "b")]


def test_queued_jobs_stop_consolidation():
    nodes, workers = two_half_empty()
    p = plan(snap(nodes, workers, demand=[Demand(cpus=1, count=1)]),
             settings(consolidate=True, consolidate_margin=4), COST)
    assert p.items == ()


def test_demand_cancels_a_consolidation_drain_rather_than_booting():
    nodes, workers = two_half_empty()
    workers[0] = mixed("a", 1, 1200.0)
    draining = [InFlight(node="a", action="drain", since=NOW - 60)]
    p = plan(snap(nodes, workers, demand=[Demand(cpus=1, count=12)], in_flight=draining),
             settings(consolidate=True, consolidate_margin=4), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.CANCEL_DRAIN, "a")]
    assert p.boots == ()


def test_max_lifetime_drains_an_old_busy_node_gracefully_never_kills():
    nodes = [node("old", age=90000.0), node("new", age=3600.0)]
    workers = [mixed("old", 2, 600.0), mixed("new", 2, 600.0, registered_at=NOW - 3000)]
    p = plan(snap(nodes, workers), settings(max_lifetime=86400.0), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "old")]
    assert by_id(p)["old"].tuple.worker_state == "expired"
    assert "expired: up 25h 00m, past max_lifetime 24h 00m" in by_id(p)["old"].reason
    assert plan(snap(nodes, workers), settings(max_lifetime=86400.0), DEFAULT).items == ()


def test_queued_jobs_stop_consolidation_but_not_max_lifetime():
    """The cost profile with both: a job queued spares no core, yet the old node still expires."""
    nodes = [node("old", age=90000.0), node("new", age=3600.0)]
    workers = [mixed("old", 2, 600.0), mixed("new", 1, 600.0, registered_at=NOW - 3000)]
    p = plan(snap(nodes, workers, demand=[Demand(cpus=1, count=1)]),
             settings(consolidate=True, consolidate_margin=0, max_lifetime=86400.0), COST)
    assert {e.node_id: e.tuple.worker_state for e in p.nodes} == {"old": "expired", "new": "busy"}


def test_a_busy_node_says_when_max_lifetime_ends_as_its_next_change():
    nodes = [node("new", age=3600.0)]
    workers = [mixed("new", 2, 600.0, registered_at=NOW - 3000)]
    e = by_id(plan(snap(nodes, workers), settings(max_lifetime=86400.0), COST))["new"]
    assert (e.next_change, e.next_change_what) == (NOW - 3600.0 + 86400.0, "max_lifetime ends")
    e = by_id(plan(snap(nodes, workers), settings(), COST))["new"]
    assert e.next_change_what != "max_lifetime ends"


def test_min_lifetime_holds_back_the_give_back_of_a_young_idle_node():
    nodes = [node("young", age=600.0), node("old", age=7200.0)]
    workers = [worker("young", "idle", idle_for=500.0, registered_at=NOW - 550),
               worker("old", "idle", idle_for=500.0)]
    p = plan(snap(nodes, workers), settings(idle_grace=300.0, min_lifetime=1800.0), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "old")]
    young = by_id(p)["young"]
    assert young.blocked_by == "min_lifetime" and "min_lifetime 30m 00s" in young.reason


def test_rebuy_hold_keeps_boots_back_just_after_a_destroy():
    demand = [Demand(cpus=4, count=1, oldest_submit=NOW - 10.0)]
    s = settings(rebuy_hold=60.0)
    p = plan(snap(demand=demand, recent_destroys=(NOW - 30.0,)), s, COST)
    assert p.boots == ()
    assert [u.reason for u in p.unmet] == ["backoff"]
    assert "a node was given back 30s ago (rebuy_hold 1m 00s" in p.unmet[0].text
    assert [b.count for b in plan(snap(demand=demand, recent_destroys=(NOW - 61.0,)), s, COST).boots] == [1]
    assert [b.count for b in plan(snap(demand=demand, recent_destroys=(NOW - 30.0,)), settings(), COST).boots] == [1]
    # jobs queued longer than the hold (or since an unknown time) are never held: no starvation
    for old in (Demand(cpus=4, count=1, oldest_submit=NOW - 61.0), Demand(cpus=4, count=1)):
        assert [b.count for b in plan(snap(demand=[old], recent_destroys=(NOW - 30.0,)), s, COST).boots] == [1]


def test_rebuy_hold_keeps_boots_back_in_the_cycle_that_destroys_a_node():
    # our drain of a 4-core node finished: it goes; the 16-core job never fitted on it
    nodes = [node("gone")]
    drained = [InFlight(node="gone", action="drain", since=NOW - 60)]
    workers = [worker("gone", "drain", idle_for=1000.0)]
    p = plan(snap(nodes, workers, demand=[Demand(cpus=16, count=1, oldest_submit=NOW - 5.0)],
                  in_flight=drained), settings(rebuy_hold=60.0), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DESTROY, "gone")]
    assert p.boots == () and "a node was given back 0s ago" in p.unmet[0].text


def test_a_node_booted_with_other_size_or_image_settings_is_expired(time_now, scripted_scheduler):
    """The actuator tags each VM with its size's settings at boot; after the image changes in the
    configuration, a busy node booted before is ``expired`` and the cost matrix drains it."""
    from nodemanager.cycle.actuate import Actuator, Task
    from nodemanager.configuration.config import loads
    from nodemanager.model import BootRequest
    from nodemanager.sim.cloud import SimCloud

    ini = "[Size small]\ncores = 8\nram_mb = 16000\n[Cloud Create]\nimage = {}\n"
    before, after = loads(ini.format("img-1")), loads(ini.format("img-2"))
    cloud = SimCloud(clock=time_now, sizes=before.core.sizes, cluster="c", boot_delay=0.0)
    act = Actuator(cloud, scripted_scheduler, before, clock=time_now, request_ids=lambda: "r")
    act.run(Task(BootRequest("small", 1, "demand")))
    [booted] = cloud.list_nodes()
    nodes = [node("n1", tags=booted.tags), node("n2", tags=booted.tags)]
    workers = [mixed("n1", 2, 600.0), worker("n2", "idle", idle_for=100.0)]
    same = plan(snap(nodes, workers), replace(before.core, sizes=SIZES8), COST)
    assert {e.tuple.worker_state for e in same.nodes} == {"busy", "idle"} and same.items == ()
    p = plan(snap(nodes, workers), replace(after.core, sizes=SIZES8), COST)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "n1")]
    assert "booted with other [Size small] or [Cloud Create] settings" in by_id(p)["n1"].reason
    assert plan(snap(nodes, workers), replace(after.core, sizes=SIZES8), DEFAULT).items == ()
