"""The closed loop on real HTCondor daemons: the real Controller and Actuator, the HTCondor adapter
on a real pool (:mod:`tests.fixtures.condor_pool`), libcloud's EC2 driver on moto_server. Jobs are
submitted; the controller boots VMs; for each new instance a startd named for it joins the pool
(as its VM's boot would), the jobs run and end, the idle VMs are drained through the real startd
and destroyed, and a destroyed VM's startd is stopped. No job is killed, and every VM is destroyed
only after our drain of it was confirmed.
"""

from __future__ import annotations

import pathlib
import time

import policy_matrix
import pytest

from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.model import Size
from nodemanager.scheduler.htcondor import HTCondorScheduler
from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings
from nodemanager.configuration.settings import CoreSettings, Settings
from tests.fixtures.condor_contract import real_pool  # noqa: F401 - fixture

pytestmark = [pytest.mark.htcondor, pytest.mark.ec2, pytest.mark.slow]

SIZE = Size("small", cores=2, ram_mb=2048, price=0.1, instance_type="t3.small", min_charge=15)
# the execute file's line that puts each job's own time limit on its slot ad
JOB_ATTRS = next(line for line in (pathlib.Path(__file__).resolve().parent.parent / "deploy" / "htcondor"
                                   / "50-nodemanager-execute.conf").read_text().splitlines()
                 if line.startswith("STARTD_JOB_ATTRS"))


# the default policy's loop runs as the daemon process: tests/system/test_htcondor_daemon_loop.py
@pytest.mark.parametrize("jobs, seconds, consolidate", [(1, 30, True)], ids=["consolidation-with-a-long-job"])
def test_jobs_boot_vms_that_are_drained_and_destroyed_with_no_job_killed(real_pool, ec2_cloud, jobs, seconds,
                                                                         consolidate):
    """With consolidation (the cost profile's matrix drains an underused busy node gracefully),
    a job longer than the idle grace, its time limit on its slot ad, is drained while it runs and
    never evicted. The schedd's history tells the controller's runtime memory each finished job's
    owner, command and runtime."""
    pool = real_pool
    settings = Settings(core=CoreSettings(sizes=(SIZE,), max_nodes=3, boot_grace=120.0, idle_grace=8.0,
                                          poll_stale_after=3600.0, node_stale_after=3600.0,
                                          consolidate=consolidate, consolidate_margin=0,
                                          runtime_prediction="recent"))
    matrix = (policy_matrix.load(pathlib.Path(policy_matrix.__file__).parent / "cost.matrix") if consolidate
              else policy_matrix.load_default())
    cloud = ec2_cloud()
    sched = HTCondorScheduler(Htcondor2Bindings(pool.collector), sizes=(SIZE,), finished_limit=100)
    ctl = Controller(settings, matrix, Actuator(cloud, sched, settings, clock=time.time), clock=time.time)
    # the jobs' time limit tells the controller they end within their retirement
    cluster = pool.submit(seconds, count=jobs, cpus=1, memory=500, extra=f"allowed_job_duration = {3 * seconds}")
    started: dict[str, str] = {}                     # instance id -> VM name (its startd)
    outcomes: list = []
    owners: set = set()                               # whose queued jobs the demand named

    def cycle() -> bool:
        poll = sched.poll()
        owners.update(d.user for d in poll.demand)
        report = ctl.cycle(cloud.list_nodes(), time.time(), poll)
        outcomes.extend(report.outcomes)
        listed = cloud.list_nodes()
        for n in listed:                              # a booted VM's startd joins the pool
            if n.state == "running" and n.id not in started:
                started[n.id] = n.name
                pool.start_vm(n.name, cloud_id=n.id, cpus=2, memory=2048, extra=JOB_ATTRS + "\n")
        live = {n.id for n in listed if n.state in ("pending", "running")}
        for node_id, name in started.items():         # a destroyed VM's startd goes with it
            if node_id not in live and name in pool.masters:
                pool.stop_vm(name, kill=True)
        done = pool.jobs(f"ClusterId == {cluster} && JobStatus == 4", ["JobStatus"])
        return bool(started) and not live and len(done) >= jobs

    pool.wait_for(cycle, 240, "the jobs done and every VM destroyed", step=2.0)

    ads = pool.jobs(f"ClusterId == {cluster}", ["ProcId", "JobStatus", "NumJobStarts", "ExitCode", "CompletionDate"])
    by_proc = {j["ProcId"]: j for j in ads}
    assert len(by_proc) == jobs and all(j["JobStatus"] == 4 and j.get("NumJobStarts") == 1 for j in by_proc.values())
    drained = {o.node for o in outcomes if o.kind == "drain" and o.result == "ok"}
    # consolidation drained the busy VM while its job ran (not only once it was idle)
    first_end = min(j["CompletionDate"] for j in by_proc.values())
    assert any(o.at < first_end for o in outcomes if o.kind == "drain" and o.result == "ok"), outcomes
    destroyed = [o for o in outcomes if o.kind == "destroy" and o.result == "ok"]
    assert {o.node for o in destroyed} == set(started)
    for o in destroyed:                               # each destroy follows our drain of that VM
        assert o.node in drained, o
        first_drain = min(d.at for d in outcomes if d.kind == "drain" and d.node == o.node and d.result == "ok")
        assert first_drain < o.at
    # the finished jobs, from the schedd's history, once each under their owner and command
    runtimes = ctl.memories.runtimes.recent("nobody", "/bin/sleep")
    assert len(runtimes) == jobs and all(seconds <= r <= seconds + 10 for r in runtimes), runtimes
    assert owners == {"nobody"}, owners               # queued demand is priced by its owner's runtimes
