"""The reuse of last cycle's work (cycle/plan_reuse.py): a plan with it equals the plan without
it, cycle after cycle of a changing world, on the very same records (the simulated pool) and on
new equal ones (real adapters); and each input of a node's facts, changed alone, changes the plan."""

from __future__ import annotations

import os
import random
from dataclasses import replace

import policy_matrix
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from nodemanager.core import plan
from nodemanager.core.pair import pair
from nodemanager.cycle.plan_reuse import ReusingStages
from nodemanager.model import CloudNode, Demand, InFlight, Plan, Snapshot, Worker
from tests.core_world import NOW, node, settings, worker
from tests.test_core_properties import matrix_for, TUPLES

MATRIX = policy_matrix.load_default()
ADMIN = "admin: bad dimm"
STEP_BACK = 0.03   # the chance a cycle's clock steps back instead of forward
# the strength the reuse was held to: 350 random worlds of 40 cycles each
# (benchmarks/plan_reuse_equivalence.py runs it; the properties here are a slice of it)
FULL_SEEDS, FULL_CYCLES = 350, 40


def at(now: float, nodes=(), workers=(), in_flight=(), **kw) -> Snapshot:
    return Snapshot(now=now, polled_at={"cloud": now - 5, "scheduler": now - 5}, cloud_nodes=tuple(nodes),
                    workers=tuple(workers), in_flight=tuple(in_flight), **kw)


def both(s: Snapshot, st_, memo: ReusingStages, matrix=MATRIX) -> Plan:
    """The plan with ``memo``, after checking it equals the plan made afresh."""
    with_memo = plan(s, st_, matrix, stages=memo)
    assert with_memo == plan(s, st_, matrix)
    return with_memo


def explained(p: Plan, node_id: str):
    return next(e for e in p.nodes if e.node_id == node_id)


def busy(name: str, **kw) -> Worker:
    return worker(name, "alloc", **kw)


# -- each input, changed alone, reaches the plan ------------------------------------------------

def test_a_busy_nodes_facts_and_explanation_are_reused_while_nothing_changes():
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a"), node("b")], [busy("a"), busy("b")]
    first = both(at(NOW, nodes, workers), st_, memo)
    again = both(at(NOW + 60, nodes, workers), st_, memo)
    assert all(x is y for x, y in zip(first.nodes, again.nodes))


def test_a_busy_node_under_max_lifetime_says_when_it_ends_and_follows_a_reload():
    memo, st_ = ReusingStages(), settings(max_lifetime=86400.0)
    nodes, workers = [node("a"), node("b", age=80000.0)], [busy("a"), busy("b")]
    both(at(NOW, nodes, workers), st_, memo)
    again = both(at(NOW + 60, nodes, workers), st_, memo)
    assert explained(again, "b").next_change_what == "max_lifetime ends"
    later = both(at(NOW + 60, nodes, workers), replace(st_, max_lifetime=90000.0), memo)
    assert explained(later, "b").next_change == NOW - 80000.0 + 90000.0


def test_a_changed_worker_record_is_classified_again():
    memo, st_ = ReusingStages(), settings()
    nodes = [node("a")]
    both(at(NOW, nodes, [busy("a")]), st_, memo)
    p = both(at(NOW + 60, nodes, [worker("a", "down")]), st_, memo)
    assert explained(p, "a").tuple.worker_state == "down"


def test_the_pairing_is_kept_while_workers_pair_alike_and_made_again_when_one_does_not():
    """The same nodes with workers that pair alike (a job started: new records, same name and
    cloud id) keep last cycle's pairs, with the new workers in them; a worker whose record is
    now older than its VM (a recycled name), or that advertises another cloud id, is paired again."""
    memo, st_ = ReusingStages(), settings()
    nodes = [node("a"), node("b"), node("c")]
    workers = [busy("a"), worker("b"), worker("c", cloud_id="c")]
    both(at(NOW, nodes, workers), st_, memo)
    started = [replace(workers[0], cpus_busy=1), workers[1], replace(workers[2], cpus_busy=2)]
    p = memo.pair(tuple(nodes), tuple(started))
    assert p.paired["a"] is started[0] and p.paired["c"] is started[2]
    both(at(NOW + 60, nodes, started), st_, memo)
    recycled = [started[0], replace(started[1], registered_at=NOW - 8000), started[2]]
    p = both(at(NOW + 120, nodes, recycled), st_, memo)
    assert explained(p, "b").tuple.worker_state == "unpaired"
    moved = [started[0], started[1], replace(started[2], cloud_id="elsewhere")]
    p = both(at(NOW + 180, nodes, moved), st_, memo)
    assert explained(p, "c").tuple.worker_state == "unpaired"


def test_a_changed_cloud_record_is_seen():
    memo, st_ = ReusingStages(), settings()
    workers = [busy("a")]
    both(at(NOW, [node("a")], workers), st_, memo)
    p = both(at(NOW + 60, [node("a", state="terminated")], workers), st_, memo)
    assert explained(p, "a").gone


def test_a_settings_reload_recomputes_every_node():
    memo = ReusingStages()
    nodes = [node("a", age=300)]
    p = both(at(NOW, nodes), settings(boot_grace=600.0), memo)
    assert explained(p, "a").tuple.boot_grace == "boot wait"
    p = both(at(NOW + 1, nodes), settings(boot_grace=200.0), memo)
    assert explained(p, "a").tuple.boot_grace == "boot exceeded"


def test_a_matrix_reload_recomputes_every_node():
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a")], [busy("a")]
    both(at(NOW, nodes, workers), st_, memo)
    drain_all = matrix_for(tuple("START_DRAIN" for _ in TUPLES))
    p = both(at(NOW + 60, nodes, workers), st_, memo, drain_all)
    assert explained(p, "a").rule.startswith("random.matrix")


def test_a_new_hold_is_seen():
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a")], [busy("a")]
    both(at(NOW, nodes, workers), st_, memo)
    p = both(at(NOW + 60, nodes, workers, held=frozenset({"a"})), st_, memo)
    assert explained(p, "a").blocked_by == "held"


def test_an_action_under_way_now_or_before_is_seen():
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a")], [busy("a")]
    both(at(NOW, nodes, workers), st_, memo)
    drain = InFlight(node="a", action="drain", since=NOW, request_id="r1")
    p = both(at(NOW + 60, nodes, workers, [drain]), st_, memo)
    assert explained(p, "a").our_drain_since == NOW
    p = both(at(NOW + 120, nodes, workers), st_, memo)
    assert explained(p, "a").our_drain_since is None


def test_time_passing_the_next_change_is_seen():
    memo, st_ = ReusingStages(), settings(boot_grace=600.0)
    nodes = [node("a", age=500)]
    p = both(at(NOW, nodes), st_, memo)
    assert explained(p, "a").next_change == NOW + 100
    assert explained(both(at(NOW + 99, nodes), st_, memo), "a").tuple.boot_grace == "boot wait"
    assert explained(both(at(NOW + 100, nodes), st_, memo), "a").tuple.boot_grace == "boot exceeded"


def test_a_billing_window_opening_is_seen():
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a", "hourly", age=3000)], [busy("a")]
    p = both(at(NOW, nodes, workers), st_, memo)
    opens = explained(p, "a").next_change
    assert explained(p, "a").tuple.window == "closed" and opens == NOW + 300
    assert explained(both(at(opens + 1, nodes, workers), st_, memo), "a").tuple.window == "open"


def test_a_clock_stepped_back_plans_every_node_afresh():
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a", "hourly", age=3000)], [busy("a")]
    assert explained(both(at(NOW + 400, nodes, workers), st_, memo), "a").tuple.window == "open"
    assert explained(both(at(NOW, nodes, workers), st_, memo), "a").tuple.window == "closed"


def test_a_worker_silent_past_node_stale_after_is_lost_with_the_same_record():
    memo, st_ = ReusingStages(), settings(node_stale_after=600.0)
    nodes, workers = [node("a")], [busy("a")]  # last heard NOW - 10
    assert not explained(both(at(NOW, nodes, workers), st_, memo), "a").lost
    assert not explained(both(at(NOW + 590, nodes, workers), st_, memo), "a").lost
    p = both(at(NOW + 591, nodes, workers), st_, memo)
    assert explained(p, "a").lost and explained(p, "a").tuple.worker_state == "down"
    later = both(at(NOW + 700, nodes, workers), st_, memo)
    assert "not heard from for 710s" in explained(later, "a").reason


def test_a_changed_pairing_reason_of_an_unpaired_node_is_seen():
    memo, st_ = ReusingStages(), settings()
    nodes = [node("a", age=60)]
    p = both(at(NOW, nodes), st_, memo)
    assert "no scheduler worker advertises" in explained(p, "a").reason
    twins = [worker("a", cloud_id="a"), worker("a2", cloud_id="a")]
    p = both(at(NOW + 1, nodes, twins), st_, memo)
    assert "ambiguous" in explained(p, "a").reason


def test_the_end_of_reclaim_foreign_after_is_seen_and_its_words_follow_the_time():
    memo, st_ = ReusingStages(), settings(reclaim_foreign_after=3600.0, node_stale_after=10 ** 6)
    nodes = [node("a")]
    workers = [worker("a", "drain", draining=True, drain_reason=ADMIN, drain_since=NOW - 600)]
    p = both(at(NOW, nodes, workers), st_, memo)
    assert explained(p, "a").tuple.worker_state == "idle" and explained(p, "a").next_change == NOW + 3000
    p = both(at(NOW + 3001, nodes, workers), st_, memo)
    assert "drained by someone else for 3601s" in explained(p, "a").reason
    p = both(at(NOW + 3002, nodes, workers), st_, memo)
    assert "drained by someone else for 3602s" in explained(p, "a").reason


def test_an_idle_nodes_words_follow_the_time():
    memo, st_ = ReusingStages(), settings(idle_grace=3000.0)
    nodes, workers = [node("a")], [worker("a", idle_for=100)]
    both(at(NOW, nodes, workers), st_, memo)
    assert "idle for 160s" in explained(both(at(NOW + 60, nodes, workers), st_, memo), "a").reason


def test_a_reclaim_notices_words_follow_the_time():
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a", reclaim_at=NOW + 120)], [busy("a")]
    both(at(NOW, nodes, workers), st_, memo)
    assert "(in 1m" in explained(both(at(NOW + 60, nodes, workers), st_, memo), "a").reason


def test_a_reason_claiming_an_undecided_node_on_the_same_facts_is_explained():
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a")], [busy("a")]
    both(at(NOW, nodes, workers), st_, memo)
    p = both(at(NOW + 60, nodes, workers, forced_drains=frozenset({"a"})), st_, memo)
    assert "operator asked for a drain" in explained(p, "a").reason


# -- a changing world: the memo never changes a plan ---------------------------------------------

SIZES = ("small", "large", "hourly")
STATES = ("alloc",) * 4 + ("mix",) * 2 + ("idle", "drain", "drng", "down", "down*", "idle*", "comp")


class World:
    """Cloud nodes and workers that keep their record objects until an event replaces them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.now = NOW
        self.nodes: dict[str, CloudNode] = {}
        self.workers: dict[str, list[Worker]] = {}
        self.flights: dict[str, InFlight] = {}
        self.held: frozenset[str] = frozenset()
        self.forced: frozenset[str] = frozenset()
        self.settings = settings(reclaim_foreign_after=1800.0)
        self.matrix = MATRIX
        self.seq = 0

    def worker(self, name: str) -> Worker:
        r = self.rng
        state = r.choice(STATES)
        kw: dict = dict(last_heard=self.now - r.choice((0, 10, 500, 900)), idle_for=r.choice((10, 250, 2000)))
        if name in self.nodes:  # registered after its VM's launch, else pairing refuses it (a recycled name)
            kw.update(registered_at=self.nodes[name].launched_at + r.choice((20, 120)))
        if state in ("drain", "drng") and r.random() < 0.6:
            kw.update(draining=True, drain_reason=ADMIN, drain_since=self.now - r.choice((0, 600, 3000)))
        return worker(name, state, **kw)

    def step(self) -> None:
        r, ids = self.rng, sorted(self.nodes)
        for _ in range(r.randint(0, 3)):
            event = r.random()
            if event < 0.15 or not ids:
                self.seq += 1
                nid = f"n{self.seq:03d}"
                self.nodes[nid] = replace(node(nid, r.choice(SIZES)),
                                          launched_at=self.now - r.choice((30, 400, 3000, 7200)))
                if r.random() < 0.7:
                    self.workers[nid] = [self.worker(nid)]
                ids = sorted(self.nodes)
                continue
            nid = r.choice(ids)
            if event < 0.45:
                self.workers[nid] = [self.worker(nid)]                   # a new record of the worker
            elif event < 0.5:
                self.workers.pop(nid, None)                              # the worker leaves
            elif event < 0.53:
                self.workers.setdefault(nid, []).append(self.worker(nid))  # a twin: ambiguous
            elif event < 0.58:
                self.nodes.pop(nid)
                self.workers.pop(nid, None)
                self.flights.pop(nid, None)
                ids = sorted(self.nodes)
            elif event < 0.63:
                n = self.nodes[nid]
                self.nodes[nid] = replace(n, state=r.choice(("running", "terminated")),
                                          reclaim_at=r.choice((None, self.now + 120)))
            elif event < 0.73:
                if nid in self.flights:
                    del self.flights[nid]
                else:
                    self.flights[nid] = InFlight(node=nid, action=r.choice(("drain", "destroy", "cancel_drain")),
                                                 since=self.now, request_id=f"r{nid}")
            elif event < 0.75:
                self.held = frozenset(r.sample(ids, min(len(ids), r.randint(0, 2))))
            elif event < 0.77:
                self.forced = frozenset(r.sample(ids, min(len(ids), r.randint(0, 1))))
            elif event < 0.79:
                self.settings = replace(self.settings, boot_grace=r.choice((300.0, 600.0)),
                                        idle_grace=r.choice((200.0, 300.0)))
            elif event < 0.80:
                self.matrix = r.choice((MATRIX, matrix_for(tuple(r.choice(("None", "START_DRAIN", "START_SHUTDOWN"))
                                                                 for _ in TUPLES))))
        # time passes: often a little, sometimes across boot grace, billing windows, staleness;
        # now and then the clock steps back (NTP, a VM resumed)
        if r.random() < STEP_BACK:
            self.now -= r.choice((1, 30, 300, 1800))
        else:
            self.now += r.choice((1, 5, 30, 60, 60, 120, 299, 300, 301, 600, 1800))
        for nid, ws in self.workers.items():  # most workers report again before they are lost
            if r.random() < 0.8:
                self.workers[nid] = [replace(w, last_heard=self.now - 10) if self.now - w.last_heard > 400 else w
                                     for w in ws]

    def snapshot(self) -> Snapshot:
        demand = (Demand(cpus=4, count=self.rng.randint(0, 3)),)
        return at(self.now, self.nodes.values(), [w for ws in self.workers.values() for w in ws],
                  self.flights.values(), held=self.held, forced_drains=self.forced, demand=demand)


def fresh(s: Snapshot) -> Snapshot:
    """``s`` with every cloud node and worker a new equal record, as a real adapter polls them."""
    return replace(s, cloud_nodes=tuple(replace(n) for n in s.cloud_nodes),
                   workers=tuple(replace(w) for w in s.workers))


def plans_agree(world: World, cycles: int = 60, renew: bool = False) -> ReusingStages:
    """Each cycle of ``world`` (``renew``: its records copied anew every cycle), the plan with one
    reuse kept throughout equals the plan without."""
    memo = ReusingStages()
    for _ in range(cycles):
        world.step()
        s = fresh(world.snapshot()) if renew else world.snapshot()
        assert plan(s, world.settings, world.matrix, stages=memo) == plan(s, world.settings, world.matrix)
    return memo


@hsettings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32))
def test_a_plan_with_reuse_equals_the_plan_without_it_in_a_changing_world(seed):
    plans_agree(World(random.Random(seed)))


@hsettings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32))
def test_a_plan_with_reuse_equals_the_plan_without_it_on_fresh_records(seed):
    plans_agree(World(random.Random(seed)), renew=True)


def test_fresh_equal_records_are_reused_and_handed_on_in_place_of_the_last_ones():
    """A real adapter's records are new objects every poll: equal ones reuse last cycle's work
    (most of the changing world's nodes), and the facts then hold this cycle's records, so last
    cycle's are freed."""
    memo = plans_agree(World(random.Random(18)), cycles=200, renew=True)
    assert memo.reused > 1000
    memo, st_ = ReusingStages(), settings()
    nodes, workers = [node("a"), node("b")], [busy("a"), busy("b")]
    first = both(at(NOW, nodes, workers), st_, memo)
    s = fresh(at(NOW + 60, nodes, workers))
    facts = memo.facts(s, st_, MATRIX, {z.name: z for z in st_.sizes}, pair(s.cloud_nodes, s.workers))
    assert memo.reused == 2
    assert [f.node for f in facts] == list(s.cloud_nodes) and all(
        f.node is n and f.worker is w for f, n, w in zip(facts, s.cloud_nodes, s.workers))
    again = both(fresh(at(NOW + 120, nodes, workers)), st_, memo)
    assert all(x is y for x, y in zip(first.nodes, again.nodes))  # explanations kept, too


COST = policy_matrix.load(os.path.join(os.path.dirname(policy_matrix.default_path()), "cost.matrix"))


class CostWorld(World):
    """The cost profile's world: consolidation relabels busy nodes ``underused`` whenever no job
    is queued, ``max_lifetime`` sometimes ``expired``; jobs with known ends, so relabels repeat."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.settings = replace(self.settings, consolidate=True, consolidate_margin=rng.choice((0, 4)),
                                max_lifetime=rng.choice((0.0, 5000.0)))
        self.matrix = COST

    def worker(self, name: str) -> Worker:
        r = self.rng
        if r.random() < 0.5:
            return super().worker(name)
        busy_ = r.randint(1, 3)
        return worker(name, "mix", cpus=4, cpus_busy=busy_, running_jobs=busy_,
                      last_heard=self.now - r.choice((0, 10)), registered_at=self.now,
                      job_end_times=tuple(self.now + r.choice((600, 3600, 90000)) for _ in range(busy_)))

    def step(self) -> None:
        matrix = self.matrix
        super().step()
        self.matrix = matrix  # the cost matrix knows underused and expired

    def snapshot(self) -> Snapshot:
        s = super().snapshot()
        return replace(s, demand=(Demand(cpus=4, count=self.rng.choice((0, 0, 0, 1))),))


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32))
def test_a_plan_with_reuse_equals_the_plan_without_it_under_consolidation(seed):
    plans_agree(CostWorld(random.Random(seed)))


def test_the_changing_world_reuses_facts_and_explanations():
    """The property above would hold for reuse that never hits: these worlds do reuse (in the
    cost world most busy nodes are relabelled or drained, whose explanations are made afresh)."""
    for world, share in ((World(random.Random(18)), 10), (CostWorld(random.Random(18)), 1000)):
        memo = ReusingStages()
        explanations = total = 0
        before: dict[str, object] = {}
        for _ in range(200):
            world.step()
            s = world.snapshot()
            p = plan(s, world.settings, world.matrix, stages=memo)
            assert p == plan(s, world.settings, world.matrix)
            explanations += sum(1 for e in p.nodes if before.get(e.node_id) is e)
            total += len(p.nodes)
            before = {e.node_id: e for e in p.nodes}
        assert memo.reused > total // 3 and explanations > total // share, (type(world), memo.reused, explanations)
