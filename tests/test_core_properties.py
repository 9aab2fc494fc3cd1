"""Property tests: for random snapshots, settings and matrices the plan is safe and repeatable.

- a node with running jobs is destroyed only if the matrix says START_SHUTDOWN for its tuple;
- no boot takes the pool past max_nodes, the quota or max_total_price;
- drains and destroys stay within their budgets, and min_nodes is kept;
- nothing is done on stale input;
- the same input (in any order) gives the same plan.
"""

import random

import policy_matrix
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from policy_matrix.vocabulary import DEFAULT_VOCABULARY

from nodemanager.core import plan
from nodemanager.model import (CloudNode, Demand, InFlight, ItemKind, Size, Snapshot, Worker)
from nodemanager.scheduler import classified
from nodemanager.configuration.settings import CoreSettings

NOW = 2_000_000.0
SIZES = (Size("small", 4, 16000, 0.2, min_charge=60), Size("large", 16, 64000, 0.9),
         Size("hourly", 8, 32000, 0.5, billing_period=3600, shutdown_window=600),
         Size("arv", 2, 8000, 0.1, shutdown_windows=(54, 5, 1)))
SLURM = ["idle", "alloc", "mix", "comp", "drng", "maint", "drain", "down", "fail", "unk",
         "idle*", "alloc*", "idle~", "idle#", "idle$", "mix-", "boot", "weird"]
HTCONDOR = [("Unclaimed", "Idle", 0), ("Unclaimed", "Idle", 2), ("Drained", "Retiring", 1),
            ("Drained", "Idle", 0), ("Owner", "Idle", 0), ("Claimed", "Busy", 0)]
ACTIONS = ["None", "START_DRAIN", "START_SHUTDOWN"]
TUPLES = list(DEFAULT_VOCABULARY.all_tuples())
_MATRICES: dict[tuple, object] = {}
DEFAULT = policy_matrix.load_default()


def matrix_for(actions: tuple) -> object:
    m = _MATRICES.get(actions)
    if m is None:
        text = "".join(f"{t.worker_state} | {t.window} | {t.boot_grace} | {t.idle_grace} -> {a}\n"
                       for t, a in zip(TUPLES, actions))
        m = _MATRICES[actions] = policy_matrix.parse(text, "random.matrix")
    return m


matrices = st.one_of(
    st.just(None),
    st.tuples(*[st.sampled_from(ACTIONS)] * len(TUPLES)),
)


@st.composite
def worlds(draw):
    n = draw(st.integers(0, 25))
    nodes, workers, in_flight = [], [], []
    for i in range(n):
        nid = f"i-{i:03d}"
        size = draw(st.sampled_from([s.name for s in SIZES] + ["gone"]))
        age = draw(st.sampled_from([10, 200, 700, 3400, 3590, 3700, 7000, 86400]))
        nodes.append(CloudNode(id=nid, name=f"cn-{i}", size=size, launched_at=NOW - age))
        kind = draw(st.sampled_from(["none", "slurm", "htcondor"]))
        heard = NOW - draw(st.sampled_from([0, 30, 500, 700, 5000]))
        idle_for = draw(st.sampled_from([0, 100, 299, 301, 5000]))
        jobs = draw(st.integers(0, 3))
        if kind == "slurm":
            workers.append(classified(Worker(name=f"cn-{i}", scheduler="slurm", state=draw(st.sampled_from(SLURM)),
                                  last_heard=heard, state_since=NOW - idle_for, cpus=4,
                                  cpus_busy=min(jobs, 4), running_jobs=jobs,
                                  registered_at=NOW - min(age, 100))))
        elif kind == "htcondor":
            state, act, dslots = draw(st.sampled_from(HTCONDOR))
            ad = {"State": state, "Activity": act, "NumDynamicSlots": dslots,
                  "EnteredCurrentState": NOW - idle_for,
                  "ExpectedMachineGracefulDrainingBadput": draw(st.integers(0, 10**5)),
                  "ExpectedMachineGracefulDrainingCompletion": NOW + draw(st.integers(-100, 10**4))}
            workers.append(classified(Worker(name=f"cn-{i}", scheduler="htcondor", cloud_id=nid, ad=ad,
                                  state=f"{state}/{act}", last_heard=heard, cpus=8,
                                  running_jobs=dslots, cpus_busy=dslots)))
        fl = draw(st.sampled_from([None, None, None, "drain", "destroy", "cancel_drain"]))
        if fl:
            in_flight.append(InFlight(node=nid, action=fl, since=NOW - 100))
    for j in range(draw(st.integers(0, 3))):
        in_flight.append(InFlight(node=f"req-{j}", action="boot", since=NOW - 20,
                                  size=draw(st.sampled_from([s.name for s in SIZES]))))
    demand = draw(st.lists(st.builds(Demand, cpus=st.integers(1, 20), ram_mb=st.integers(0, 70000),
                                     count=st.integers(0, 40)), max_size=4))
    ids = [nd.id for nd in nodes]
    pick = st.frozensets(st.sampled_from(ids), max_size=3) if ids else st.just(frozenset())
    stale = draw(st.sampled_from([False, False, False, True]))
    snap = Snapshot(
        now=NOW, polled_at={"cloud": NOW - (400 if stale else 10), "scheduler": NOW - 10},
        cloud_nodes=tuple(nodes), workers=tuple(workers), demand=tuple(demand),
        in_flight=tuple(in_flight), held=draw(pick), forced_drains=draw(pick),
        quota=draw(st.sampled_from([None, 5, 30])),
        blocked_sizes=draw(st.frozensets(st.sampled_from([s.name for s in SIZES]), max_size=2)),
        recent_destroys=tuple(NOW - t for t in draw(st.lists(st.sampled_from([10, 3000, 4000]),
                                                                max_size=4))))
    cfg = CoreSettings(
        sizes=SIZES, min_nodes=draw(st.integers(0, 5)), max_nodes=draw(st.integers(0, 40)),
        max_total_price=draw(st.sampled_from([0.0, 2.0, 10.0])), boot_grace=600.0, idle_grace=300.0,
        node_stale_after=600.0, poll_stale_after=300.0,
        max_concurrent_drains=draw(st.integers(0, 6)), max_destroys_per_hour=draw(st.integers(0, 6)),
        down_freeze_count=draw(st.sampled_from([0, 3, 1000])),
        down_freeze_fraction=draw(st.sampled_from([0.3, 0.5, 1.0])))
    return snap, cfg, draw(matrices)


def unpack(world):
    snap, cfg, actions = world
    return snap, cfg, DEFAULT if actions is None else matrix_for(actions)


PROPS = hsettings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_nodes_with_running_jobs_are_destroyed_only_when_the_matrix_says_so(snap, cfg, matrix, p):
    workers = {w.name: w for w in snap.workers}
    by_id = {e.node_id: e for e in p.nodes}
    for item in p.items:
        if item.kind is not ItemKind.DESTROY:
            continue
        w = workers.get(item.worker) if item.worker else None
        if w is not None and (w.running_jobs > 0 or by_id[item.node_id].tuple.worker_state == "busy"):
            assert matrix.lookup(by_id[item.node_id].tuple).action.value == "START_SHUTDOWN", item


def check_boots_never_exceed_a_cap(snap, cfg, matrix, p):
    booted = sum(b.count for b in p.boots)
    if not booted:
        return
    sizes = {s.name: s for s in cfg.sizes}
    flying = [f for f in snap.in_flight if f.action == "boot"]
    total = len(snap.cloud_nodes) + len(flying) + booted
    assert total <= cfg.max_nodes
    if snap.quota is not None:
        assert total <= snap.quota
    if cfg.max_total_price > 0:
        price = sum(sizes[n.size].price for n in snap.cloud_nodes if n.size in sizes)
        price += sum(sizes[f.size].price for f in flying)
        price += sum(sizes[b.size].price * b.count for b in p.boots)
        assert price <= cfg.max_total_price + 1e-9
    assert not {b.size for b in p.boots} & snap.blocked_sizes


def check_budgets_and_min_nodes_hold(snap, cfg, matrix, p):
    kinds = {i.node_id: i.kind for i in p.items}
    if cfg.max_destroys_per_hour > 0:
        recent = sum(1 for t in snap.recent_destroys if NOW - t < 3600)
        assert sum(k is ItemKind.DESTROY for k in kinds.values()) <= max(cfg.max_destroys_per_hour - recent, 0)
    forced = {i.node_id for i in p.items if i.kind is ItemKind.DRAIN and "operator" in i.reason}
    listed = {n.id for n in snap.cloud_nodes}
    fl: dict[str, set] = {}
    for f in snap.in_flight:
        fl.setdefault(f.node, set()).add(f.action)
    draining = sum(1 for nid, acts in fl.items() if nid in listed and "drain" in acts
                   and not acts & {"cancel_drain", "destroy"} and nid not in kinds)
    drains = sum(1 for nid, k in kinds.items() if k is ItemKind.DRAIN and nid not in forced)
    assert drains <= max(cfg.max_concurrent_drains - draining - len(forced), 0)
    up = [e for e in p.nodes if (e.tuple.worker_state in ("idle", "busy") or (
        e.tuple.worker_state == "unpaired" and e.tuple.boot_grace == "boot wait"))
        and "drain" not in fl.get(e.node_id, ()) and "destroy" not in fl.get(e.node_id, ())]
    removed = sum(1 for e in up if e.action in (ItemKind.DRAIN, ItemKind.DESTROY) and e.node_id not in forced)
    forced_up = len(forced & {e.node_id for e in up})  # the operator's forced drains beat min_nodes
    if removed:
        assert len(up) - forced_up - removed >= min(cfg.min_nodes, len(up) - forced_up)


def check_nothing_is_done_on_stale_input(snap, cfg, matrix, p):
    if NOW - snap.polled_at["cloud"] > cfg.poll_stale_after:
        assert p.items == () and p.boots == () and "stale" in p.frozen


@hsettings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_plans_are_safe_within_caps_and_budgets_and_idle_on_stale_input(world):
    snap, cfg, matrix = unpack(world)
    p = plan(snap, cfg, matrix)
    check_nodes_with_running_jobs_are_destroyed_only_when_the_matrix_says_so(snap, cfg, matrix, p)
    check_boots_never_exceed_a_cap(snap, cfg, matrix, p)
    check_budgets_and_min_nodes_hold(snap, cfg, matrix, p)
    check_nothing_is_done_on_stale_input(snap, cfg, matrix, p)


@PROPS
@given(worlds(), st.randoms(use_true_random=False))
def test_plan_is_deterministic(world, rnd):
    snap, cfg, matrix = unpack(world)
    a = plan(snap, cfg, matrix)
    assert plan(snap, cfg, matrix) == a
    shuffled = [list(snap.cloud_nodes), list(snap.workers), list(snap.demand), list(snap.in_flight)]
    for xs in shuffled:
        rnd.shuffle(xs)
    other = Snapshot(now=snap.now, polled_at=snap.polled_at, cloud_nodes=tuple(shuffled[0]),
                     workers=tuple(shuffled[1]), demand=tuple(shuffled[2]), in_flight=tuple(shuffled[3]),
                     held=snap.held, forced_drains=snap.forced_drains, quota=snap.quota,
                     blocked_sizes=snap.blocked_sizes, recent_destroys=snap.recent_destroys)
    assert plan(other, cfg, matrix) == a


def test_random_matrix_helper_covers_every_tuple():
    actions = tuple(random.Random(1).choice(ACTIONS) for _ in TUPLES)
    m = matrix_for(actions)
    assert [m.lookup(t).action.value for t in TUPLES] == list(actions)
