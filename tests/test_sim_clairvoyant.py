"""The clairvoyant packing the cost target is measured against (benchmarks/cost_target.py):
node-hours worked out by hand on small traces."""

import pytest

from nodemanager.sim.clairvoyant import pack
from nodemanager.sim.swf import SwfJob


def _job(k, submit, runtime, cores, requested=-1.0):
    return SwfJob(id=k, submit=submit, runtime=runtime, cores=cores, requested_time=requested)


def _steer(long_requested=-1.0, short_requested=-1.0):
    """Node 1 holds a 1-hour job (and a 10-minute one that fills it), node 2 a 10-hour job; at
    30 min a 5-hour job finds room on both."""
    return [_job(1, 0.0, 3600.0, 4, short_requested), _job(2, 0.0, 600.0, 4),
            _job(3, 10.0, 36000.0, 4, long_requested), _job(4, 1800.0, 18000.0, 4, 18000.0)]


def test_first_fit_keeps_a_node_up_that_lifetime_placement_lets_go():
    first = pack(_steer(), 8, "first", boot_join=120.0)
    # the 5-hour job lands on node 1 (first in creation order): up 0-19,800 s, node 2 10-36,010 s
    assert first.busy_node_hours == pytest.approx((19800.0 + 36000.0) / 3600)
    assert (first.nodes_created, first.boots) == (2, 2)
    assert first.overhead_node_hours == pytest.approx(240.0 / 3600)
    life = pack(_steer(), 8, "lifetime", boot_join=120.0)
    # on node 2, which stays up until 36,010 s anyway: node 1 goes at 3,600 s
    assert life.busy_node_hours == pytest.approx((3600.0 + 36000.0) / 3600)
    assert life.total_node_hours == pytest.approx(11.0 + 240.0 / 3600)


def test_lifetime_placement_on_wrong_beliefs_is_no_better_than_first_fit():
    # the users asked for 1,000 s on the long job and 100,000 s on the short one
    jobs = _steer(long_requested=1000.0, short_requested=100000.0)
    asked = pack(jobs, 8, "lifetime", runtime=lambda j: j.requested_time)
    assert asked.busy_node_hours == pytest.approx(pack(jobs, 8, "first").busy_node_hours)
    assert asked.busy_node_hours > pack(jobs, 8, "lifetime").busy_node_hours


def test_a_node_needed_soon_after_one_emptied_pays_the_gap_not_a_boot():
    soon = pack([_job(1, 0.0, 1000.0, 8), _job(2, 1050.0, 1000.0, 8)], 8, boot_join=120.0)
    assert soon.busy_node_hours == pytest.approx(2000.0 / 3600)
    assert (soon.nodes_created, soon.boots) == (2, 1)
    assert soon.overhead_node_hours == pytest.approx((120.0 + 50.0) / 3600)
    late = pack([_job(1, 0.0, 1000.0, 8), _job(2, 1200.0, 1000.0, 8)], 8, boot_join=120.0)
    assert (late.boots, late.overhead_node_hours) == (2, pytest.approx(240.0 / 3600))


def test_a_wide_job_takes_node_sized_pieces_as_the_replay_splits_it():
    p = pack([_job(1, 0.0, 3600.0, 20)], 8, boot_join=0.0)
    assert p.nodes_created == 3 and p.busy_node_hours == pytest.approx(3.0)


@pytest.mark.parametrize("kwargs", [{"rule": "best"}, {"cores_per_node": 0},
                                    {"boot_join": float("nan")}, {"boot_join": -1.0}])
def test_bad_arguments_are_refused(kwargs):
    args = {"cores_per_node": 8, **kwargs}
    with pytest.raises(ValueError):
        pack([_job(1, 0.0, 60.0, 1)], **args)
