"""Whose jobs run on a startd, from real HTCondor daemons: who spent what (the job's Owner, its
accounting group and cores, from the partitionable slot's Child attributes), and the running jobs
runtime prediction reads (from the dynamic slots' ads)."""

from __future__ import annotations

import time
from typing import Iterator

import pytest

from nodemanager.model import JobOwner
from tests.fixtures.condor_contract import RealStartds, real_pool  # noqa: F401 - fixture

pytestmark = [pytest.mark.htcondor, pytest.mark.slow]


@pytest.fixture(scope="module")
def busy(real_pool) -> Iterator[tuple[RealStartds, str]]:  # noqa: F811
    """A 4-core startd running two long jobs of nobody's, one in group_physics."""
    side = RealStartds(real_pool)
    try:
        name = side.add(cpus=4)
        assert side.worker(name).jobs_by == ()
        real_pool.submit(36000, cpus=2, extra=f'requirements = Machine == "{name}"\n'
                                              'accounting_group = group_physics\naccounting_group_user = alice')
        real_pool.submit(36000, cpus=1, extra=f'requirements = Machine == "{name}"')
        side.until(lambda: len(side.worker(name).jobs_by) == 2, "both jobs in the slot ad", 90)
        yield side, name
    finally:
        side.close()


def test_a_startd_running_jobs_of_two_groups_names_their_owner_group_and_cores(busy):
    side, name = busy
    # submitted as nobody; the group without its user part; no group: empty
    assert sorted(side.worker(name).jobs_by) == [JobOwner("nobody", "", 1), JobOwner("nobody", "group_physics", 2)]


def test_the_controller_expects_a_startds_jobs_to_end_one_learned_runtime_after_they_started(busy, real_pool):  # noqa: F811
    """With runtime prediction on, the poll's one collector query also reads the dynamic slots:
    each running job is named by its GlobalJobId, its owner's user name (the history's Owner) and
    JobStart (no Cmd: the slot ad does not carry it), and the controller's snapshot expects it to
    end one learned runtime of that user after it started."""
    import policy_matrix
    from nodemanager.configuration.settings import CoreSettings, Settings
    from nodemanager.core.runtime_prediction import expected_end_times
    from nodemanager.cycle.controller import Controller
    from nodemanager.scheduler.htcondor import HTCondorScheduler
    from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings
    side, name = busy
    htc = HTCondorScheduler(Htcondor2Bindings(real_pool.collector), finished_limit=100)
    ctl = Controller(Settings(core=CoreSettings(runtime_prediction="recent")), policy_matrix.load_default(),
                     None, clock=time.time, dry_run=True)
    ctl.memories.runtimes.record("nobody", None, 900.0)   # as a finished job of nobody's teaches it
    # a new dynamic slot is Claimed/Idle for a moment before its job's attributes reach the collector
    poll = real_pool.wait_for(lambda: next((p for p in [htc.poll()] for w in p.workers
                                            if w.name == name and len(w.jobs) == 2), None),
                              60, "both running jobs named in the collector's dynamic slots")
    report = ctl.cycle([], time.time(), poll)
    w = {w.name: w for w in report.snapshot.workers}[name]
    jobs = real_pool.jobs("JobStatus == 2", ["GlobalJobId", "JobCurrentStartDate", "RemoteHost"])
    here = sorted((j["JobCurrentStartDate"], j["GlobalJobId"]) for j in jobs
                  if str(j.get("RemoteHost", "")).endswith("@" + name))
    assert [(j.start, j.job_id) for j in w.jobs] == here and len(here) == 2
    assert {(j.user, j.name, j.limit) for j in w.jobs} == {("nobody", None, None)}
    assert expected_end_times(w, report.snapshot.now) == tuple(start + 900.0 for start, _ in here)
    # without runtime prediction the poll reads no dynamic slot and names no job
    plain = {w.name: w for w in HTCondorScheduler(Htcondor2Bindings(real_pool.collector)).poll().workers}
    assert plain[name].jobs == ()
