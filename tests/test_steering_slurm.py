"""Placement steering on a real slurmctld: the real Controller and Actuator with ``[Daemon]
steering = yes``, the real SLURM adapter, two VMs of ours on libcloud's EC2 driver against
moto_server. A job submitted while both nodes have a free core lands on the node the controller
keeps (whose job runs for hours), not on the one SLURM would pick by itself (the first by name,
whose job ends in minutes); unchanged ranks make no call; switched off, the nodes get the site's
weight back."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from nodemanager.scheduler.slurm_steer import WEIGHT_BASE
from tests.test_foreign_drain_slurm import two_vms

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

OURS = ("node5", "node6")
OTHERS = "node1,node2,node3,node4"


def weights(slurm) -> dict[str, int]:
    doc = json.loads(slurm.run("sinfo", "--json").stdout)
    return {n["name"]: n["weight"] for n in doc["nodes"] if n["name"] in OURS}


@pytest.fixture
def ours(slurm):
    yield slurm
    for name in OURS:
        slurm.set_node(name, "Comment=", "Weight=1")


def test_a_new_job_lands_on_the_node_we_keep_and_weights_are_given_back(ours, ec2_cloud):
    slurm = ours
    clock, ctl, cloud, sched = two_vms(slurm, ec2_cloud, idle_grace=3600.0, steering=True)
    assert weights(slurm) == {"node5": 1, "node6": 1}
    short = slurm.sbatch("-w", "node5", "-c1", "-t", "5")       # ends within minutes
    long = slurm.sbatch("-w", "node6", "-c1", "-t", "600")      # runs for hours: node6 is kept
    for job in (short, long):
        slurm.wait_job(job, "RUNNING")
    slurm.wait_states({"node5": {"mix"}, "node6": {"mix"}})

    report = ctl.cycle(cloud.list_nodes(), clock.now, sched.poll())
    steer = [o for o in report.outcomes if o.kind == "steer"]
    assert [o.result for o in steer] == ["ok"], steer
    assert weights(slurm) == {"node5": WEIGHT_BASE + 2, "node6": WEIGHT_BASE + 1}
    clock.advance(10)
    report = ctl.cycle(cloud.list_nodes(), clock.now, sched.poll())
    assert not [o for o in report.outcomes if o.kind == "steer"]     # unchanged ranks: no call

    new = slurm.sbatch("-x", OTHERS, "-c1")
    slurm.wait_job(new, "RUNNING")
    jobs = json.loads(slurm.run("squeue", "--json").stdout)["jobs"]   # 22.05 --json ignores -j
    assert [j["nodes"] for j in jobs if j["job_id"] == new] == ["node6"]

    ctl.update_settings(replace(ctl.settings, core=replace(ctl.settings.core, steering=False)))
    clock.advance(10)
    report = ctl.cycle(cloud.list_nodes(), clock.now, sched.poll())
    assert [o.result for o in report.outcomes if o.kind == "steer"] == ["ok"]
    assert weights(slurm) == {"node5": 1, "node6": 1}


def test_with_runtime_prediction_the_node_kept_is_the_one_whose_job_its_users_history_says_ends_last(ours, ec2_cloud):
    """The requested times say node5's job (10 hours) outlives node6's (1 hour); the user's
    finished jobs of those names say node5's ends in two minutes and node6's in 50: with
    ``runtime_prediction = recent`` SLURM is steered to fill node6 (lower weight) and give
    node5 back first."""
    import getpass

    from nodemanager.configuration.settings import SchedulerSettings
    from nodemanager.scheduler.slurm import SlurmScheduler
    slurm = ours
    clock, ctl, cloud, _ = two_vms(slurm, ec2_cloud, idle_grace=3600.0, steering=True,
                                   runtime_prediction="recent")
    sched = SlurmScheduler.from_settings(SchedulerSettings("slurm", slurm.scheduler_options), finished_limit=100)
    user = getpass.getuser()
    ctl.memories.runtimes.record(user, "nm-quick", 120.0)    # as finished jobs of these names teach it
    ctl.memories.runtimes.record(user, "nm-slow", 3000.0)
    quick = slurm.sbatch("-w", "node5", "-c1", "-J", "nm-quick", "-t", "600")
    slow = slurm.sbatch("-w", "node6", "-c1", "-J", "nm-slow", "-t", "60")
    for job in (quick, slow):
        slurm.wait_job(job, "RUNNING")
    slurm.wait_states({"node5": {"mix"}, "node6": {"mix"}})

    report = ctl.cycle(cloud.list_nodes(), clock.now, sched.poll())
    assert [o.result for o in report.outcomes if o.kind == "steer"] == ["ok"]
    assert weights(slurm) == {"node5": WEIGHT_BASE + 2, "node6": WEIGHT_BASE + 1}
