"""The HTCondor adapter's contract, held against the simulated startd and a real one (same tests).

Each test runs twice (``[sim]``, ``[real]``: :mod:`tests.fixtures.condor_contract`). The real side
needs HTCondor's daemons (scripts/install-htcondor); without them it is skipped, except in CI.
"""

from __future__ import annotations

import pytest

from nodemanager.cycle.controller_inputs import build_in_flight
from nodemanager.model import CloudNode
from nodemanager.scheduler.htcondor_attributes import PILOT_ATTRIBUTES, SLOT_ATTRIBUTES
from nodemanager.scheduler.htcondor_drain import drain_check_expression
from nodemanager.scheduler.port import DrainRefused, DrainSchedule, SchedulerError
import policy_matrix
from nodemanager.configuration.settings import CoreSettings
from nodemanager.core import plan
from nodemanager.core.retirement import would_evict
from nodemanager.model import Size, Snapshot
from tests.fixtures.condor_contract import JOB_DEPENDENT, real_pool, startds  # noqa: F401 - fixtures

GRACEFUL, QUICK, FAST = DrainSchedule.GRACEFUL, DrainSchedule.QUICK, DrainSchedule.FAST
SIZE = Size("small", cores=2, ram_mb=2048, price=0.1)

# what the adapter reads that a real startd's p-slot does not publish of itself (docs/htcondor.md,
# "What one poll reads"): the design's fast-drain estimates, the dynamic slots' flag, and what the
# site's crons or the controller set
NOT_FROM_A_STARTD = {"ExpectedMachineFastDrainingCompletion", "ExpectedMachineFastDrainingBadput",
                     "DynamicSlot", "ReclaimNoticeDeadline", "NodeManagerKeepRank", *PILOT_ATTRIBUTES}


def test_an_idle_startd_is_drained_and_confirmed(startds):
    name = startds.add()
    w = startds.worker(name)
    assert (w.state, w.classified.state, w.cloud_id) == ("Unclaimed/Idle", "idle", f"i-{name}")
    assert "DaemonStartTime" not in drain_check_expression(w.ad, GRACEFUL)
    ticket = startds.htc.drain(w, GRACEFUL, "idle exceeded")
    assert ticket.request_id == "1" and ticket.reason.startswith("nodemanager ")
    c = startds.until(lambda: (lambda c: c if c.ok else None)(startds.htc.confirm_drained(ticket)),
                      "our drain confirmed")
    assert "drained by our request 1" in c.reason
    w = startds.until(lambda: (lambda w: w if w.draining else None)(startds.worker(name)), "drain polled")
    assert (w.state, w.classified.state, w.drain_reason) == ("Drained/Idle", "down", ticket.reason)
    assert startds.htc.draining_stats().completed == 1


def test_a_job_that_claimed_the_startd_after_our_look_makes_the_startd_refuse(startds):
    name = startds.add()
    snapshot = startds.worker(name)                  # idle when the decision was made
    startds.run_job(name)                            # the negotiator matched a job meanwhile
    with pytest.raises(DrainRefused, match="became busy since the snapshot"):
        startds.htc.drain(snapshot, GRACEFUL, "idle exceeded")
    w = startds.worker(name)
    assert not w.draining and w.running_jobs == 1 and startds.jobs_running(name) == 1


def test_a_startd_that_denies_us_administrator_refuses_the_drain_as_a_denial(startds):
    """Not a passing refusal retried at the short backoff: the actuator probes it slowly and the
    page and the alert say "no permission"."""
    name = startds.add(deny_admin=True)
    with pytest.raises(SchedulerError, match="DRAIN_JOBS .ADMINISTRATOR. not granted") as err:
        startds.htc.drain(startds.worker(name), GRACEFUL, "idle exceeded")
    assert err.value.denied and not err.value.transient
    assert not startds.worker(name).draining


def test_our_drain_is_cancelled_and_the_startd_takes_jobs_again(startds):
    name = startds.add()
    ticket = startds.htc.drain(startds.worker(name), GRACEFUL, "idle exceeded")
    startds.htc.cancel_drain(ticket)
    w = startds.until(lambda: (lambda w: w if not w.draining else None)(startds.worker(name)), "drain gone")
    assert w.classified.state == "idle"
    startds.run_job(name)
    assert startds.htc.draining_stats().cancelled == 1


def test_a_drain_after_a_startd_restart_is_not_ours_though_its_id_is(startds):
    name = startds.add()
    ticket = startds.htc.drain(startds.worker(name), GRACEFUL, "idle exceeded")
    startds.restart(name)                            # our drain is gone; ids start again at 1
    assert startds.foreign_drain(name, "Defrag pool") == ticket.request_id
    c = startds.htc.confirm_drained(ticket)
    assert not c.ok and "not ours" in c.reason
    with pytest.raises(DrainRefused, match="not ours"):
        startds.htc.cancel_drain(ticket)
    with pytest.raises(DrainRefused, match="not ours"):
        startds.htc.escalate(ticket, FAST)
    w = startds.until(lambda: (lambda w: w if w.draining else None)(startds.worker(name)), "drain polled")
    assert w.drain_reason == "Defrag pool"                 # left alone
    assert w.classified.foreign_drain == "Defrag pool"


def test_a_graceful_drain_lets_the_job_run_and_fast_kills_it_as_drain_badput(startds):
    name = startds.add()
    startds.run_job(name)
    w = startds.worker(name)
    # the p-slot as condor_status shows it, with the dynamic slot that runs the job
    assert (w.state, w.classified.state) == ("Unclaimed/Idle p-slot, 1 dynamic slot busy", "busy")
    assert "1 dynamic slot busy: running jobs" in w.classified.why
    # the estimates a victim choice reads: graceful waits out the retirement, quick costs the run
    # (the real startd publishes them an update or two after the claim)
    w = startds.until(lambda: (lambda w: w if w.ad["ExpectedMachineGracefulDrainingCompletion"]
                               > w.ad["MyCurrentTime"] + 3000 else None)(startds.worker(name)),
                      "the graceful estimate waiting out the retirement")
    assert w.ad["ExpectedMachineQuickDrainingCompletion"] <= w.ad["MyCurrentTime"] + 600
    ticket = startds.htc.drain(w, GRACEFUL, "consolidation")
    w = startds.until(lambda: (lambda w: w if w.draining else None)(startds.worker(name)), "drain polled")
    assert w.state == "Drained/Retiring" and w.classified.state == "busy" and w.running_jobs == 1
    assert not startds.htc.confirm_drained(ticket).ok
    # HTCondor cannot soft-kill a retiring claim: "quick" is refused, never reported done
    with pytest.raises(DrainRefused, match="retire"):
        startds.htc.escalate(ticket, QUICK)
    assert startds.jobs_running(name) == 1
    startds.htc.escalate(ticket, FAST)
    startds.until(lambda: startds.htc.confirm_drained(ticket).ok, "our drain confirmed after fast")
    w = startds.until(lambda: (lambda w: w if w.ad.get("TotalMachineDrainingBadput") else None)(
        startds.worker(name)), "the startd's drain badput")
    assert w.drain_reason == ticket.reason           # the same drain, renewed
    stats = startds.htc.draining_stats()
    assert stats.escalated == 1 and stats.badput > 0
    if startds.real:                                 # what the adapter reads, against what the startd published
        assert set(SLOT_ATTRIBUTES) - startds.seen == NOT_FROM_A_STARTD


def test_a_graceful_drain_that_would_evict_at_once_is_not_started(startds):
    # HTCondor's default MAXJOBRETIREMENTTIME is 0: "graceful" would evict the job at once
    name = startds.add(retirement=None)
    startds.run_job(name)
    with pytest.raises(DrainRefused, match="MaxJobRetirementTime .* not above MachineMaxVacateTime"):
        startds.htc.drain(startds.worker(name), GRACEFUL, "consolidation")
    assert not startds.worker(name).draining and startds.jobs_running(name) == 1


def test_a_job_dependent_retirement_is_read_per_job_and_no_graceful_drain_evicts(startds):
    """MAXJOBRETIREMENTTIME gives a job that says it may be preempted none: the p-slot's own
    MaxJobRetirementTime (evaluated without a job) says 7200 s, yet a graceful drain would evict
    that job at once. Every drain we start (the core's, which reads the retirement end, and the
    operator's, which reaches only the adapter) is refused, and both jobs run on."""
    name = startds.add(retirement=JOB_DEPENDENT)
    startds.run_job(name)
    startds.run_job(name, preemptible=True)
    w = startds.until(lambda: (lambda w: w if w.running_jobs == 2 else None)(startds.worker(name)),
                      "both jobs running")
    assert w.ad["MaxJobRetirementTime"] == 7200
    assert "retirement has run out" in (would_evict(w, w.last_heard) or "")
    with pytest.raises(DrainRefused, match="evict a job at once"):
        startds.htc.drain(w, GRACEFUL, "operator")
    assert not startds.worker(name).draining and startds.jobs_running(name) == 2


def test_a_startd_advertising_another_vms_instance_id_holds_the_vm_of_its_name(startds):
    """A startd whose ``CloudInstanceID`` is wrong (another VM's), running a job on the VM that
    carries its name: past boot grace the VM is unpaired and the matrix says START_SHUTDOWN, but
    the plan holds it (``id_conflict``) and destroys nothing."""
    name = startds.add(cloud_id="i-0anothervm000001")
    startds.run_job(name)
    w = startds.worker(name)
    now = w.last_heard
    vm = CloudNode(id="i-0thisvm00000001", name=name, size=SIZE.name, launched_at=w.registered_at - 60)
    snap = Snapshot(now=now, polled_at={"cloud": now, "scheduler": now}, cloud_nodes=(vm,), workers=(w,))
    p = plan(snap, CoreSettings(sizes=(SIZE,), boot_grace=30.0), policy_matrix.load_default())
    [e] = p.nodes
    assert (e.matrix_action.value, e.blocked_by, p.items) == ("START_SHUTDOWN", "id_conflict", ())
    assert "says it is instance i-0anothervm000001" in e.reason


def test_a_foreign_drain_is_left_alone(startds):
    name = startds.add()
    startds.foreign_drain(name, "Defrag pool")
    w = startds.until(lambda: (lambda w: w if w.draining else None)(startds.worker(name)), "drain polled")
    assert w.classified.foreign_drain == "Defrag pool"
    with pytest.raises(DrainRefused, match="already draining"):
        startds.htc.drain(w, GRACEFUL, "idle exceeded")


def test_a_dead_startds_lingering_drain_is_no_drain_in_flight(startds):
    name = startds.add()
    ticket = startds.htc.drain(startds.worker(name), QUICK, "idle exceeded")   # a quick drain, confirmed too
    startds.until(lambda: startds.htc.confirm_drained(ticket).ok, "our drain confirmed")
    startds.until(lambda: startds.worker(name).state == "Drained/Idle", "the drained ad in the collector")
    startds.kill(name)                               # the VM died: its ads stay in the collector
    poll = startds.htc.poll()
    [w] = [w for w in poll.workers if w.name == name]
    assert w.draining and w.drain_reason == ticket.reason
    other = CloudNode(id="i-other", name="other", size="s", state="running", launched_at=0.0)
    assert build_in_flight([], poll, listed=[other]) == ()
    alive = CloudNode(id=f"i-{name}", name=name, size="s", state="running", launched_at=0.0)
    assert [f.action for f in build_in_flight([], poll, listed=[alive])] == ["drain"]


def test_an_unchanged_startd_is_polled_as_the_very_same_worker_and_a_changed_one_anew(startds):
    """The controller knows an unchanged node by identity (cycle/plan_reuse.py): a poll hands
    back the last poll's worker while the collector's ad of the startd is equal (no update came
    between the polls), a new one once it changed (a job started)."""
    name = startds.add()
    first, again = startds.until(lambda: (lambda a, b: (a, b) if a.ad == b.ad else None)(
        startds.worker(name), startds.worker(name)), "two polls between two updates of the ad")
    assert again is first
    startds.run_job(name)
    busy = startds.until(lambda: (lambda w: w if w.running_jobs == 1 else None)(startds.worker(name)),
                         "the job in the collector's ad")
    assert busy is not first and (first.classified.state, busy.classified.state) == ("idle", "busy")


# ---------------------------------------------------------------- real daemons only


@pytest.fixture
def real(real_pool):  # noqa: F811 - the module's pool
    from tests.fixtures.condor_contract import RealStartds

    side = RealStartds(real_pool)
    yield side
    side.close()


@pytest.mark.htcondor
@pytest.mark.slow
def test_a_machine_with_two_partitionable_slots_is_one_worker_with_both(real):
    name = real.add(cpus=4, pslots=2)                # SLOT_TYPE_1/2, each 2 cores, partitionable
    assert len(real.pool.slots(f'Machine == "{name}" && PartitionableSlot =?= true')) == 2
    real.run_job(name, cpus=2)                       # fills one of the two slots
    # the drain's check compares the startd's cost estimates with ours: wait until they count the job
    w = real.until(lambda: (lambda w: w if (w.ad.get("ExpectedMachineQuickDrainingBadput") or 0) > 0 else None)(
        real.worker(name)), "the estimates counting the job")
    assert (w.cpus, w.cpus_busy, w.running_jobs) == (4, 2, 1)
    assert (w.state, w.classified.state) == ("Unclaimed/Idle p-slot, 1 dynamic slot busy", "busy")
    ticket = real.htc.drain(w, DrainSchedule.FAST, "consolidation")
    real.until(lambda: real.htc.confirm_drained(ticket).ok, "both slots drained")
    # a p-slot's ad may reach the collector a little after its dynamic slot's (still Retiring)
    w = real.until(lambda: (lambda w: w if w.running_jobs == 0 and w.state == "Drained/Idle" else None)(
        real.worker(name)), "the drained machine polled")
    assert (w.cpus, w.draining, w.drain_reason) == (4, True, ticket.reason)


@pytest.mark.htcondor
def test_demand_from_the_real_schedd_is_stable_across_polls(real):
    from nodemanager.model import Size
    from nodemanager.scheduler.htcondor import HTCondorScheduler
    from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings

    sizes = [Size(name="small", cores=2, ram_mb=2048, price=0.1)]
    htc = HTCondorScheduler(Htcondor2Bindings(real.pool.collector), sizes=sizes)
    real.pool.submit(3600, count=3, cpus=8, memory=1000, extra='requirements = Machine == "nowhere"')
    real.pool.submit(3600, count=2, cpus=1, memory=500, extra='requirements = Machine == "nowhere"')
    real.pool.submit(3600, cpus=2, memory=1500, extra="request_gpus = 1\nrequest_disk = 4 GB")
    polls = [real.until(lambda: (lambda p: p if sum(d.count for d in p.demand) >= 6 else None)(htc.poll()),
                        "6 idle jobs in demand")]
    first = _server_time(real)                       # the schedd stamps each reply with its time
    real.until(lambda: _server_time(real) != first, "the schedd's next second")
    polls.append(htc.poll())
    for p in polls:
        big = [d for d in p.demand if d.cpus == 8]
        assert big and sum(d.count for d in big) >= 3 and all(d.ram_mb == 1000 for d in big)
        # RequestGPUs and RequestDisk (KiB) as the schedd gives them; no size has a GPU
        [gpu] = [d for d in p.demand if d.gpus]
        assert (gpu.cpus, gpu.ram_mb, gpu.gpus, gpu.scratch_mb, gpu.sizes) == (2, 1500, 1, 4096, frozenset())
        assert "GPUs" in (gpu.unmatched or ""), gpu.unmatched
    # the same jobs, the same unmatched signatures: nothing that changes per reply is in them
    assert ({d.unmatched for d in polls[0].demand if d.unmatched}
            == {d.unmatched for d in polls[1].demand if d.unmatched} != set())


def _server_time(real) -> int:
    import htcondor2

    schedd = htcondor2.Schedd(htcondor2.Collector(real.pool.collector).locate(htcondor2.DaemonType.Schedd))
    return int(schedd.query(constraint="JobStatus == 1", projection=["ClusterId"], limit=1)[0]["ServerTime"])
