"""Placement with several sizes: each demand item only on
sizes that can run it (GPUs, the scheduler's eligible sizes), idle capacity that fits first, the
mix of sizes that costs least, each size's own min/max_nodes, and demand no size can run."""

import policy_matrix

from nodemanager.core import plan
from nodemanager.model import Size
from tests.core_world import Demand, node, settings, snap, worker

MATRIX = policy_matrix.load_default()
CPU8 = Size(name="cpu8", cores=8, ram_mb=32000, price=0.40, min_charge=0)
GPU8 = Size(name="gpu8", cores=8, ram_mb=32000, price=1.20, min_charge=0, gpus=1, gpu_type="t4")
# 2/4/8/16 cores at a near-linear price per core, the larger slightly cheaper (as clouds price them)
LADDER = tuple(Size(name=f"c{c}", cores=c, ram_mb=4000 * c, price=p, min_charge=0)
               for c, p in ((2, 0.10), (4, 0.19), (8, 0.37), (16, 0.72)))


def boots(p):
    return {b.size: b.count for b in p.boots}


def run(demand, sizes, nodes=(), workers=(), **kw):
    return plan(snap(nodes, workers, demand=demand), settings(sizes=sizes, **kw), MATRIX)


def test_a_gpu_job_boots_the_gpu_size_and_cpu_jobs_the_cheap_one():
    assert boots(run([Demand(cpus=1, ram_mb=1000, count=3)], (CPU8, GPU8))) == {"cpu8": 1}
    # 4-core jobs: one fits beside the GPU job on the new GPU node, two need a cheap node
    p = run([Demand(cpus=1, ram_mb=1000, count=1, gpus=1), Demand(cpus=4, ram_mb=1000, count=3)],
            (CPU8, GPU8))
    assert boots(p) == {"gpu8": 1, "cpu8": 1}
    assert "1 gpus" in next(b.reason for b in p.boots if b.size == "gpu8")


def test_an_idle_cpu_node_is_no_capacity_for_a_gpu_job_but_an_idle_gpu_node_is():
    idle_cpu = ([node("cpu-1", "cpu8")], [worker("cpu-1", cpus=8, ram_mb=30000, idle_for=10)])
    p = run([Demand(cpus=1, ram_mb=1000, count=1, gpus=1)], (CPU8, GPU8), *idle_cpu)
    assert boots(p) == {"gpu8": 1}
    idle_gpu = ([node("gpu-1", "gpu8")], [worker("gpu-1", cpus=8, ram_mb=30000, idle_for=10)])
    p = run([Demand(cpus=1, ram_mb=1000, count=2, gpus=1)], (CPU8, GPU8), *idle_gpu)
    assert boots(p) == {"gpu8": 1}  # one GPU job on the idle GPU node, one GPU per node


def test_the_schedulers_eligible_sizes_bind_placement_and_boots():
    idle_cpu = ([node("cpu-1", "cpu8")], [worker("cpu-1", cpus=8, ram_mb=30000, idle_for=10)])
    p = run([Demand(cpus=1, ram_mb=1000, count=2, sizes=frozenset({"gpu8"}))], (CPU8, GPU8), *idle_cpu)
    assert boots(p) == {"gpu8": 1}


def test_the_cheapest_mix_of_sizes_serves_the_demand_and_few_small_jobs_never_boot_a_big_vm():
    assert boots(run([Demand(cpus=1, ram_mb=1000, count=3)], LADDER)) == {"c4": 1}
    assert boots(run([Demand(cpus=1, ram_mb=1000, count=1)], LADDER)) == {"c2": 1}
    # 19 one-core jobs: a 16 plus a 4 (0.91/h), not five 4s (0.95/h) nor two 16s (1.44/h)
    assert boots(run([Demand(cpus=1, ram_mb=1000, count=19)], LADDER)) == {"c16": 1, "c4": 1}


def test_demand_no_size_can_run_is_never_booted_for_and_says_why():
    why = "no size offers OpSys == \"WINDOWS\""
    p = run([Demand(cpus=1, ram_mb=1000, count=4, requirements='OpSys == "WINDOWS"',
                    sizes=frozenset(), unmatched=why)], (CPU8, GPU8))
    assert p.boots == ()
    (u,) = p.unmet
    assert (u.reason, u.jobs) == ("unmatched", 4)
    assert why in u.text and 'requirements OpSys == "WINDOWS"' in u.what


def test_a_sizes_own_max_nodes_caps_it_and_other_sizes_serve_the_rest():
    capped = Size(name="cpu8", cores=8, ram_mb=32000, price=0.40, min_charge=0, max_nodes=1)
    dear = Size(name="cpu8b", cores=8, ram_mb=32000, price=0.50, min_charge=0)
    p = run([Demand(cpus=8, ram_mb=1000, count=3)], (capped, dear), [node("c-1", "cpu8", age=60)])
    assert boots(p) == {"cpu8b": 2}  # cpu8 already has its one node (booting)
    gpu_one = Size(name="gpu8", cores=8, ram_mb=32000, price=1.2, min_charge=0, gpus=1, max_nodes=1)
    p = run([Demand(cpus=1, ram_mb=1000, count=3, gpus=1)], (CPU8, gpu_one))
    assert boots(p) == {"gpu8": 1}
    assert [(u.reason, u.jobs) for u in p.unmet] == [("max_nodes", 2)]
    assert "[Size gpu8] max_nodes 1 reached" in p.unmet[0].text


def test_a_sizes_own_min_nodes_is_kept_up():
    gpu_min = Size(name="gpu8", cores=8, ram_mb=32000, price=1.2, min_charge=0, gpus=1, min_nodes=2)
    p = run([], (CPU8, gpu_min), [node("g-1", "gpu8", age=60)])
    assert boots(p) == {"gpu8": 1}
    assert "[Size gpu8] min_nodes 2 (1 up)" in p.boots[0].reason


def test_of_several_idle_sizes_the_one_that_wastes_most_is_given_back_first():
    nodes = [node("a-small", "c2"), node("b-big", "c16")]
    workers = [worker("a-small", cpus=2, ram_mb=7000), worker("b-big", cpus=16, ram_mb=60000)]
    p = run([], LADDER, nodes, workers, min_nodes=1)
    assert {i.node_id: i.kind.value for i in p.items} == {"b-big": "drain"}


def test_unmatched_demand_is_one_log_line_per_signature_and_a_metric(caplog):
    import logging

    from prometheus_client import generate_latest

    from nodemanager.console.decision_log import DecisionLog
    from nodemanager.console.metrics import Metrics
    from nodemanager.model import CycleReport
    from tests.core_world import snap as make_snap

    caplog.set_level(logging.INFO, "nodemanager.decisions")
    demand = [Demand(cpus=1, ram_mb=1000, count=3, gpus=2, sizes=frozenset(),
                     unmatched="no size has 2 GPU(s) (most: 1)")]
    log = DecisionLog()
    for _ in range(3):  # three cycles, the same jobs waiting
        p = run(demand, (CPU8, GPU8))
        log.decisions(p, False, None, None)
    lines = [r.getMessage() for r in caplog.records if "never booted for" in r.getMessage()]
    assert lines == ["demand never booted for: 3 job(s) of 1 cpus, 1000 MB, 2 gpus: no size can "
                     "run them: no size has 2 GPU(s) (most: 1)"]
    metrics = Metrics(clock=lambda: p.now)
    metrics.observe(CycleReport(snapshot=make_snap(demand=demand), plan=p))
    text = generate_latest(metrics.registry).decode()
    assert 'nodemanager_unmatched_jobs{signature="1 cpus, 1000 MB, 2 gpus"} 3.0' in text


def test_a_busy_node_whose_worker_does_not_say_its_cores_offers_its_sizes_free_ones():
    # cpus 0 (not reported): its 8-core size counts, 2 busy leaves 6 free for the queued job
    p = run([Demand(cpus=4, ram_mb=1000, count=1)], (CPU8,), [node("a", "cpu8")],
            [worker("a", "mix", cpus=0, cpus_busy=2)])
    assert boots(p) == {} and not p.unmet


def test_full_busy_nodes_offer_nothing_and_a_partly_busy_one_its_free_cores():
    nodes = [node("full", "cpu8"), node("part", "cpu8")]
    workers = [worker("full", "alloc", cpus=8, cpus_busy=8), worker("part", "mix", cpus=8, cpus_busy=4)]
    assert boots(run([Demand(cpus=4, ram_mb=1000, count=1)], (CPU8,), nodes, workers)) == {}
    assert boots(run([Demand(cpus=4, ram_mb=1000, count=2)], (CPU8,), nodes, workers)) == {"cpu8": 1}
