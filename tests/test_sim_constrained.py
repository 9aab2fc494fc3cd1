"""GPU and constrained jobs in the simulator: the pool's startds advertise their
GPUs and attributes and run GPU jobs only on GPU slots, HasDocker jobs only where it holds; its
demand says which sizes can run them; a replay with --gpu-fraction / --constrained-fraction
boots about what the jobs need and leaves no job waiting that some size could run."""

from __future__ import annotations

import json

from nodemanager.cli import main
from nodemanager.model import CloudNode, Size
from nodemanager.sim.constrained import REQUIREMENT, docker_size, gpu_size
from nodemanager.sim.pool import Job
from tests.test_sim_pool import T0, make_pool, run_until

CPU = Size("c8", cores=8, ram_mb=16000)
GPU = gpu_size(CPU)
DOCKER = docker_size(CPU)


def _boot(pool, i, size):
    pool.vm_started(CloudNode(f"i-{i}", f"n{i}", size.name, T0, private_ip=f"10.0.0.{i}"), size)


def test_gpu_and_docker_jobs_run_only_on_slots_that_offer_them():
    clock, pool = make_pool(sizes=(CPU, GPU, DOCKER))
    _boot(pool, 1, CPU)                      # joins first: first fit tries it first
    _boot(pool, 2, GPU)
    _boot(pool, 3, DOCKER)
    for k in range(3):
        pool.submit(Job(id=f"g{k}", cpus=1, runtime=3600.0, submit_time=T0, gpus=1))
        pool.submit(Job(id=f"d{k}", cpus=1, runtime=3600.0, submit_time=T0, requirements=REQUIREMENT))
    pool.submit(Job(id="big-gpu", cpus=1, runtime=3600.0, submit_time=T0, gpus=GPU.gpus + 1))
    run_until(clock, pool, T0 + 300)
    where = {j.id: name for name, nid in (("cpu", "i-1"), ("gpu", "i-2"), ("docker", "i-3"))
             for j, _ in pool.startd(nid).running()}
    assert where == {"g0": "gpu", "g1": "gpu", "g2": "gpu", "d0": "docker", "d1": "docker",
                     "d2": "docker"}
    ad = pool.startd("i-2").pslot_ad(clock())
    assert (ad["TotalSlotGPUs"], ad["GPUs"]) == (4, 1)
    assert pool.startd("i-3").pslot_ad(clock())["HasDocker"] is True
    (left,) = pool.demand()                  # 5 GPUs: no slot, no size
    assert (left.gpus, left.count) == (5, 1)


def test_demand_with_requirements_carries_the_sizes_that_can_run_it():
    clock, pool = make_pool(sizes=(CPU, GPU, DOCKER))
    pool.submit(Job(id="d", cpus=2, runtime=60.0, submit_time=T0, requirements=REQUIREMENT))
    pool.submit(Job(id="g", cpus=2, runtime=60.0, submit_time=T0, gpus=1))
    demand = {(d.gpus, d.requirements): d for d in pool.demand()}
    assert demand[(0, REQUIREMENT)].sizes == frozenset({"c8-docker"})
    assert demand[(1, None)].sizes is None   # GPUs: the core matches them to sizes' GPUs
    _, bare = make_pool(sizes=(CPU,))
    bare.submit(Job(id="d", cpus=2, runtime=60.0, submit_time=T0, requirements=REQUIREMENT))
    (d,) = bare.demand()
    assert d.sizes == frozenset() and "HasDocker" in (d.unmatched or "")


TRACE = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n" + "".join(
    f"{i} {1000 + i} 0 1800 1 -1 -1 1 3600 -1 1 1 1 -1 1 1 -1 -1\n" for i in range(1, 41)) + "".join(
    f"{i} 20000 0 600 2 -1 -1 2 900 -1 1 1 1 -1 1 1 -1 -1\n" for i in range(41, 61))


def _replay(tmp_path, capsys, *extra):
    trace = tmp_path / "t.swf"
    trace.write_text(TRACE)
    assert main(["simulate", "--trace", str(trace), "--jobs", "1", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["runs"][0]


def test_a_replay_with_gpu_and_constrained_jobs_boots_what_they_need_and_runs_them_all(tmp_path, capsys):
    plain = _replay(tmp_path, capsys)
    mixed = _replay(tmp_path, capsys, "--gpu-fraction", "0.25", "--constrained-fraction", "0.25")
    assert (mixed["jobs_completed"], mixed["jobs_unfinished"], mixed["jobs_killed"]) == (60, 0, 0)
    # no boot loop: at most one more boot per kind of job than the same trace without them
    assert plain["boots"] <= mixed["boots"] <= plain["boots"] + 2
    assert mixed["destroys"] == mixed["boots"]


def test_fractions_out_of_range_are_named(tmp_path, capsys):
    trace = tmp_path / "t.swf"
    trace.write_text(TRACE)
    assert main(["simulate", "--trace", str(trace), "--gpu-fraction", "1.5"]) == 1
    assert "--gpu-fraction 1.5: expected a fraction from 0 to 1" in capsys.readouterr().err
