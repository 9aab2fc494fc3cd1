"""The HTCondor adapter hands back last poll's very worker for a startd whose ads are equal, and
what it hands back is always what an adapter reading the ads for the first time builds: poll
after poll of a changing pool (jobs starting, a drain, an attribute set by the controller, a
second partitionable slot appearing and leaving, runtime prediction reading dynamic slots)."""

from __future__ import annotations

from nodemanager.scheduler.htcondor import HTCondorScheduler
from nodemanager.scheduler.htcondor_attributes import DEFAULT_CONSTRAINT
from nodemanager.sim.job import Job
from nodemanager.sim.startd import SimStartd

T0 = 1_700_000_000.0


class _NoBindings:
    error_types = (OSError,)


def _adapter(finished_limit: int = 0) -> HTCondorScheduler:
    return HTCondorScheduler(_NoBindings(), clock=lambda: T0, finished_limit=finished_limit)  # type: ignore[arg-type]


def _startd(name: str, cpus: int = 4) -> SimStartd:
    return SimStartd(name, cpus, 8000, T0, attrs={"CloudInstanceID": f"i-{name}"})


def _reply(startds: list[SimStartd], now: float, dynamic: bool = False) -> list[dict]:
    """The collector's reply as new dicts (a real poll's ads are new objects every time)."""
    if dynamic:
        return [dict(ad) for st in startds for ad in st.slot_ads(now)]
    return [dict(st.pslot_ad(now)) for st in startds]


def _check(kept: HTCondorScheduler, reply: list[dict], limit: int = 0):
    """The kept adapter's workers, after checking they equal a new adapter's on the same ads."""
    got = kept.workers_from_ads([dict(ad) for ad in reply])
    assert got == _adapter(limit).workers_from_ads([dict(ad) for ad in reply])
    return {w.name: w for w in got}


def test_equal_ads_give_the_very_same_workers_and_a_changed_ad_a_new_worker_read_afresh():
    a, b = _startd("a"), _startd("b")
    htc = _adapter()
    first = _check(htc, _reply([a, b], T0))
    again = _check(htc, _reply([a, b], T0))
    assert again["a"] is first["a"] and again["b"] is first["b"]
    a.start_job(Job(id="1", cpus=2, ram_mb=100, runtime=3600.0), T0 + 10)
    busy = _check(htc, _reply([a, b], T0 + 10))
    assert busy["a"] is not first["a"] and (busy["a"].cpus_busy, busy["a"].classified.state) == (2, "busy")
    assert busy["b"] is not first["b"]  # its ad's MyCurrentTime moved: read again, equal but new
    assert _check(htc, _reply([a, b], T0 + 10))["a"] is busy["a"]
    b.drain(T0 + 20, "graceful", reason="nodemanager: consolidation")
    drained = _check(htc, _reply([a, b], T0 + 20))
    assert drained["b"].draining and drained["b"].drain_reason == "nodemanager: consolidation"
    ranked = [dict(ad, NodeManagerKeepRank=1) if ad["Machine"] == "a" else ad for ad in _reply([a, b], T0 + 20)]
    assert _check(htc, ranked)["a"].ad["NodeManagerKeepRank"] == 1
    gone = _check(htc, _reply([b], T0 + 20))
    assert list(gone) == ["b"] and gone["b"] is drained["b"]


def test_a_second_partitionable_slot_appearing_and_leaving_is_read_with_the_machine():
    a, b = _startd("a"), _startd("b")
    htc = _adapter()
    one = _reply([a, b], T0)
    _check(htc, one)
    second = dict(one[0], Name="slot2@a", Cpus=4, TotalSlotCpus=4)
    both = _check(htc, [one[0], second, one[1]])
    assert both["a"].cpus == 8 and both["b"].cpus == 4
    assert _check(htc, [second, one[0], one[1]])["a"].cpus == 8  # the new slot first, the old one after
    alone = _check(htc, one)
    assert alone["a"].cpus == 4


def test_with_runtime_prediction_the_dynamic_slots_name_the_jobs_poll_after_poll():
    a = _startd("a")
    htc = _adapter(finished_limit=10)
    a.start_job(Job(id="1", cpus=1, ram_mb=100, runtime=3600.0, walltime=7200.0), T0)
    first = _check(htc, _reply([a], T0 + 5, dynamic=True), limit=10)
    assert _check(htc, _reply([a], T0 + 5, dynamic=True), limit=10)["a"] is first["a"]
    a.start_job(Job(id="2", cpus=1, ram_mb=100, runtime=3600.0, walltime=3600.0), T0 + 6)
    more = _check(htc, _reply([a], T0 + 6, dynamic=True), limit=10)
    assert more["a"].running_jobs == 2
