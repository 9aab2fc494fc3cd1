"""A job-dependent retirement on real HTCondor daemons, through the real Controller and Actuator
(the HTCondor adapter on a real pool, libcloud's EC2 driver on moto): the execute node gives jobs
that say ``NmPreempt = true`` no retirement (``ifThenElse(TARGET.NmPreempt =?= true, 0, 7200)``),
so its p-slot says 7200 s while a graceful drain would evict such a job at once. Every drain we
start on it (the cost profile's consolidation and ``max_lifetime``, and an operator's
``POST /admin/drain``) is held back or refused, and both jobs run on, never evicted.
"""

from __future__ import annotations

import pathlib
import time

import policy_matrix
import pytest

from nodemanager.configuration.settings import CoreSettings, Settings
from nodemanager.console.admin import AdminState
from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.model import Size
from nodemanager.scheduler.htcondor import HTCondorScheduler
from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings
from tests.fixtures.condor_contract import JOB_DEPENDENT, real_pool  # noqa: F401 - fixture

pytestmark = [pytest.mark.htcondor, pytest.mark.ec2, pytest.mark.slow]

SIZE = Size("small", cores=2, ram_mb=2048, price=0.1, instance_type="t3.small", min_charge=15)
LIFETIME = 60.0


def test_no_drain_we_start_evicts_a_job_whose_retirement_depends_on_it(real_pool, ec2_cloud):
    pool = real_pool
    settings = Settings(core=CoreSettings(sizes=(SIZE,), max_nodes=1, boot_grace=120.0, idle_grace=8.0,
                                          poll_stale_after=3600.0, node_stale_after=3600.0,
                                          consolidate=True, consolidate_margin=0, max_lifetime=LIFETIME))
    matrix = policy_matrix.load(pathlib.Path(policy_matrix.__file__).parent / "cost.matrix")
    cloud = ec2_cloud()
    sched = HTCondorScheduler(Htcondor2Bindings(pool.collector), sizes=(SIZE,))
    admin = AdminState(clock=time.time)
    ctl = Controller(settings, matrix, Actuator(cloud, sched, settings, clock=time.time), clock=time.time,
                     admin=admin)
    preemptible = pool.submit(3600, cpus=1, memory=500, extra="+NmPreempt = true")
    other = pool.submit(3600, cpus=1, memory=500)
    started: dict[str, str] = {}
    reports: list = []

    def cycle():
        reports.append(ctl.cycle(cloud.list_nodes(), time.time(), sched.poll()))
        for n in cloud.list_nodes():
            if n.state == "running" and n.id not in started:
                started[n.id] = n.name
                pool.start_vm(n.name, cloud_id=n.id, cpus=2, memory=2048, retirement=JOB_DEPENDENT)

    def running() -> bool:
        cycle()
        return sum(1 for j in pool.jobs(f"ClusterId == {preemptible} || ClusterId == {other}", ["JobStatus"])
                   if j.get("JobStatus") == 2) == 2

    try:
        pool.wait_for(running, 180, "a VM booted and both jobs running on it", step=2.0)
        [(node_id, name)] = started.items()
        admin.drain(name)                                       # the operator's POST /admin/drain
        deadline = time.monotonic() + LIFETIME + 30             # past max_lifetime, consolidating
        while time.monotonic() < deadline:
            cycle()
            time.sleep(2.0)
        outcomes = [o for r in reports for o in r.outcomes if o.node == node_id]
        drains = [o for o in outcomes if o.kind == "drain"]
        assert drains and all(o.result != "ok" for o in drains), drains
        assert any("evict a job at once" in o.detail for o in drains), drains
        assert not [o for o in outcomes if o.kind == "destroy"]
        last = next(e for e in reports[-1].plan.nodes if e.node_id == node_id)
        assert last.tuple.worker_state != "idle"
        # both still on their first start (an evicted job goes back to idle, its start counted)
        jobs = pool.jobs(f"ClusterId == {preemptible} || ClusterId == {other}", ["JobStatus", "NumJobStarts"])
        assert len(jobs) == 2 and all(j["JobStatus"] == 2 and j.get("NumJobStarts", 0) <= 1 for j in jobs), jobs
        assert not pool.slots(f'Machine == "{name}" && Draining =?= true')
    finally:
        for name in started.values():
            if name in pool.masters:
                pool.stop_vm(name, kill=True)
        for cluster in (preemptible, other):
            pool.run("condor_rm", "-pool", pool.collector, "-name", "nm-schedd@nm-central", str(cluster),
                     check=False)
