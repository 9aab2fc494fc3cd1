"""When a graceful drain starts evicting: HTCondor soft-kills a retiring job once its remaining
retirement is below MachineMaxVacateTime ("Evicting job with 538s of retirement time remaining
... max vacate time of 600s"), so eviction starts the vacate time before the startd's
ExpectedMachineGracefulDrainingCompletion. A job ending inside that window gets SIGTERM, and the
would-evict rule must count it."""

from __future__ import annotations

from dataclasses import replace

from nodemanager.core.retirement import would_evict
from nodemanager.scheduler import worker_from_ad
from nodemanager.sim.startd import GRACEFUL, Job, SimStartd

NOW = 1_000_000.0


def _ad(completion: float, vacate: float) -> dict:
    return {"Name": "slot1@vm-1", "Machine": "vm-1", "State": "Claimed", "Activity": "Busy",
            "PartitionableSlot": True, "TotalSlotCpus": 8, "Cpus": 7, "NumDynamicSlots": 1,
            "ExpectedMachineGracefulDrainingCompletion": completion, "MachineMaxVacateTime": vacate}


def test_the_retirement_end_is_when_eviction_starts_not_when_the_drain_completes():
    w = worker_from_ad(_ad(NOW + 1000, 600))
    assert w.retirement_end == NOW + 400
    assert worker_from_ad(_ad(NOW + 1000, 0)).retirement_end == NOW + 1000


def test_a_job_ending_within_the_vacate_time_before_completion_would_be_evicted():
    busy = replace(worker_from_ad(_ad(NOW + 1000, 600)), running_jobs=1, job_end_times=(NOW + 700,))
    assert would_evict(busy, NOW) is not None
    assert would_evict(replace(busy, job_end_times=(NOW + 300,)), NOW) is None

