"""Invariants of the simulated startd under random job, drain, cancel, vacate and restart sequences."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nodemanager.sim.startd import DrainError, Job, SimStartd

T0 = 1_000_000.0

ops = st.lists(st.one_of(
    st.tuples(st.just("job"), st.integers(1, 4), st.floats(1.0, 5000.0)),
    st.tuples(st.just("drain"), st.sampled_from(["graceful", "quick", "fast"]), st.booleans()),
    st.tuples(st.just("cancel"), st.booleans(), st.just(0)),
    st.tuples(st.just("vacate"), st.booleans(), st.just(0)),
    st.tuples(st.just("wait"), st.floats(0.0, 3000.0), st.just(0)),
    st.tuples(st.just("restart"), st.just(0), st.just(0)),
), max_size=40)


def check(s: SimStartd, now: float, last_badput: float) -> float:
    ads = s.slot_ads(now)
    p = ads[0]
    dslots = ads[1:]
    used = sum(a["Cpus"] for a in dslots)
    assert p["Cpus"] + used == p["TotalSlotCpus"] == 8
    assert p["NumDynamicSlots"] == len(dslots)
    drain_attrs = {"Draining", "DrainReason", "DrainingRequestId"} & set(p)
    assert (drain_attrs == {"Draining", "DrainReason", "DrainingRequestId"}) is s.draining
    assert not drain_attrs or s.draining
    if s.draining:
        assert p["State"] == "Drained" and p["Start"] is False
        assert (p["Activity"] == "Idle") is (not dslots)
    else:
        assert p["State"] == "Unclaimed" and p["Start"] is True
        assert all(a["State"] in ("Claimed", "Preempting") for a in dslots)
        # a graceful vacate retires claims outside a drain too
        assert all(a["Activity"] in ("Busy", "Retiring", "Vacating", "Killing") for a in dslots)
    # graceful never costs less than quick, nor finishes sooner
    assert p["ExpectedMachineGracefulDrainingBadput"] >= p["ExpectedMachineQuickDrainingBadput"] >= 0
    assert p["ExpectedMachineGracefulDrainingCompletion"] >= p["ExpectedMachineQuickDrainingCompletion"]
    if not dslots:
        assert p["ExpectedMachineGracefulDrainingCompletion"] <= now
    badput = p.get("TotalMachineDrainingBadput", 0)
    assert badput >= last_badput
    return badput


@settings(max_examples=150, deadline=None)
@given(ops)
def test_startd_invariants(sequence):
    s = SimStartd("n.example", 8, 16000, T0, max_retirement=1800.0, vacate_time=120.0, kill_time=3.0)
    now = T0
    badput = 0.0
    started = 0
    for i, (op, a, b) in enumerate(sequence):
        if op == "job":
            j = Job(str(i), cpus=a, ram_mb=100, runtime=b)
            if s.accepts(j, now):
                s.start_job(j, now)
                started += 1
        elif op == "drain":
            try:
                s.drain(now, a, check_expr="NumDynamicSlots =?= 0" if b else None)
            except DrainError as err:
                assert err.code in (10001, 10003)
                assert s.draining or err.code == 10003
        elif op == "cancel":
            rid = s.drain_request if a else None
            s.cancel(now, rid)
            assert not s.draining
        elif op == "vacate":
            s.vacate(now, fast=a)
        elif op == "wait":
            now += a
        elif op == "restart":
            s.restart(now)
            badput = 0.0
        badput = check(s, now, badput)
    # every job that started either still runs or ended exactly once, at or after its start
    ended = {e.job.id: e for e in s.ended}
    assert len(ended) == len(s.ended)
    assert len(ended) + len(s.dslots) == started
    for e in s.ended:
        assert e.end >= e.start
        if not e.killed:
            assert abs((e.end - e.start) - e.job.runtime) < 1e-6
