"""SLURM pending jobs mapped to sizes: constraints, GRES, partitions,
--exclusive; the last tests run against a real slurmctld with node features and a GPU slurmd."""

from __future__ import annotations

import pytest

from nodemanager.model import Demand, Size
from nodemanager.scheduler.slurm import SlurmOptions, SlurmScheduler
from nodemanager.scheduler.slurm_demand import demand_from_jobs
from nodemanager.scheduler.slurm_json import parse_jobs
from nodemanager.scheduler.slurm_gres import gres_per_node, parse_gres
from nodemanager.scheduler.slurm_match import constraint_holds, parse_constraint
from tests.fixtures.slurm import SlurmCluster, started

SIZES = (
    Size("small", 2, 1000, price=0.1),
    Size("avx", 4, 8000, price=0.4, features=frozenset({"avx512", "fast"})),
    Size("gpu", 4, 16000, price=1.0, gpus=1, gpu_type="tesla", partitions=frozenset({"gpu"})),
)


@pytest.mark.parametrize("text, features, holds", [
    ("avx512", {"avx512"}, True),
    ("avx512&fast", {"avx512"}, False),
    ("avx512|gpu", {"gpu"}, True),
    ("a|b&c", {"a"}, True),              # & binds tighter than |
    ("(a|b)&c", {"a"}, False),
    ("[rack1|rack2]&ib", {"rack2", "ib"}, True),
    ("avx512*2", {"avx512"}, True),      # a node count asks for the feature
    ("!gpu&x", {"x"}, True),
    ("!gpu&x", {"x", "gpu"}, False),
])
def test_a_constraint_holds_for_the_nodes_whose_features_satisfy_it(text, features, holds):
    assert constraint_holds(parse_constraint(text), frozenset(features)) is holds


@pytest.mark.parametrize("text", ["", "a&", "(a|b", "a)b", "a&&b", "a,b;c"])
def test_a_broken_constraint_is_an_error_naming_it(text):
    with pytest.raises(ValueError, match="constraint"):
        parse_constraint(text)


@pytest.mark.parametrize("per_node, per_job, per_task, nodes, tasks, want", [
    ("gres:gpu:1", "", "", 1, 1, "gres:gpu:1"),              # --gres / --gpus-per-node as given
    ("", "gres:gpu:4", "", 2, 2, "gres:gpu:2"),              # --gpus=4 -N 2: two per node
    ("", "gres:gpu:tesla:3", "", 2, 2, "gres:gpu:tesla:2"),  # rounded up, the type kept
    ("", "", "gres:gpu:1", 1, 3, "gres:gpu:3"),              # --gpus-per-task=1 -n 3
    ("", "", "", 1, 1, ""),
])
def test_gpus_per_job_and_per_task_become_gpus_per_node(per_node, per_job, per_task, nodes, tasks, want):
    assert gres_per_node(per_node, per_job, per_task, nodes, tasks) == want


def test_gres_per_node_in_22_05_and_23_02_forms():
    assert parse_gres("gres:gpu:1") == (1, "", ())
    assert parse_gres("gres:gpu:tesla:2") == (2, "tesla", ())
    assert parse_gres("gres/gpu:a100:4") == (4, "a100", ())
    assert parse_gres("gres/gpu") == (1, "", ())
    assert parse_gres("gres:mps:100,gres:gpu:1") == (1, "", ("mps:100",))
    assert parse_gres("") == (0, "", ())


def pending(job_id: int, **fields) -> dict:
    rec = {"job_id": job_id, "job_state": "PENDING", "state_reason": "Resources", "partition": "debug",
           "cpus": 1, "node_count": 1, "memory_per_cpu": 100, "submit_time": 1000 + job_id,
           "features": "", "tres_per_node": "", "shared": None}
    rec.update(fields)
    return rec


def demand(*records: dict, sizes=SIZES) -> tuple[Demand, ...]:
    jobs, problems = parse_jobs({"jobs": list(records), "errors": []})
    assert problems == []
    return demand_from_jobs(jobs, sizes=sizes)


def test_pending_jobs_ask_for_the_sizes_their_constraint_gres_and_partition_allow():
    out = demand(pending(0, partition=""), pending(1), pending(2, features="avx512&fast"), pending(3, features="avx512"),
                 pending(4, partition="gpu", tres_per_node="gres:gpu:tesla:1"),
                 pending(5, partition="gpu"), pending(6, node_count=3, cpus=6, features="fast|gpu"))
    got = {(d.cpus, d.sizes, d.gpus): d.count for d in out}
    assert got == {
        (1, None, 0): 1,                          # asks nothing beyond cores and memory
        (1, frozenset({"small", "avx"}), 0): 1,  # partition debug: the sizes naming no partition
        (1, frozenset({"avx"}), 0): 2,           # two constraints, the same sizes: one item
        (1, frozenset({"gpu"}), 1): 1,           # gres gpu:tesla:1 in partition gpu
        (1, frozenset({"small", "avx", "gpu"}), 0): 1,  # partition gpu: gpu, and those naming none
        (2, frozenset({"avx"}), 0): 3,           # 3 nodes of 2 cores each
    }


def test_a_job_no_size_can_run_is_demand_for_no_size_with_the_reason():
    out = demand(pending(7, features="infiniband"), pending(8, tres_per_node="gres:gpu:a100:1"),
                 pending(9, tres_per_node="gres:gpu:2"), pending(10, tres_per_node="gres:mps:50"))
    why = sorted(d.unmatched.split(": ", 1)[1] for d in out)
    assert all(d.sizes == frozenset() for d in out)
    assert why == ["no size has 1 GPUs of type a100 per node", "no size has 2 GPUs per node",
                   "no size has mps:50 per node", "no size has the features infiniband"]
    assert out[0].unmatched.startswith("no size can run jobs like ")


def test_an_exclusive_job_takes_a_whole_node_of_the_smallest_size_that_can_run_it():
    out = demand(pending(11, shared="none", memory_per_cpu=None, memory_per_node=500),
                 pending(12, exclusive=["true"], features="fast"),  # the 23.02+ form
                 pending(13, shared="none"))
    assert {(d.cpus, d.ram_mb, d.sizes) for d in out} == {(2, 500, frozenset({"small"})), (2, 100, frozenset({"small"})),
                                                          (4, 100, frozenset({"avx"}))}
    # each boots a node of its own: all its cores are the job's
    import policy_matrix

    from nodemanager.core import plan
    from tests.core_world import settings, snap
    p = plan(snap(demand=out), settings(sizes=SIZES), policy_matrix.load_default())
    assert {b.size: b.count for b in p.boots} == {"small": 2, "avx": 1}


@pytest.mark.parametrize("reason", ["Dependency", "DependencyNeverSatisfied", "BeginTime", "JobHeldUser",
                                    "JobHeldAdmin", "AssocGrpCpuLimit", "QOSMaxJobsPerUserLimit",
                                    "JobArrayTaskLimit", "BadConstraints", "PartitionDown", "Licenses"])
def test_a_job_more_nodes_cannot_start_is_no_demand(reason):
    assert demand(pending(13, state_reason=reason, features="avx512")) == ()


def test_a_job_whose_features_no_node_up_has_is_demand_for_the_size_that_has_them():
    out = demand(pending(14, state_reason="Constraints", features="avx512"))
    assert [(d.count, d.sizes) for d in out] == [(1, frozenset({"avx"}))]


def test_without_sizes_the_demand_is_as_before():
    out = demand(pending(1, features="avx512"), pending(2, tres_per_node="gres:gpu:1"), sizes=())
    assert out == (Demand(cpus=1, ram_mb=100, count=2, oldest_submit=1001.0),)


# ------------------------------------------------------------------ real slurmctld

GRES_NODES = ("plain1", "avx1", "gpu1")


@pytest.fixture(scope="module")
def gres_cluster(tmp_path_factory) -> SlurmCluster:
    """A private cluster whose avx1 has features avx512,fast and whose gpu1 a "GPU" (a plain
    file as its device) in partitions debug and gpu."""
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm-gres"), GRES_NODES,
                           node_extra={"avx1": "Features=avx512,fast", "gpu1": "Gres=gpu:tesla:1"},
                           conf_extra=["GresTypes=gpu",
                                       "PartitionName=gpu Nodes=gpu1 MaxTime=INFINITE State=UP"],
                           gres_conf="NodeName=gpu1 Name=gpu Type=tesla File={dev}/nvidia0\n")
    yield from started(cluster)


def test_real_slurmctld_constraint_and_gpu_jobs_ask_for_their_size_a_dependent_job_for_none(gres_cluster):
    c = gres_cluster
    assert "gpu:tesla:1" in c.run("sinfo", "-h", "-N", "-n", "gpu1", "-o", "%G").stdout  # slurmd advertises it
    # the feature node and the GPU are taken: the next jobs that need them wait for more nodes
    busy_avx = c.sbatch("-C", "avx512", "--exclusive")
    busy_gpu = c.sbatch("-p", "gpu", "--gres=gpu:1")
    c.wait_job(busy_avx, "RUNNING")
    c.wait_job(busy_gpu, "RUNNING")
    constrained = c.sbatch("-C", "avx512")
    whole = c.sbatch("-C", "avx512&fast", "--exclusive")
    gpu = c.sbatch("-p", "gpu", "--gres=gpu:1")
    dependent = c.sbatch(f"--dependency=afterok:{busy_avx}")
    reason = lambda j: c.run("squeue", "-h", "-j", str(j), "-o", "%r").stdout.strip()  # noqa: E731
    c.wait_for(lambda: reason(dependent) == "Dependency"
               and all(reason(j) in ("Resources", "Priority") for j in (constrained, whole, gpu)),
               15, "the jobs pending with their reasons")
    got = SlurmScheduler(SlurmOptions.from_mapping(c.scheduler_options), sizes=SIZES).poll().demand
    # three jobs of demand: the dependent one waits for another job, not for a node
    assert {(d.cpus, d.count, d.sizes, d.gpus, d.unmatched) for d in got} == {
        (1, 1, frozenset({"avx"}), 0, None),        # --constraint=avx512
        (4, 1, frozenset({"avx"}), 0, None),        # --exclusive: a whole avx node
        (1, 1, frozenset({"gpu"}), 1, None),        # --gres=gpu:1 in partition gpu
    }


def _planned_boots(c: SlurmCluster, sizes: tuple[Size, ...]) -> dict[str, int]:
    """What the decision core boots for the real slurmctld's pending jobs, as the daemon would:
    the adapter's demand (matched to ``sizes``) planned on an empty pool."""
    import policy_matrix

    from nodemanager.core import plan
    from tests.core_world import settings, snap

    got = SlurmScheduler(SlurmOptions.from_mapping(c.scheduler_options), sizes=sizes).poll().demand
    p = plan(snap(demand=got), settings(sizes=sizes, reclaim_penalty=600.0), policy_matrix.load_default())
    return {b.size: b.count for b in p.boots}


def _all_busy_then(c: SlurmCluster, *pending: tuple[str, ...], reason: str = "Resources|Priority") -> list[int]:
    """Every node taken by an exclusive job, then ``pending`` submitted (``{busy}`` in an argument:
    the first busy job's id) and seen pending for one of the ``reason`` alternatives."""
    c.reset()
    busy = [c.sbatch("--exclusive", "-w", name, *(("-p", "gpu", "--gres=gpu:1") if name == "gpu1" else ()))
            for name in GRES_NODES]
    for j in busy:
        c.wait_job(j, "RUNNING")
    jobs = [c.sbatch(*(a.format(busy=busy[0]) for a in args)) for args in pending]
    why = lambda j: c.run("squeue", "-h", "-j", str(j), "-o", "%r").stdout.strip()  # noqa: E731
    c.wait_for(lambda: all(why(j) in reason.split("|") for j in jobs), 15, f"the jobs pending for {reason}")
    return busy


def test_real_slurmctld_constraint_and_gpu_jobs_boot_their_size_a_dependent_job_nothing(gres_cluster):
    """Issue 14's Done-when through the core: the --constraint jobs boot the avx size, each GPU
    job (--gres, --gpus, --gpus-per-task) a 1-GPU node of its own, the job held by a dependency
    nothing."""
    c = gres_cluster
    _all_busy_then(c, ("-C", "avx512"), ("-C", "avx512&fast", "--exclusive"), ("-p", "gpu", "--gres=gpu:1"),
                   ("-p", "gpu", "--gres=gpu:1"), ("-p", "gpu", "--gpus=1"),
                   ("-p", "gpu", "--gpus-per-task=1", "-n", "1"))
    assert _planned_boots(c, SIZES) == {"avx": 2, "gpu": 4}  # the --exclusive job: an avx node of its own
    _all_busy_then(c, ("--dependency=afterok:{busy}",), reason="Dependency")
    assert _planned_boots(c, SIZES) == {}


def test_real_slurmctld_short_job_boots_spot_and_long_job_on_demand(gres_cluster):
    """Issue 15 item 3: --time reaches the plan; a 10-minute job goes to the spot size (cheap, a
    reclaim costs little re-run), a two-day job to on-demand (it would hardly ever finish on spot).
    One-core sizes: each job needs a node of its own."""
    c = gres_cluster
    sizes = (Size("ondemand", 1, 8000, price=0.40),
             Size("spot", 1, 8000, price=0.12, market="spot", interruptions_per_day=2.0))
    _all_busy_then(c, ("--time=10",), ("--time=2-00:00:00",))
    assert _planned_boots(c, sizes) == {"spot": 1, "ondemand": 1}
    _all_busy_then(c, ("--time=10",), ("--time=20",), ("-t", "UNLIMITED"))  # no limit: priced as short
    assert _planned_boots(c, sizes) == {"spot": 3}
