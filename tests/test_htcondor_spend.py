"""Who spent what from real HTCondor daemons: the adapter reads whose jobs a startd runs (the job's
Owner, its accounting group and cores) from the partitionable slot's Child attributes."""

from __future__ import annotations

import pytest

from nodemanager.model import JobOwner
from tests.fixtures.condor_contract import RealStartds, real_pool  # noqa: F401 - fixture

pytestmark = [pytest.mark.htcondor, pytest.mark.slow]


def test_a_startd_running_jobs_of_two_groups_names_their_owner_group_and_cores(real_pool):  # noqa: F811
    side = RealStartds(real_pool)
    try:
        name = side.add(cpus=4)
        assert side.worker(name).jobs_by == ()
        real_pool.submit(36000, cpus=2, extra=f'requirements = Machine == "{name}"\n'
                                              'accounting_group = group_physics\naccounting_group_user = alice')
        real_pool.submit(36000, cpus=1, extra=f'requirements = Machine == "{name}"')
        w = side.until(lambda: (lambda w: w if len(w.jobs_by) == 2 else None)(side.worker(name)),
                       "both jobs in the slot ad", 90)
        # submitted as nobody; the group without its user part; no group: empty
        assert sorted(w.jobs_by) == [JobOwner("nobody", "", 1), JobOwner("nobody", "group_physics", 2)]
    finally:
        side.close()
