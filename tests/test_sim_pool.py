"""The simulated pool: joins, negotiation, job accounting, and the Scheduler port with real drains."""

from __future__ import annotations

import pytest

from nodemanager.actors.clock import ManualClock
from nodemanager.scheduler.htcondor_classify import classify_htcondor
from nodemanager.console.metrics import Metrics
from nodemanager.model import CloudNode, Size
from nodemanager.scheduler.port import DrainRefused, DrainSchedule, Scheduler
from nodemanager.sim.pool import Job, SimPool
from policy_matrix.vocabulary import BUSY, DOWN, IDLE

SIZE = Size("m4", cores=4, ram_mb=8000)
T0 = 1_200_000.0    # a multiple of the 60 s negotiation interval


def node(i: int) -> CloudNode:
    return CloudNode(f"i-{i}", f"n{i}", SIZE.name, T0, private_ip=f"10.0.0.{i}")


def make_pool(**kw) -> tuple[ManualClock, SimPool]:
    clock = ManualClock(T0)
    kw.setdefault("join_delay", 60.0)
    kw.setdefault("negotiation_interval", 60.0)
    return clock, SimPool(clock, **kw)


def run_until(clock: ManualClock, pool: SimPool, end: float) -> None:
    """Event-driven: jump from one pool event to the next, as the simulator does."""
    while True:
        t = pool.next_event_time()
        if t is None or t > end:
            break
        clock.advance(t - clock())
        pool.advance(t)
    clock.advance(max(0.0, end - clock()))
    pool.advance(end)


def test_pool_is_a_scheduler_named_simulated():
    _, pool = make_pool()
    assert isinstance(pool, Scheduler) and pool.name == "simulated"


def test_startd_joins_after_join_delay_and_jobs_match_on_negotiation_cycles():
    clock, pool = make_pool()
    pool.vm_started(node(1), SIZE)
    pool.submit(Job("a", cpus=2, ram_mb=1000, runtime=500.0, submit_time=T0))
    assert pool.poll().workers == ()
    assert pool.next_event_time() == T0 + 60                     # join and negotiation coincide
    run_until(clock, pool, T0 + 59)
    assert pool.poll().workers == () and pool.poll().demand[0].count == 1
    run_until(clock, pool, T0 + 60)
    (w,) = pool.poll().workers
    assert (w.name, w.cloud_id, w.cpus, w.cpus_busy, w.running_jobs) == ("n1.sim.internal", "i-1", 4, 2, 1)
    assert w.ram_mb == int(8000 * 0.95) and pool.poll().demand == ()
    run_until(clock, pool, T0 + 1000)
    s = pool.stats
    assert (s.submitted, s.started, s.completed, s.running, s.used) == (1, 1, 1, 0, 2 * 500.0)
    assert pool.job_waits() == [60.0]


def test_first_fit_in_queue_order_and_big_jobs_stay_as_demand():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0)
    pool.vm_started(node(1), SIZE)
    pool.vm_started(node(2), SIZE)
    pool.advance(T0)
    for jid, cpus in (("a", 3), ("huge", 16), ("b", 2), ("c", 1), ("d", 2)):
        pool.submit(Job(jid, cpus=cpus, ram_mb=100, runtime=1000.0, submit_time=T0))
    pool.advance(T0)
    n1, n2 = pool.startd("i-1"), pool.startd("i-2")
    assert sorted(j.id for j, _ in n1.running()) == ["a", "c"]
    assert sorted(j.id for j, _ in n2.running()) == ["b", "d"]
    demand = pool.poll().demand
    assert [(d.cpus, d.count) for d in demand] == [(16, 1)]


def test_stopped_vm_kills_its_jobs_and_they_run_again_elsewhere():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0)
    pool.vm_started(node(1), SIZE)
    pool.advance(T0)
    pool.submit(Job("a", cpus=4, ram_mb=100, runtime=1000.0, submit_time=T0))
    pool.advance(T0)
    clock.advance(300)
    pool.vm_stopped("i-1")
    s = pool.stats
    assert (s.killed, s.killed_by_drain, s.badput, s.idle) == (1, 0, 4 * 300.0, 1)
    pool.vm_started(node(2), SIZE)
    run_until(clock, pool, T0 + 2000)
    s = pool.stats
    assert (s.started, s.completed, s.idle) == (2, 1, 0)
    assert pool.job_waits() == [0.0]                              # the first start counts


def test_poll_ads_are_classified_by_the_core():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0)
    pool.vm_started(node(1), SIZE)
    pool.vm_started(node(2), SIZE)
    pool.advance(T0)
    pool.submit(Job("a", cpus=1, ram_mb=100, runtime=1000.0, submit_time=T0, walltime=2000.0))
    pool.advance(T0)
    workers = {w.cloud_id: w for w in pool.poll().workers}
    busy, idle = workers["i-1"], workers["i-2"]
    for key in ("NumDynamicSlots", "State", "Activity", "EnteredCurrentState", "CloudInstanceID",
                "ExpectedMachineGracefulDrainingCompletion", "ExpectedMachineQuickDrainingBadput"):
        assert key in busy.ad
    assert busy.job_end_times == (T0 + 2000.0,)
    assert classify_htcondor(busy.ad, T0).state == BUSY
    assert classify_htcondor(idle.ad, T0).state == IDLE
    ticket = pool.drain(idle, DrainSchedule.GRACEFUL, "idle exceeded")
    clock.advance(1)
    drained = {w.cloud_id: w for w in pool.poll().workers}["i-2"]
    assert classify_htcondor(drained.ad, clock()).state == DOWN
    assert pool.confirm_drained(ticket).ok


def test_drained_node_takes_no_new_jobs():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0)
    pool.vm_started(node(1), SIZE)
    pool.advance(T0)
    ticket = pool.drain(pool.poll().workers[0], DrainSchedule.GRACEFUL, "idle exceeded")
    pool.submit(Job("a", cpus=1, ram_mb=100, runtime=100.0, submit_time=T0))
    run_until(clock, pool, T0 + 600)
    assert pool.stats.started == 0 and pool.poll().demand[0].count == 1
    assert pool.confirm_drained(ticket).ok


def test_drain_refused_when_a_job_matched_after_the_snapshot():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0)
    pool.vm_started(node(1), SIZE)
    pool.advance(T0)
    snapshot = pool.poll().workers[0]
    pool.submit(Job("a", cpus=1, ram_mb=100, runtime=100.0, submit_time=T0))
    pool.advance(T0)
    with pytest.raises(DrainRefused, match="busy since the snapshot"):
        pool.drain(snapshot, DrainSchedule.GRACEFUL, "idle exceeded")
    assert pool.stats.drains_refused == 1 and pool.stats.running == 1


def test_cancel_instead_of_boot_resumes_work_on_the_draining_node():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0, max_retirement=7200.0)
    pool.vm_started(node(1), SIZE)
    pool.advance(T0)
    pool.submit(Job("long", cpus=1, ram_mb=100, runtime=5000.0, submit_time=T0))
    pool.advance(T0)
    ticket = pool.drain(pool.poll().workers[0], DrainSchedule.GRACEFUL, "scale down")
    clock.advance(100)
    pool.submit(Job("new", cpus=2, ram_mb=100, runtime=100.0, submit_time=clock()))
    pool.advance(clock())
    assert pool.stats.started == 1 and pool.poll().demand[0].count == 1   # START is false
    pool.cancel_drain(ticket)                                              # instead of booting
    st = pool.startd("i-1")
    assert sorted(j.id for j, _ in st.running()) == ["long", "new"] and not st.draining
    run_until(clock, pool, T0 + 6000)
    s = pool.stats
    assert (s.completed, s.killed, s.drains_cancelled) == (2, 0, 1)


def test_fast_drain_and_escalation_count_drain_badput():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0, max_retirement=7200.0,
                            vacate_time=60.0)
    for i in (1, 2):
        pool.vm_started(node(i), SIZE)
    pool.advance(T0)
    for jid in ("a", "b"):
        pool.submit(Job(jid, cpus=4, ram_mb=100, runtime=9000.0, submit_time=T0))
    pool.advance(T0)
    w1, w2 = sorted(pool.poll().workers, key=lambda w: w.cloud_id)
    clock.advance(100)
    t1 = pool.drain(w1, DrainSchedule.FAST, "forced")
    t2 = pool.drain(w2, DrainSchedule.GRACEFUL, "forced")
    clock.advance(100)
    pool.escalate(t2, DrainSchedule.FAST)
    run_until(clock, pool, clock() + 60)
    assert pool.confirm_drained(t1).ok and pool.confirm_drained(t2).ok
    s = pool.stats
    assert s.killed_by_drain == 2
    assert s.drain_badput == 4 * 100 + 4 * 200
    assert (s.drains_started, s.drains_escalated, s.drains_completed) == (2, 1, 2)
    pool.poll()
    d = pool.draining_stats()
    assert d.badput == s.drain_badput and d.unclaimed > 0


def test_drain_badput_of_the_startds_reaches_the_metrics():
    # the real HTCondor adapter reads TotalMachineDrainingBadput from the simulated startds' ads
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0, max_retirement=7200.0,
                            vacate_time=60.0)
    pool.vm_started(node(1), SIZE)
    pool.advance(T0)
    pool.submit(Job("a", cpus=4, ram_mb=100, runtime=9000.0, submit_time=T0))
    pool.advance(T0)
    metrics = Metrics(sizes=(SIZE,))
    (w1,) = pool.poll().workers
    metrics.observe_draining(pool.draining_stats())
    clock.advance(300)
    ticket = pool.drain(w1, DrainSchedule.FAST, "forced")
    run_until(clock, pool, clock() + 60)
    assert pool.confirm_drained(ticket).ok
    pool.poll()
    metrics.observe_draining(pool.draining_stats())
    assert metrics.registry.get_sample_value("nodemanager_drain_badput_seconds_total") == 4 * 300


def test_collector_copy_refreshes_on_change_and_on_the_update_interval():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0, update_interval=300.0)
    pool.vm_started(node(1), SIZE)
    pool.advance(T0)
    first = pool.poll().workers[0]
    clock.advance(100)
    assert pool.poll().workers[0] is first                        # nothing changed
    pool.submit(Job("a", cpus=1, ram_mb=100, runtime=50.0, submit_time=clock()))
    pool.advance(clock())
    changed = pool.poll().workers[0]
    assert changed.running_jobs == 1 and changed.last_heard == T0 + 100
    clock.advance(300)
    later = pool.poll().workers[0]
    assert later.running_jobs == 0 and later.last_heard == T0 + 400


def test_next_event_time_drives_a_whole_replay():
    clock, pool = make_pool(join_delay=30.0, negotiation_interval=20.0)
    for i in (1, 2, 3):
        pool.vm_started(node(i), SIZE)
    for k in range(200):
        pool.submit(Job(str(k), cpus=1 + k % 3, ram_mb=500, runtime=100.0 + 37 * (k % 11), submit_time=T0))
    run_until(clock, pool, T0 + 10 ** 6)
    s = pool.stats
    assert (s.completed, s.idle, s.running) == (200, 0, 0)
    assert pool.next_event_time() is None
    cores = sum((1 + k % 3) * (100.0 + 37 * (k % 11)) for k in range(200))
    assert s.used == cores
    # 12 cores: the makespan cannot beat the work divided by the cores
    assert max(w for w in pool.job_waits()) >= cores / 12 - 1000


def test_a_job_never_starts_before_it_was_submitted():
    clock, pool = make_pool(join_delay=0.0, negotiation_interval=60.0)
    pool.vm_started(node(1), SIZE)
    pool.submit(Job("early", cpus=1, ram_mb=100, runtime=10.0, submit_time=T0))
    clock.advance(170)                            # the pool was not advanced meanwhile
    pool.submit(Job("late", cpus=1, ram_mb=100, runtime=10.0, submit_time=clock()))
    run_until(clock, pool, T0 + 1000)
    assert sorted(pool.job_waits()) == [10.0, 60.0]


def test_replays_a_real_trace_window_with_every_job_accounted(traces_dir):
    """Ten days of the LPC-EGEE trace on four 8-core nodes, event-driven as the simulator runs it."""
    from nodemanager.sim.swf import read_jobs

    swf, _ = read_jobs(str(traces_dir / "LPC-EGEE-2004-1.2-cln.swf.gz"), days=10)
    clock = ManualClock(0.0)
    pool = SimPool(clock, join_delay=0.0, negotiation_interval=60.0)
    size = Size("m8", cores=8, ram_mb=32000)
    for i in range(4):
        pool.vm_started(CloudNode(f"i-{i}", f"n{i}", "m8", 0.0), size)
    jobs = [Job(str(j.id), cpus=j.cores, ram_mb=1000, runtime=j.runtime, submit_time=j.submit) for j in swf]
    k = steps = 0
    while True:
        t_pool = pool.next_event_time()
        t_job = jobs[k].submit_time if k < len(jobs) else None
        if t_pool is None and t_job is None:
            break
        t = min(x for x in (t_pool, t_job) if x is not None)
        clock.advance(max(0.0, t - clock()))
        pool.advance(t)
        while k < len(jobs) and jobs[k].submit_time <= t:
            pool.submit(jobs[k])
            k += 1
        steps += 1
        if steps % 50 == 0:                      # the port's view agrees with the startds
            busy = {w.cloud_id: w.cpus_busy for w in pool.poll().workers}
            assert busy == {f"i-{i}": 8 - pool.startd(f"i-{i}").free_cpus for i in range(4)}
    s = pool.stats
    assert len(jobs) > 4000
    assert (s.submitted, s.completed, s.killed, s.idle, s.running) == (len(jobs), len(jobs), 0, 0, 0)
    assert s.used == pytest.approx(sum(j.cpus * j.runtime for j in jobs))
    assert min(pool.job_waits()) >= 0.0


def test_a_restarted_startd_loses_our_drain_and_is_never_confirmed():
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0)
    pool.vm_started(node(1), SIZE)
    pool.advance(T0)
    pool.submit(Job("a", cpus=1, ram_mb=100, runtime=5000.0, submit_time=T0))
    pool.advance(T0)
    ticket = pool.drain(pool.poll().workers[0], DrainSchedule.FAST, "forced")
    clock.advance(10)
    pool.restart_startd("i-1")
    st = pool.startd("i-1")
    assert not st.draining and st.daemon_start == clock()
    st.drain(clock(), "graceful", reason="Defrag pool")          # same id "1", someone else's
    clock.advance(10)
    c = pool.confirm_drained(ticket)
    assert not c.ok and "not ours" in c.reason
    assert pool.stats.killed_by_drain == 1                       # the fast drain's kill only


def test_only_jobs_a_graceful_drain_evicts_at_its_retirement_end_count_as_evicted():
    """Of four graceful drains on nodes whose jobs outlive the 2 h retirement (but the last's):
    the one left alone evicts its job; one escalated and one destroyed kill theirs otherwise;
    the last one's job ends first and is not killed."""
    clock, pool = make_pool(negotiation_interval=0.0, join_delay=0.0, max_retirement=7200.0,
                            vacate_time=60.0)
    for i in (1, 2, 3, 4):
        pool.vm_started(node(i), SIZE)
    pool.advance(T0)
    for jid, runtime in (("a", 9000.0), ("b", 9000.0), ("c", 9000.0), ("d", 3000.0)):
        pool.submit(Job(jid, cpus=4, ram_mb=100, runtime=runtime, submit_time=T0))
    pool.advance(T0)
    w1, w2, w3, w4 = sorted(pool.poll().workers, key=lambda w: w.cloud_id)
    clock.advance(100)
    tickets = [pool.drain(w, DrainSchedule.GRACEFUL, "consolidate") for w in (w1, w2, w3, w4)]
    clock.advance(100)
    pool.escalate(tickets[1], DrainSchedule.FAST)
    pool.vm_stopped("i-3")
    run_until(clock, pool, T0 + 7200 - 61)
    assert (pool.stats.evicted, pool.stats.killed) == (0, 2)     # the escalated and the destroyed
    run_until(clock, pool, T0 + 8000)
    s = pool.stats
    assert (s.killed, s.evicted, s.completed) == (3, 1, 1)
    assert pool.confirm_drained(tickets[0]).ok
