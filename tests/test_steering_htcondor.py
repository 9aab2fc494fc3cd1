"""Placement steering on real HTCondor daemons: the HTCondor adapter sets ``NodeManagerKeepRank``
on each startd with ``condor_update_machine_ad`` and a negotiator configured with the shipped
``deploy/htcondor/70-nodemanager-steering.conf`` puts a new job on the rank-1 node of two that
have room; ranked the other way round, the next job goes to the other node. The attribute stays
across the startds' own updates."""

from __future__ import annotations

import pathlib
from typing import Iterator

import pytest

from nodemanager.scheduler.htcondor import HTCondorScheduler
from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings
from nodemanager.scheduler.htcondor_steer import KEEP_RANK
from tests.fixtures.condor_pool import CondorPool, require_condor

pytestmark = [pytest.mark.htcondor, pytest.mark.slow]

SNIPPET = pathlib.Path(__file__).resolve().parent.parent / "deploy/htcondor/70-nodemanager-steering.conf"


@pytest.fixture(scope="module")
def steered_pool() -> Iterator[CondorPool]:
    pool = CondorPool(require_condor())
    try:
        with pool.client():
            pool.start(extra=SNIPPET.read_text())
            for name in ("vm-a", "vm-b"):
                pool.start_vm(name, cpus=2, memory=2048)
            for name in ("vm-a", "vm-b"):
                pool.wait_vm(name)
            # condor_update_machine_ad finds a startd by its daemon ad, which follows the slot ads
            pool.wait_for(lambda: pool.run("condor_status", "-pool", pool.collector, "-startd", "-af",
                                           "Name").split() == ["vm-a@vm-a", "vm-b@vm-b"], 30, "the startds' ads")
            yield pool
    finally:
        pool.stop()


def test_a_new_job_lands_on_the_node_ranked_first(steered_pool):
    pool = steered_pool
    sched = HTCondorScheduler(Htcondor2Bindings(pool.collector,
                                                update_tool=pool.tool("condor_update_machine_ad")))

    def workers():
        return {w.name: w for w in sched.poll().workers}

    def where(cluster: int) -> str:
        pool.wait_running(cluster)
        host = pool.jobs(f"ClusterId == {cluster}")[0]["RemoteHost"]
        return host.split("@")[-1]

    w = workers()
    assert sched.steer([(w["vm-a"], 2), (w["vm-b"], 1)]) == 2
    pool.wait_for(lambda: {n: x.ad.get(KEEP_RANK) for n, x in workers().items()} == {"vm-a": 2, "vm-b": 1},
                  30, "the ranks in the collector")
    assert where(pool.submit(300, cpus=1, memory=100)) == "vm-b"

    w = workers()
    assert sched.steer([(w["vm-a"], 1), (w["vm-b"], 2)]) == 2
    pool.wait_for(lambda: {n: x.ad.get(KEEP_RANK) for n, x in workers().items()} == {"vm-a": 1, "vm-b": 2},
                  30, "the new ranks in the collector")
    assert where(pool.submit(300, cpus=1, memory=100)) == "vm-a"
    # the startds sent their own updates since (a job started on each): the ranks stayed
    assert {n: x.ad.get(KEEP_RANK) for n, x in workers().items()} == {"vm-a": 1, "vm-b": 2}
    assert sched.steer([(x, {"vm-a": 1, "vm-b": 2}[n]) for n, x in workers().items()]) == 0
