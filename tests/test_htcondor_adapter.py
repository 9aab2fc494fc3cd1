"""The HTCondor adapter's polling against the simulated collector: workers, demand, collector lag."""

from __future__ import annotations

import logging

import classad2
import htcondor2
import pytest

from nodemanager.model import Size
from nodemanager.scheduler.htcondor import PILOT_ATTRIBUTES, HTCondorScheduler
from nodemanager.scheduler.htcondor_ads import demand_from_jobs, worker_from_ad
from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings
from nodemanager.scheduler.htcondor_classify import classify_htcondor
from nodemanager.scheduler.htcondor_match import HTCondorMatcher
from nodemanager.scheduler.port import SchedulerError
from policy_matrix.vocabulary import BUSY, IDLE


def test_poll_reports_each_startd_once_with_its_pslot_ad(condor):
    condor.add("a.example")
    condor.add("b.example", cpus=4)
    condor.run_job("b.example", cpus=3)
    poll = condor.htc.poll()
    workers = {w.name: w for w in poll.workers}
    assert set(workers) == {"a.example", "b.example"}
    b = workers["b.example"]
    assert (b.scheduler, b.state, b.cloud_id) == ("htcondor", "Unclaimed/Idle p-slot, 1 dynamic slot busy", "i-b.example")  # the p-slot with its busy dynamic slot
    assert (b.cpus, b.cpus_busy, b.running_jobs) == (4, 3, 1)
    # the bare IP pairs with the VM's private address; drains use the full MyAddress from the ad
    assert b.address == "127.0.0.1"
    assert b.ad["MyAddress"] == condor.sim.startd("b.example").address
    assert b.registered_at == condor.clock() and b.last_heard == condor.clock()
    assert b.ad["NumDynamicSlots"] == 1 and b.ad["ChildState"] == ["Claimed"]
    # the core's classifier reads these ads: a p-slot with a dynamic slot is busy, not idle
    assert classify_htcondor(b.ad, condor.clock()).state == BUSY
    assert classify_htcondor(workers["a.example"].ad, condor.clock()).state == IDLE


def test_poll_is_one_collector_query_with_a_projection(condor):
    seen = []

    class Recording(Htcondor2Bindings):
        def query_slots(self, constraint, projection):
            seen.append((constraint, tuple(projection)))
            return super().query_slots(constraint, projection)

    condor.add("a.example")
    condor.add("b.example")
    htc = HTCondorScheduler(Recording(module=condor.sim), clock=condor.clock,
                            extra_attributes=["MyPolicyAttr"])
    htc.poll()
    assert len(seen) == 1
    constraint, projection = seen[0]
    assert constraint == "PartitionableSlot =?= true"
    for attr in ("MyAddress", "Name", "Machine", "State", "Activity", "NumDynamicSlots", "Draining",
                 "DrainingRequestId", "DaemonStartTime", "LastHeardFrom", "MyCurrentTime",
                 "ExpectedMachineGracefulDrainingBadput", "TotalMachineDrainingBadput",
                 "CloudInstanceID", "MyPolicyAttr", *PILOT_ATTRIBUTES):
        assert attr in projection
    # the projection is applied: attributes outside it do not reach the worker ad
    ad = htc.poll().workers[0].ad
    assert "SlotID" not in ad and "MaxJobRetirementTime" in ad


def test_pilot_attributes_reach_the_worker_ad(condor):
    condor.add("p.example", attrs={"CloudInstanceID": "i-p", "LAST_EXP_JOB_END": 1_000_500,
                                   "USED_FRACTION1k": 512, "CAN_POSTPONE_LAST_JOB": False})
    ad = condor.worker("p.example").ad
    assert (ad["LAST_EXP_JOB_END"], ad["USED_FRACTION1k"], ad["CAN_POSTPONE_LAST_JOB"]) == (1_000_500, 512, False)


def test_demand_groups_idle_jobs_by_request(condor):
    condor.sim.submit(RequestCpus=1, RequestMemory=2048, RequestDisk=1024 * 1024)
    condor.sim.submit(RequestCpus=1, RequestMemory=2048, RequestDisk=1024 * 1024)
    condor.sim.submit(RequestCpus=4, RequestMemory=classad2.ExprTree("2 * 4000"))   # an expression
    condor.sim.submit(RequestCpus=8, RequestMemory=100, JobStatus=2)                # running: no demand
    demand = {(d.cpus, d.ram_mb, d.scratch_mb): d.count for d in condor.htc.poll().demand}
    assert demand == {(1, 2048, 1024): 2, (4, 8000, 0): 1}


def test_demand_defaults_for_missing_requests():
    (d,) = demand_from_jobs([{"QDate": 5}, {"RequestCpus": 1, "QDate": 3}])
    assert (d.cpus, d.ram_mb, d.count, d.oldest_submit) == (1, 0, 2, 3)



def test_with_runtime_prediction_idle_jobs_are_grouped_by_owner_with_and_without_sizes():
    jobs = [{"RequestCpus": 1, "Owner": "alice", "QDate": 3, "AutoClusterId": 4, "GlobalJobId": "ap#1.0#1"},
            {"RequestCpus": 1, "Owner": "bob", "QDate": 4, "AutoClusterId": 4, "GlobalJobId": "ap#2.0#1"},
            {"RequestCpus": 1, "Owner": "alice", "QDate": 5, "AutoClusterId": 4, "GlobalJobId": "ap#1.1#1"}]
    assert [(d.user, d.count) for d in demand_from_jobs(jobs)] == [(None, 3)]
    assert {(d.user, d.count) for d in demand_from_jobs(jobs, by_owner=True)} == {("alice", 2), ("bob", 1)}
    matched = HTCondorMatcher((Size("small", 2, 4096, price=0.1),), by_owner=True).demand(jobs)
    assert {(d.user, d.count) for d in matched} == {("alice", 2), ("bob", 1)}

def test_collector_copy_lags_state_changes_by_the_update_latency():
    from tests.fixtures.htcondor import CondorWorld

    world = CondorWorld(change_delay=30.0)
    world.add("a.example")
    assert world.worker("a.example").running_jobs == 0
    world.run_job("a.example")
    world.advance(10)
    assert world.worker("a.example").running_jobs == 0       # the collector has not heard yet
    world.advance(25)
    w = world.worker("a.example")
    assert w.running_jobs == 1 and w.last_heard == world.clock()


def test_collector_refreshes_on_the_update_interval(condor):
    condor.add("a.example", max_retirement=3600.0)
    condor.run_job("a.example")
    first = condor.worker("a.example")
    condor.advance(200)
    same = condor.worker("a.example")                # no state change: the same copy
    assert same.last_heard == first.last_heard
    assert same.ad["ExpectedMachineGracefulDrainingBadput"] == first.ad["ExpectedMachineGracefulDrainingBadput"]
    condor.advance(100)
    fresh = condor.worker("a.example")
    assert fresh.last_heard == first.last_heard + 300
    assert fresh.ad["ExpectedMachineQuickDrainingBadput"] == first.ad["ExpectedMachineQuickDrainingBadput"] + 300


def test_ads_of_a_killed_vm_linger_until_classad_lifetime(condor):
    condor.add("gone.example")
    condor.add("clean.example")
    condor.htc.poll()
    condor.sim.vanish("gone.example")
    condor.sim.vanish("clean.example", clean=True)
    condor.advance(899)
    names = {w.name for w in condor.htc.poll().workers}
    assert names == {"gone.example"}
    assert condor.worker("gone.example").last_heard == condor.clock() - 899
    condor.advance(1)
    assert condor.htc.poll().workers == ()


def test_collector_failure_is_a_scheduler_error(condor):
    condor.add("a.example")
    condor.sim.collector_down = True
    with pytest.raises(SchedulerError, match="Failed communication with collector"):
        condor.htc.poll()


def test_a_slot_ad_without_a_name_is_skipped_with_a_warning(condor, caplog):
    ads = [{"Name": "slot1@ok.example", "Machine": "ok.example", "State": "Unclaimed"},
           {"State": "Unclaimed", "Cpus": 4}]
    with caplog.at_level(logging.WARNING):
        workers = condor.htc.workers_from_ads(ads)
    assert [w.name for w in workers] == ["ok.example"]
    assert "ignoring a bad slot ad: slot ad without Name or Machine" in caplog.text


# -- hostile values ----------------------------------------------------------

UNUSABLE = ['real("INF")', 'real("-INF")', 'real("NaN")', "1e400", "-5", 'int(real("INF"))', "true", '"x"',
            "undefined", "error", "1/0", "size(1)", "{1, 2}"]


@pytest.mark.parametrize("expr", UNUSABLE)
@pytest.mark.parametrize("attr", ["RequestCpus", "RequestMemory", "RequestDisk"])
def test_an_idle_job_with_an_unusable_request_is_left_out_and_the_poll_succeeds(condor, caplog, attr, expr):
    condor.add("a.example")
    condor.sim.submit(RequestCpus=1, RequestMemory=2048)
    condor.sim.submit(**{"RequestCpus": 2, "RequestMemory": 1024, attr: classad2.ExprTree(expr)})
    with caplog.at_level(logging.WARNING, logger="nodemanager.scheduler.htcondor"):
        poll = condor.htc.poll()
        assert [(d.cpus, d.ram_mb, d.count) for d in poll.demand] == [(1, 2048, 1)]
        assert [w.name for w in poll.workers] == ["a.example"]
        (p,) = poll.problems
        assert (p.kind, p.name, p.field) == ("job", "2.0", attr)
        assert caplog.text.count(f"htcondor poll: job 2.0: field '{attr}' ") == 1
        assert "the job is left out of demand" in caplog.text
        condor.htc.poll()
        assert len(caplog.records) == 1                  # one warning per job per hour


@pytest.mark.parametrize("expr", UNUSABLE + ["10000000000", "2147483648"])
@pytest.mark.parametrize("attr", ["Cpus", "TotalSlotCpus", "Memory", "NumDynamicSlots"])
def test_a_startd_with_an_unusable_count_is_kept_and_left_alone(condor, attr, expr):
    """Not dropped (its VM would turn unpaired and be shut down as a broken boot), not idle (it
    might run jobs), no capacity (a Cpus of INF would absorb all demand)."""
    from nodemanager.core.classify import classify_worker

    condor.add("ok.example")
    condor.add("odd.example", attrs={"CloudInstanceID": "i-odd", attr: classad2.ExprTree(expr)})
    condor.sim.submit(RequestCpus=1)
    poll = condor.htc.poll()
    workers = {w.name: w for w in poll.workers}
    odd = workers["odd.example"]
    assert (odd.cloud_id, odd.cpus, odd.cpus_busy, odd.ram_mb) == ("i-odd", 0, 0, 0)
    assert attr not in odd.ad
    assert classify_worker(odd, condor.clock(), 600.0).state == BUSY
    assert classify_worker(workers["ok.example"], condor.clock(), 600.0).state == IDLE
    assert [(p.kind, p.name, p.field) for p in poll.problems] == [("node", "slot1@odd.example", attr)]
    assert sum(d.count for d in poll.demand) == 1


def test_an_ad_that_cannot_be_read_is_a_scheduler_error_naming_it(condor):
    class Broken(dict):
        """An ad whose reading fails (no binding makes one; the adapter must still name it)."""

        def __contains__(self, key):
            raise RuntimeError("lost the ad")

        def get(self, key, default=None):
            if key.startswith("Request"):
                raise RuntimeError("lost the ad")
            return super().get(key, default)

    class Bindings(Htcondor2Bindings):
        def query_idle_jobs(self, projection):
            return [Broken(ClusterId=7, ProcId=1)]

    condor.add("a.example")
    htc = HTCondorScheduler(Bindings(module=condor.sim), clock=condor.clock)
    with pytest.raises(SchedulerError, match=r"^job 7\.1: cannot read its ad \(RuntimeError: lost the ad\)"):
        htc.poll()
    with pytest.raises(SchedulerError, match=r"^slot slot1@b: cannot read its ad") as exc:
        htc.workers_from_ads([Broken(Name="slot1@b", Machine="b")])
    assert exc.value.node == "slot1@b"


def test_worker_from_ad_names_the_slot_when_the_ad_is_unusable():
    with pytest.raises(ValueError, match="without Name or Machine"):
        worker_from_ad({"State": "Unclaimed"})


def test_bindings_speak_htcondor2_types(condor):
    """The simulated module checks arguments as htcondor2 does; so does the real one."""
    condor.add("a.example")
    location = classad2.ClassAd({"MyAddress": condor.sim.startd("a.example").address})
    with pytest.raises(TypeError):
        condor.sim.Startd({"MyAddress": "x"})
    with pytest.raises(TypeError):
        condor.sim.Startd(location).drainJobs(check_expr=classad2.ExprTree("true"))
    with pytest.raises(TypeError):
        htcondor2.Startd({"MyAddress": "x"})
    assert [t.name for t in htcondor2.DrainType] == ["Graceful", "Quick", "Fast"]
    assert htcondor2.CompletionType.Nothing == 0


def test_production_bindings_on_the_real_wheel_report_an_unreachable_pool():
    """The real htcondor2 module, a collector and a startd that are not there: clean errors, fast."""
    import socket

    from nodemanager.model import Worker
    from nodemanager.scheduler.port import DrainRefused, DrainSchedule
    from nodemanager.configuration.settings import SchedulerSettings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    htc = HTCondorScheduler.from_settings(SchedulerSettings(kind="htcondor", options={
        "collector": f"127.0.0.1:{port}", "drain_check": "TotalSlotCpus <= 64"}))
    with pytest.raises(SchedulerError, match="Failed communication with collector"):
        htc.poll()
    worker = Worker(name="x.example", scheduler="htcondor",
                    ad={"MyAddress": f"<127.0.0.1:{port}>", "Name": "slot1@x.example", "NumDynamicSlots": 0})
    with pytest.raises(DrainRefused, match="cannot be queried"):
        htc.drain(worker, DrainSchedule.GRACEFUL, "idle exceeded")
    assert htc.draining_stats().refused == 1


def test_a_hung_collector_fails_the_poll_after_query_timeout(condor):
    condor.add("a.example")
    condor.sim.collector_hung = True
    before = condor.clock()
    with pytest.raises(SchedulerError, match="collector query failed"):
        condor.htc.poll()
    assert condor.clock() - before == 60.0


def test_finished_jobs_come_from_the_history_since_the_last_poll_and_bad_ads_are_named(condor, caplog):
    asked = []
    history = [{"GlobalJobId": "s#1.0#1", "Owner": "alice", "Cmd": "/bin/fit", "CompletionDate": 2000,
                "JobCurrentStartDate": 1400, "AllowedJobDuration": 3600},
               {"ClusterId": 2, "ProcId": 0, "Owner": "bob", "CompletionDate": 2000, "RemoteWallClockTime": 90},
               {"ClusterId": 3, "ProcId": 0, "Cmd": "/bin/x", "CompletionDate": 2000, "RemoteWallClockTime": 5},
               {"ClusterId": 4, "ProcId": 1, "Owner": "carol", "CompletionDate": "soon"}]

    class Bindings(Htcondor2Bindings):
        def query_history(self, constraint, projection, match, stop):
            asked.append((constraint, match, stop))
            if len(asked) == 3:
                raise htcondor2.HTCondorException("schedd went away")
            return history if len(asked) == 2 else []

    now = condor.clock()
    htc = HTCondorScheduler(Bindings(module=condor.sim), clock=condor.clock, finished_limit=50)
    assert htc.poll().finished == ()
    for ad in history:
        ad["CompletionDate"] = now + 5 if ad["CompletionDate"] == 2000 else ad["CompletionDate"]
        if "JobCurrentStartDate" in ad:
            ad["JobCurrentStartDate"] = now - 595
    with caplog.at_level(logging.WARNING, logger="nodemanager.scheduler.htcondor"):
        finished = htc.poll().finished
        assert htc.poll().finished == ()            # a history that cannot be read: none this poll
    assert [(f.job.job_id, f.job.user, f.job.name, f.end - f.job.start, f.job.limit) for f in finished] == [
        ("s#1.0#1", "alice", "/bin/fit", 600.0, 3600.0), ("2.0", "bob", None, 90.0, None)]
    assert asked[0] == (f"JobStatus == 4 && CompletionDate >= {int(now)}", 50,
                        f"EnteredCurrentStatus < {int(now) - 600}")
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("htcondor history: job 3.0: no Owner") for line in lines)
    assert any(line.startswith("htcondor history: job 4.1: no CompletionDate") for line in lines)
    assert any("schedd history query failed (schedd went away)" in line for line in lines)


def test_a_startd_whose_dynamic_slots_cannot_all_be_named_names_no_job_and_the_slot_is_told(condor):
    """Runtime prediction on: a startd's running jobs are named only when every dynamic slot its
    partitionable slot counts was read and each running one names its owner and start; else it
    names none (its ends stay unknown) and the unusable slot is a problem naming slot and job."""
    def pslot(machine: str, dslots: int) -> dict:
        return {"Name": f"slot1@{machine}", "Machine": machine, "State": "Unclaimed", "Activity": "Idle",
                "PartitionableSlot": True, "Cpus": 4 - dslots, "TotalSlotCpus": 4, "NumDynamicSlots": dslots}

    def dslot(machine: str, n: int, **job: object) -> dict:
        ad = {"Name": f"slot1_{n}@{machine}", "Machine": machine, "State": "Claimed", "Activity": "Busy",
              "DynamicSlot": True, "SlotType": "Dynamic", "Cpus": 1, "GlobalJobId": f"s#{n}.0#1",
              "RemoteOwner": "alice@site", "JobStart": 1000 + n}
        ad.update(job)
        return {k: v for k, v in ad.items() if v is not None}

    ads = [pslot("a", 2), dslot("a", 1), dslot("a", 2, Cmd="/bin/fit", AllowedJobDuration=7200),   # named
           pslot("b", 2), dslot("b", 1),                               # one slot not in the collector yet
           pslot("c", 2), dslot("c", 1), dslot("c", 2, JobStart=None),  # no start
           pslot("d", 1), dslot("d", 1, GlobalJobId=None),             # claimed between jobs: runs nothing
           dslot("z", 1)]                                              # not one of our startds
    htc = HTCondorScheduler(Htcondor2Bindings(module=condor.sim), clock=condor.clock, finished_limit=10)
    problems: list = []
    workers = {w.name: w for w in htc.workers_from_ads(ads, problems)}
    assert sorted(workers) == ["a", "b", "c", "d"]
    assert [(j.job_id, j.user, j.start, j.name, j.limit) for j in workers["a"].jobs] == [
        ("s#1.0#1", "alice", 1001.0, None, None), ("s#2.0#1", "alice", 1002.0, "/bin/fit", 7200.0)]
    assert workers["b"].jobs == workers["c"].jobs == workers["d"].jobs == ()
    # a job's own limit is its guaranteed end (as SLURM's time limit); one without has none known
    assert workers["a"].job_end_times == (1002.0 + 7200,) and workers["b"].job_end_times == ()
    assert workers["a"].cpus == 4 and workers["a"].running_jobs == 2   # the dynamic slots are not summed in
    assert [str(p) for p in problems] == [
        "node slot1_2@c: field 'JobStart' is missing or not a time for job s#2.0#1: None; "
        "the startd's job ends stay unknown"]
