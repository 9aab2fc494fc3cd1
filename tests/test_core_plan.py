"""Planning: matrix actions to items, gates, caps, budgets, packing, in-flight work, explanations."""

import random

import policy_matrix
import pytest

from nodemanager.core import plan
from nodemanager.model import ItemKind, VictimCost
from tests.core_world import (NOW, Demand, InFlight, node, pool, settings, snap,
                              worker)

MATRIX = policy_matrix.load_default()


def run(s, st=None, **kw):
    return plan(s, st or settings(), MATRIX, **kw)


def acts(p):
    return {i.node_id: i.kind.value for i in p.items}


def why(p, node_id):
    return next(e for e in p.nodes if e.node_id == node_id)


def test_matrix_actions_become_items():
    nodes, workers = pool({"idle-old": "idle", "busy": "alloc", "down": "down*", "drained": "drain"})
    nodes += [node("failed-boot", age=3600), node("booting", age=60)]
    p = run(snap(nodes, workers))
    assert acts(p) == {"idle-old": "drain", "down": "destroy", "drained": "destroy",
                       "failed-boot": "destroy"}
    destroys = {i.node_id: i.cancellable for i in p.items if i.kind is ItemKind.DESTROY}
    assert destroys == {"down": False, "drained": False, "failed-boot": False}
    assert next(i for i in p.items if i.node_id == "idle-old").cancellable


def test_every_node_is_explained_with_its_tuple_and_rule():
    nodes, workers = pool({"a": "idle", "b": "alloc"})
    p = run(snap(nodes + [node("c", age=60)], workers))
    assert [e.node_id for e in p.nodes] == ["a", "b", "c"]
    for e in p.nodes:
        m = MATRIX.lookup(e.tuple)
        assert (e.rule, e.matrix_action) == (m.rule.location, m.action)
    assert str(why(p, "a").tuple) == "(idle, open, boot exceeded, idle exceeded)"
    assert why(p, "c").tuple.worker_state == "unpaired"
    assert why(p, "c").next_change_what == "boot grace ends"


def test_idle_grace_is_counted_from_the_scheduler_idle_since():
    nodes = [node("a"), node("b")]
    workers = [worker("a", idle_for=299), worker("b", idle_for=301)]
    p = run(snap(nodes, workers))
    assert acts(p) == {"b": "drain"}
    a = why(p, "a")
    assert a.tuple.idle_grace == "idle wait"
    assert (a.next_change, a.next_change_what) == (NOW + 1, "idle grace ends")


def test_closed_billing_window_keeps_an_idle_node():
    # hourly billing: at 2h+10min the window (last 5 min of the hour) is closed
    p = run(snap([node("a", "hourly", age=7800)], [worker("a")]))
    assert acts(p) == {}
    assert why(p, "a").tuple.window == "closed"
    assert why(p, "a").next_change == NOW - 7800 + 3 * 3600 - 300


def test_stale_input_blocks_everything():
    nodes, workers = pool({"idle": "idle", "down": "down"})
    s = snap(nodes, workers, demand=[Demand(cpus=4, count=3)])
    stale = snap(nodes, workers, demand=[Demand(cpus=4, count=3)])
    object.__setattr__(stale, "polled_at", {"cloud": NOW - 5, "scheduler": NOW - 301})
    assert run(s).items and run(s).boots
    p = run(stale)
    assert p.items == () and p.boots == ()
    assert "stale" in p.frozen and "scheduler" in p.frozen
    assert {e.blocked_by for e in p.nodes if e.node_id in ("idle", "down")} == {"stale"}


def test_missing_input_counts_as_stale():
    s = snap(*pool({"down": "down"}))
    object.__setattr__(s, "polled_at", {"cloud": NOW})
    p = run(s)
    assert p.items == () and "scheduler never polled" in p.frozen


def test_paused_does_nothing():
    p = run(snap(*pool({"down": "down"}), paused="operator maintenance"))
    assert p.items == ()
    assert why(p, "down").blocked_by == "paused"
    assert "operator maintenance" in p.frozen


def test_held_node_gets_no_action():
    p = run(snap(*pool({"a": "down", "b": "down"}), held=frozenset({"a"})))
    assert acts(p) == {"b": "destroy"}
    assert why(p, "a").blocked_by == "held"


def test_min_nodes_is_kept():
    p = run(snap(*pool({"a": "idle", "b": "idle", "c": "idle"})), settings(min_nodes=2))
    assert acts(p) == {"a": "drain"}
    assert {why(p, n).blocked_by for n in "bc"} == {"min_nodes"}
    assert "min_nodes 2" in why(p, "b").reason


def test_min_nodes_boots_the_cheapest_size():
    p = run(snap(*pool({"a": "alloc"})), settings(min_nodes=3))
    assert [(b.size, b.count) for b in p.boots] == [("small", 2)]
    assert "min_nodes" in p.boots[0].reason


def test_idle_node_needed_by_demand_is_not_drained():
    p = run(snap(*pool({"a": "idle", "b": "idle"}), demand=[Demand(cpus=2, ram_mb=1000, count=1)]))
    assert len(p.items) == 1  # one node takes the job, the other goes
    kept = next(e for e in p.nodes if e.action is None)
    assert kept.blocked_by == "demand" and "queued jobs need it" in kept.reason
    assert p.boots == ()


def test_demand_that_does_not_fit_does_not_protect_a_node():
    p = run(snap(*pool({"a": "idle"}), demand=[Demand(cpus=8, ram_mb=1000, count=1)]))
    assert acts(p) == {"a": "drain"}
    assert [(b.size, b.count) for b in p.boots] == [("large", 1)]


def test_packing_uses_cheapest_fitting_size_with_memory_scaling():
    # 10 one-core jobs: 3 small (0.6/h) beat 1 large (0.8/h)
    p = run(snap(demand=[Demand(cpus=1, ram_mb=1000, count=10)]))
    assert [(b.size, b.count) for b in p.boots] == [("small", 3)]
    # 15500 MB does not fit in small's 16000 * 0.95 = 15200 usable MB
    p = run(snap(demand=[Demand(cpus=1, ram_mb=15500, count=1)]))
    assert [(b.size, b.count) for b in p.boots] == [("large", 1)]
    p = run(snap(demand=[Demand(cpus=1, ram_mb=15200, count=1)]))
    assert [(b.size, b.count) for b in p.boots] == [("small", 1)]


def test_packing_fills_leftover_capacity_of_new_nodes():
    # 2 jobs of 12 cores need 2 large nodes; 4 one-core jobs then fit in their 4 spare cores each
    p = run(snap(demand=[Demand(cpus=12, ram_mb=1000, count=2), Demand(cpus=1, ram_mb=100, count=8)]))
    assert [(b.size, b.count) for b in p.boots] == [("large", 2)]


def test_memory_limits_jobs_per_node():
    # 4 cores but only 15200 usable MB: 3 jobs of 5000 MB per small node -> 6 jobs need 2 nodes
    p = run(snap(demand=[Demand(cpus=1, ram_mb=5000, count=6)]), settings(sizes=(settings().sizes[0],)))
    assert [(b.size, b.count) for b in p.boots] == [("small", 2)]


def test_existing_capacity_is_used_before_booting():
    nodes = [node("booting", age=60), node("busy-half")]
    workers = [worker("busy-half", "mix")]  # 2 of 4 cores free
    p = run(snap(nodes, workers, demand=[Demand(cpus=2, ram_mb=1000, count=3)]))
    assert p.boots == ()  # 1 on busy-half, 2 on the booting node


def test_in_flight_boots_count_as_capacity_and_against_caps():
    s = snap(demand=[Demand(cpus=4, count=2)],
             in_flight=[InFlight(node="req-1", action="boot", since=NOW - 30, size="small")])
    p = run(s)
    assert [(b.size, b.count) for b in p.boots] == [("small", 1)]
    p = run(s, settings(max_nodes=1))
    assert p.boots == ()
    assert any("max_nodes 1" in n for n in p.notes)


def test_in_flight_boot_already_listed_is_not_counted_twice():
    n = node("i-1", age=30, tags={"nodemanager-request": "req-1"})
    s = snap([n], demand=[Demand(cpus=4, count=2)],
             in_flight=[InFlight(node="req-1", action="boot", since=NOW - 60, size="small")])
    assert [(b.size, b.count) for b in run(s).boots] == [("small", 1)]


def test_cancel_a_drain_rather_than_boot():
    nodes, workers = pool({"d": "drng"})
    workers = [worker("d", "idle")]  # our drain has not taken effect on an idle node yet
    s = snap(nodes, workers, demand=[Demand(cpus=4, count=1)],
             in_flight=[InFlight(node="d", action="drain", since=NOW - 60, request_id="7")])
    p = run(s)
    assert acts(p) == {"d": "cancel_drain"} and p.boots == ()
    item = p.items[0]
    assert item.request_id == "7" and "queued jobs need it" in item.reason


def test_drained_node_of_ours_is_destroyed_unless_demand_needs_it():
    nodes, workers = pool({"d": "drain"})
    fl = [InFlight(node="d", action="drain", since=NOW - 600, request_id="3")]
    p = run(snap(nodes, workers, in_flight=fl))
    assert acts(p) == {"d": "destroy"} and p.items[0].request_id == "3"
    assert not p.items[0].cancellable
    p = run(snap(nodes, workers, in_flight=fl, demand=[Demand(cpus=1, count=1)]))
    assert acts(p) == {"d": "cancel_drain"}


def test_drain_under_way_gets_no_new_item_and_may_escalate():
    nodes, workers = pool({"d": "drng"})
    fl = [InFlight(node="d", action="drain", since=NOW - 600)]
    p = run(snap(nodes, workers, in_flight=fl))
    assert p.items == () and "drain under way" in why(p, "d").reason
    seen = []

    def escalation(w, f, now):
        seen.append((w.name, f.node, now))
        return "quick"
    p = run(snap(nodes, workers, in_flight=fl), escalation=escalation)
    assert [(i.kind, i.schedule) for i in p.items] == [(ItemKind.ESCALATE, "quick")]
    assert seen == [("d", "d", NOW)]


def test_in_flight_destroy_gets_no_new_item():
    nodes, workers = pool({"x": "down"})
    p = run(snap(nodes, workers, in_flight=[InFlight(node="x", action="destroy", since=NOW - 5)]))
    assert p.items == () and why(p, "x").blocked_by == "in_flight"


def test_stale_busy_node_under_our_drain_is_destroyed_only_if_the_matrix_says_so():
    nodes = [node("d")]
    workers = [worker("d", "alloc", last_heard=NOW - 5000)]  # stale -> down, jobs may still run
    fl = [InFlight(node="d", action="drain", since=NOW - 600)]
    assert acts(run(snap(nodes, workers, in_flight=fl))) == {"d": "destroy"}  # default: down -> shutdown
    keep_down = policy_matrix.parse(
        "down | * | * | * -> None\n* | * | * | * -> None\n", "keep.matrix")
    p = plan(snap(nodes, workers, in_flight=fl), settings(), keep_down)
    assert p.items == ()


def test_forced_drain_of_a_busy_node_drains_never_destroys():
    p = run(snap(*pool({"b": "alloc"}), forced_drains=frozenset({"b"})), settings(min_nodes=5))
    assert acts(p) == {"b": "drain"}
    assert "operator" in p.items[0].reason


def test_start_drain_on_unpaired_node_has_nothing_to_drain():
    drain_all = policy_matrix.parse("* | * | * | * -> START_DRAIN\n", "all.matrix")
    p = plan(snap([node("u", age=60)]), settings(), drain_all)
    assert p.items == () and why(p, "u").blocked_by == "no_worker"


def test_max_nodes_counts_down_and_booting_nodes():
    nodes, workers = pool({"busy": "alloc", "down": "down*"})
    nodes.append(node("booting", age=60))
    p = run(snap(nodes, workers, demand=[Demand(cpus=4, count=5)]), settings(max_nodes=5))
    assert sum(b.count for b in p.boots) == 2  # 3 listed (one down, one booting) + 2 = 5
    assert any("max_nodes 5 reached" in n for n in p.notes)


def test_quota_caps_boots():
    p = run(snap(demand=[Demand(cpus=4, count=5)], quota=3))
    assert sum(b.count for b in p.boots) == 3
    assert any("cloud quota 3" in n for n in p.notes)


def test_max_total_price_caps_boots():
    nodes, workers = pool({"busy": "alloc"})  # 0.2/h in use
    p = run(snap(nodes, workers, demand=[Demand(cpus=4, count=10)]), settings(max_total_price=1.0))
    assert sum(b.count for b in p.boots) == 4  # 0.2 + 4 * 0.2 = 1.0
    assert any("max_total_price" in n for n in p.notes)


def test_blocked_size_falls_back_to_the_next_cheapest():
    p = run(snap(demand=[Demand(cpus=4, count=1)], blocked_sizes=frozenset({"small"})))
    assert [(b.size, b.count) for b in p.boots] == [("hourly", 1)]
    p = run(snap(demand=[Demand(cpus=4, count=1)],
                 blocked_sizes=frozenset({"small", "hourly", "large"})))
    assert p.boots == () and any("blocked" in n for n in p.notes)


def test_pinned_size_demand():
    p = run(snap(demand=[Demand(cpus=1, count=1, size="large")]))
    assert [(b.size, b.count) for b in p.boots] == [("large", 1)]


def test_unsatisfiable_demand_is_noted():
    p = run(snap(demand=[Demand(cpus=64, count=1)]))
    assert p.boots == () and any("no size fits" in n for n in p.notes)


def test_max_concurrent_drains_counts_drains_under_way_and_picks_victims():
    nodes, workers = pool({"a": "idle", "b": "idle", "c": "idle", "busy": "drng"})
    fl = [InFlight(node="busy", action="drain", since=NOW - 60)]
    waste = {"a": 30.0, "b": 10.0, "c": 20.0}
    p = run(snap(nodes, workers, in_flight=fl), settings(max_concurrent_drains=2),
            estimator=lambda w, now: VictimCost(drain_waste=waste.get(w.name, 0.0)))
    assert acts(p) == {"b": "drain"}  # one slot left; b wastes least
    assert {why(p, n).blocked_by for n in "ac"} == {"budget"}
    assert "max_concurrent_drains 2" in why(p, "a").reason


def test_victims_prefer_stuck_nodes():
    nodes, workers = pool({"a": "idle", "b": "idle"})
    p = run(snap(nodes, workers), settings(max_concurrent_drains=1),
            estimator=lambda w, now: VictimCost(stuck=w.name == "b", drain_waste=1e9 if w.name == "b" else 0))
    assert acts(p) == {"b": "drain"}


def test_max_destroys_per_hour():
    nodes, workers = pool({"a": "down", "b": "down", "c": "down"})
    s = snap(nodes, workers, recent_destroys=(NOW - 4000, NOW - 100))
    p = run(s, settings(max_destroys_per_hour=2))
    assert acts(p) == {"a": "destroy"}
    assert {why(p, n).blocked_by for n in "bc"} == {"budget"}


def test_mass_down_freezes_drains_and_destroys_but_not_boots():
    states = {f"n{i}": "down*" for i in range(6)} | {"ok": "idle"}
    s = snap(*pool(states), demand=[Demand(cpus=4, count=1)])
    p = run(s, settings(down_freeze_count=3, down_freeze_fraction=0.5))
    assert p.items == ()
    assert "scheduler outage" in p.frozen
    assert why(p, "n0").blocked_by == "frozen"
    assert why(p, "ok").blocked_by in ("frozen", "demand")
    # below the count threshold nothing freezes
    p = run(snap(*pool({"n0": "down", "n1": "down"})), settings(down_freeze_count=3))
    assert acts(p) == {"n0": "destroy", "n1": "destroy"}


def test_our_drained_nodes_do_not_count_towards_the_mass_down_freeze():
    nodes, workers = pool({f"n{i}": "drain" for i in range(6)})
    fl = [InFlight(node=f"n{i}", action="drain", since=NOW - 900) for i in range(6)]
    p = run(snap(nodes, workers, in_flight=fl), settings(down_freeze_count=3))
    assert len(p.items) == 6 and p.frozen is None


def test_plan_is_deterministic_under_input_order():
    rng = random.Random(7)
    states = {f"n{i:02d}": rng.choice(["idle", "alloc", "mix", "down", "drain", "idle*"]) for i in range(40)}
    nodes, workers = pool(states)
    nodes += [node(f"u{i}", age=rng.choice([60, 5000])) for i in range(5)]
    demand = [Demand(cpus=rng.randint(1, 8), ram_mb=1000, count=rng.randint(1, 5)) for _ in range(6)]
    a = run(snap(nodes, workers, demand), settings(max_concurrent_drains=3, max_nodes=50))
    rng.shuffle(nodes), rng.shuffle(workers), rng.shuffle(demand)
    b = run(snap(nodes, workers, demand), settings(max_concurrent_drains=3, max_nodes=50))
    assert a == b


@pytest.mark.parametrize("state", ["idle#", "boot", "pow_up"])
def test_a_node_starting_up_is_not_shut_down_in_boot_grace(state):
    p = run(snap([node("s", age=30)], [worker("s", state, registered_at=NOW - 20)]))
    assert p.items == ()


def test_unpaired_explanation_says_why_pairing_failed():
    nodes = [node("i-1", age=5000)]
    workers = [worker("i-1", registered_at=NOW - 9000)]  # record older than the VM
    p = run(snap(nodes, workers))
    e = why(p, "i-1")
    assert e.tuple.worker_state == "unpaired" and "recycled" in e.reason
    assert acts(p) == {"i-1": "destroy"}


def test_a_drain_whose_worker_vanished_is_not_cancelled_for_demand():
    # our drain under way, the worker is gone from the scheduler: no capacity to win back
    s = snap([node("d")], [], demand=[Demand(cpus=1, count=1)],
             in_flight=[InFlight(node="d", action="drain", since=NOW - 600)])
    p = run(s)
    assert acts(p) == {"d": "destroy"}
    assert [(b.size, b.count) for b in p.boots] == [("small", 1)]


def test_our_drain_never_turns_a_late_ad_into_a_destroy():
    """Was (crash sweep with faults, seed 3): a node under our drain whose ad went missing was
    destroyed at once as "START_SHUTDOWN during our drain", with the 4 jobs it ran. While this
    process has not confirmed the absence (Snapshot.unconfirmed), nothing is destroyed."""
    import policy_matrix
    from nodemanager.core import plan
    from nodemanager.model import CloudNode, InFlight, Size, Snapshot
    from nodemanager.configuration.settings import CoreSettings
    now = 10_000.0
    node = CloudNode(id="i-1", name="c-small-1", size="small", launched_at=now - 7200)
    snap = Snapshot(now=now, polled_at={"cloud": now, "scheduler": now}, cloud_nodes=(node,),
                    in_flight=(InFlight(node="i-1", action="drain", since=now - 300, request_id="1"),),
                    unconfirmed=frozenset({"i-1"}))
    settings = CoreSettings(sizes=(Size("small", 4, 16000),))
    result = plan(snap, settings, policy_matrix.load_default())
    assert result.items == ()
    assert result.nodes[0].blocked_by == "unconfirmed"
    confirmed = plan(Snapshot(**{**snap.__dict__, "unconfirmed": frozenset()}), settings,
                     policy_matrix.load_default())
    assert [i.kind.value for i in confirmed.items] == ["destroy"]


def test_an_unconfirmed_vm_past_boot_grace_still_serves_the_demand():
    """After a restart, a VM past its boot grace without a worker yet is unconfirmed (it may
    still join): it counts for the queued job as a booting VM does, so no replacement is bought
    beside it; once its absence is confirmed it is shut down and the job gets a new VM."""
    import policy_matrix
    from nodemanager.core import plan
    from nodemanager.model import CloudNode, Demand, Size, Snapshot
    from nodemanager.configuration.settings import CoreSettings
    now = 10_000.0
    node = CloudNode(id="i-1", name="c-small-1", size="small", launched_at=now - 3600)
    snap = Snapshot(now=now, polled_at={"cloud": now, "scheduler": now}, cloud_nodes=(node,),
                    demand=(Demand(cpus=2, ram_mb=1000, count=1, oldest_submit=now - 60),),
                    unconfirmed=frozenset({"i-1"}))
    settings = CoreSettings(sizes=(Size("small", 4, 16000),), boot_grace=900.0)
    result = plan(snap, settings, policy_matrix.load_default())
    assert result.nodes[0].blocked_by == "unconfirmed"
    assert result.boots == () and result.items == ()
    confirmed = plan(Snapshot(**{**snap.__dict__, "unconfirmed": frozenset()}), settings,
                     policy_matrix.load_default())
    assert [i.kind.value for i in confirmed.items] == ["destroy"]
    assert sum(b.count for b in confirmed.boots) == 1
