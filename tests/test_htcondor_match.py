"""HTCondor demand with real matchmaking: idle jobs from the simulated schedd,
matched with classad2 against each size's offline machine ad, through the production adapter."""

from __future__ import annotations

import classad2
import pytest

from nodemanager.model import Demand, Size
from nodemanager.scheduler.demand_match import match_demand, signature_of
from nodemanager.scheduler.htcondor import HTCondorScheduler
from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings
from nodemanager.scheduler.htcondor_match import HTCondorMatcher, size_ad
from nodemanager.configuration.settings import SchedulerSettings

# What condor_submit writes for a job (submit_utils.cpp), before the user's own clause.
SUBMIT = ('(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk)'
          ' && (TARGET.Memory >= RequestMemory) && (TARGET.HasFileTransfer)')
SIZES = (
    Size("cheap", 8, 32000, price=0.3),
    Size("docker", 8, 32000, price=0.35, attributes=(("HasDocker", "true"),)),
    Size("gpu", 8, 64000, price=1.2, gpus=1, gpu_type="Tesla T4",
         attributes=(("CUDACapability", "7.5"),)),
    Size("a100", 16, 128000, price=4.0, gpus=1, gpu_type="A100", attributes=(("CUDACapability", "8.0"),)),
)


def requirements(extra: str | None = None) -> classad2.ExprTree:
    return classad2.ExprTree(SUBMIT if extra is None else f"{SUBMIT} && ({extra})")


class Recording(Htcondor2Bindings):
    """The real bindings over the simulated schedd, remembering each idle-job projection."""

    def __init__(self, module) -> None:
        super().__init__(module=module)
        self.asked: list[tuple[str, ...]] = []

    def query_idle_jobs(self, projection):
        self.asked.append(tuple(projection))
        return super().query_idle_jobs(projection)


def adapter(condor, sizes=SIZES, **kw) -> tuple[HTCondorScheduler, Recording]:
    b = Recording(condor.sim)
    return HTCondorScheduler(b, clock=condor.clock, sizes=sizes, **kw), b


def by_sizes(demand: tuple[Demand, ...]) -> dict[frozenset[str] | None, int]:
    out: dict[frozenset[str] | None, int] = {}
    for d in demand:
        out[d.sizes] = out.get(d.sizes, 0) + d.count
    return out


def test_each_idle_job_asks_for_the_sizes_whose_offline_ad_it_matches(condor):
    for _ in range(3):
        condor.sim.submit(RequestCpus=1, RequestMemory=2000, RequestDisk=1000, Requirements=requirements())
    condor.sim.submit(RequestCpus=1, RequestMemory=2000, RequestDisk=1000, RequestGPUs=1,
                      Requirements=requirements("TARGET.GPUs >= RequestGPUs"))
    condor.sim.submit(RequestCpus=2, RequestMemory=2000, RequestDisk=1000, Requirements=requirements("HasDocker"))
    condor.sim.submit(RequestCpus=1, RequestMemory=48000, RequestDisk=1000, Requirements=requirements())
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, RequestGPUs=1,
                      Requirements=requirements("TARGET.CUDACapability >= 8.0"))
    htc, _ = adapter(condor)
    demand = htc.poll().demand
    assert by_sizes(demand) == {
        frozenset({"cheap", "docker", "gpu", "a100"}): 3,   # the plain jobs: every size
        frozenset({"gpu", "a100"}): 2,                        # a GPU; 48 GB
        frozenset({"docker"}): 1,                            # HasDocker: only the size that says so
        frozenset({"a100"}): 1,                              # CUDACapability >= 8.0
    }
    gpu = next(d for d in demand if d.gpus and d.ram_mb == 2000)
    assert (gpu.cpus, gpu.gpus, gpu.count, gpu.sizes) == (1, 1, 1, frozenset({"gpu", "a100"}))
    assert all(d.unmatched is None for d in demand)


def test_a_job_no_size_can_run_is_demand_for_no_size_with_the_reason(condor):
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Requirements=requirements('OpSys == "WINDOWS"'))
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Requirements=requirements('OpSys == "WINDOWS"'))
    condor.sim.submit(RequestCpus=32, RequestMemory=1000, Requirements=requirements())
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Requirements=requirements("HasSingularity"))
    htc, _ = adapter(condor)
    demand = {d.unmatched.split(": ", 1)[1]: d for d in htc.poll().demand}
    assert all(d.sizes == frozenset() for d in demand.values())
    windows, singularity, big = sorted(demand.values(), key=lambda d: (d.cpus, "Singularity" in d.unmatched))
    assert windows.count == 2 and windows.unmatched.startswith("no size can run jobs like 1.0 (signature ")
    assert 'OpSys == "WINDOWS"' in windows.unmatched
    assert "it asks for more than any size has (32 cores, 1000 MB memory" in big.unmatched
    assert singularity.unmatched.endswith("neither the job nor any size defines HasSingularity")
    assert len({signature_of(d.unmatched) for d in demand.values()}) == 3


def test_the_signature_stays_the_same_for_alike_jobs_across_polls(condor):
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Requirements=requirements('OpSys == "WINDOWS"'))
    htc, _ = adapter(condor)
    first = signature_of(htc.poll().demand[0].unmatched)
    condor.sim.jobs.clear()
    condor.advance(600)
    condor.sim.submit(ClusterId=77, RequestCpus=1, RequestMemory=1000,
                      Requirements=requirements('OpSys == "WINDOWS"'))
    fresh, _ = adapter(condor)  # another process, the same jobs: the metric label must not change
    assert signature_of(fresh.poll().demand[0].unmatched) == first != "-"


def test_the_sites_start_expression_is_the_sizes_side_of_the_match(condor):
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Owner="alice", Requirements=requirements())
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Owner="mallory", Requirements=requirements())
    htc, b = adapter(condor, machine_start='TARGET.Owner =!= "mallory"')
    demand = htc.poll().demand
    assert "Owner" in b.asked[0]  # what START asks of the job is fetched with the jobs
    assert by_sizes(demand) == {frozenset({"cheap", "docker", "gpu", "a100"}): 1, frozenset(): 1}
    refused = next(d for d in demand if not d.sizes)
    assert refused.unmatched.endswith("START refuses it on cheap, docker, gpu, a100")


def test_a_job_attribute_its_requirements_name_is_fetched_and_the_jobs_asked_again(condor):
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, MinCuda=8,
                      Requirements=requirements("TARGET.CUDACapability >= MinCuda"))
    htc, b = adapter(condor)
    assert by_sizes(htc.poll().demand) == {frozenset({"a100"}): 1}
    assert len(b.asked) == 2 and "MinCuda" not in b.asked[0] and "MinCuda" in b.asked[1]
    htc.poll()
    assert len(b.asked) == 3 and "MinCuda" in b.asked[2]  # learnt once: one query per poll after


def test_jobs_of_one_autocluster_id_on_two_schedds_are_matched_apart():
    # AutoClusterId numbers are per schedd: the same number on two schedds is two signatures
    jobs = [classad2.ClassAd({"ClusterId": 1, "ProcId": i, "AutoClusterId": 1, "RequestCpus": 1,
                              "RequestMemory": 1000, "GlobalJobId": f"ap1.example#1.{i}#100",
                              "Requirements": requirements()}) for i in range(3)]
    jobs += [classad2.ClassAd({"ClusterId": 9, "ProcId": i, "AutoClusterId": 1, "RequestCpus": 1,
                               "RequestMemory": 1000, "GlobalJobId": f"ap2.example#9.{i}#100",
                               "Requirements": requirements("HasDocker")}) for i in range(2)]
    assert by_sizes(HTCondorMatcher(SIZES).demand(jobs)) == {
        frozenset({"cheap", "docker", "gpu", "a100"}): 3, frozenset({"docker"}): 2}


def test_an_autocluster_of_an_empty_pool_is_told_apart_by_what_start_and_the_requests_ask():
    # with no startd, the schedd's signature knows nothing of START's Owner or of RequestCpus
    # when no Requirements clause names it: one autocluster id may hold jobs the sizes treat apart
    def job(proc: int, owner: str, cpus: int) -> classad2.ClassAd:
        return classad2.ClassAd({"ClusterId": 1, "ProcId": proc, "AutoClusterId": 4, "Owner": owner,
                                 "RequestCpus": cpus, "RequestMemory": 1000,
                                 "GlobalJobId": f"ap1#1.{proc}#1", "Requirements": requirements()})
    jobs = [job(0, "alice", 1), job(1, "mallory", 1), job(2, "alice", 12)]
    demand = HTCondorMatcher(SIZES, start='TARGET.Owner =!= "mallory"').demand(jobs)
    assert {(d.cpus, d.sizes) for d in demand} == {
        (1, frozenset({"cheap", "docker", "gpu", "a100"})), (1, frozenset()), (12, frozenset({"a100"}))}


def test_a_size_ad_is_what_its_vm_will_advertise():
    ad = size_ad(SIZES[2], start="TARGET.Owner =!= \"x\"")
    assert (ad["Cpus"], ad["Memory"], ad["GPUs"], ad["GPUs_DeviceName"]) == (8, 64000, 1, "Tesla T4")
    assert ad.eval("OpSys") == "LINUX" and ad.eval("CUDACapability") == 7.5
    assert str(ad.lookup("Requirements")) == "START && WithinResourceLimits"
    with pytest.raises(ValueError, match="size bad: HasX"):
        size_ad(Size("bad", 1, 1000, attributes=(("HasX", "true &&"),)))


def test_match_demand_boots_the_gpu_size_for_gpus_and_says_why_for_windows():
    sizes = [Size("cheap", 8, 32000, price=0.3), Size("gpu", 8, 32000, price=1.0, gpus=1)]
    gpu = match_demand(Demand(cpus=1, ram_mb=1000, count=1, gpus=1), sizes, "htcondor")
    assert (gpu.sizes, gpu.unmatched) == (frozenset({"gpu"}), None)
    win = match_demand(Demand(cpus=1, ram_mb=1000, requirements='OpSys == "WINDOWS"'), sizes, "htcondor")
    assert win.sizes == frozenset() and 'OpSys == "WINDOWS"' in win.unmatched
    assert signature_of(win.unmatched) != "-"
    plain = Demand(cpus=1, ram_mb=1000)
    assert match_demand(plain, sizes, "htcondor") is plain  # nothing asked beyond resources
    with pytest.raises(ValueError, match="not a valid ClassAd expression"):
        match_demand(Demand(requirements="OpSys == "), sizes, "htcondor")


def test_match_demand_maps_slurm_features_partitions_and_gpus():
    sizes = [Size("cpu", 8, 32000, features=frozenset({"avx512"}), partitions=frozenset({"batch"})),
             Size("gpu", 8, 32000, gpus=2, gpu_type="a100", partitions=frozenset({"gpu"}))]
    assert match_demand(Demand(features="avx512"), sizes, "slurm").sizes == frozenset({"cpu"})
    assert match_demand(Demand(partition="gpu"), sizes, "slurm").sizes == frozenset({"gpu"})
    assert match_demand(Demand(gpus=2), sizes, "slurm").sizes == frozenset({"gpu"})
    none = match_demand(Demand(features="avx512&fast"), sizes, "slurm")
    assert none.sizes == frozenset() and none.unmatched.endswith("no size has the features avx512&fast")
    with pytest.raises(ValueError, match="constraint"):
        match_demand(Demand(features="avx512&"), sizes, "slurm")
    with pytest.raises(ValueError, match="not both"):
        match_demand(Demand(features="a", requirements="true"), sizes, "slurm")


def test_the_daemons_adapter_matches_with_its_sizes_and_the_configured_start(condor):
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Owner="mallory", Requirements=requirements())
    settings = SchedulerSettings("htcondor", {"machine_start": 'TARGET.Owner =!= "mallory"'})
    htc = HTCondorScheduler.from_settings(settings, bindings=Htcondor2Bindings(module=condor.sim),
                                          clock=condor.clock, sizes=SIZES)
    assert htc.poll().demand[0].unmatched.endswith("START refuses it on cheap, docker, gpu, a100")
    plain = HTCondorScheduler.from_settings(SchedulerSettings("htcondor", {}),
                                            bindings=Htcondor2Bindings(module=condor.sim), clock=condor.clock)
    assert plain.poll().demand == (Demand(cpus=1, ram_mb=1000, oldest_submit=condor.clock()),)
    with pytest.raises(ValueError, match=r"\[Scheduler\] machine_start: 'Owner =!=' is not a ClassAd"):
        HTCondorScheduler.from_settings(SchedulerSettings("htcondor", {"machine_start": "Owner =!="}),
                                        bindings=Htcondor2Bindings(module=condor.sim), sizes=SIZES)


def test_a_job_whose_requirements_do_not_parse_is_left_out_with_a_problem_naming_it():
    problems: list = []
    jobs = [{"ClusterId": 5, "ProcId": 0, "RequestCpus": 1, "Requirements": "OpSys =="},
            {"ClusterId": 6, "ProcId": 0, "RequestCpus": 1, "Requirements": "true"}]
    demand = HTCondorMatcher(SIZES).demand(jobs, problems)
    assert [(d.count, d.sizes) for d in demand] == [(1, frozenset({"cheap", "docker", "gpu", "a100"}))]
    assert [(p.name, p.field, p.reason) for p in problems] == [("5.0", "Requirements", "unreadable")]


def test_a_short_job_boots_spot_and_a_long_one_on_demand_by_allowed_job_duration(condor):
    """Issue 15 item 3 for HTCondor: condor_submit's allowed_job_duration (AllowedJobDuration,
    seconds) is the requested walltime; a site attribute can be named instead."""
    import policy_matrix

    from nodemanager.core import plan
    from tests.core_world import settings, snap

    sizes = (Size("ondemand", 1, 4000, price=0.40),
             Size("spot", 1, 4000, price=0.12, market="spot", interruptions_per_day=2.0))
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, AllowedJobDuration=600, Requirements=requirements())
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, AllowedJobDuration=172800, Requirements=requirements())
    for _ in range(2):
        condor.sim.submit(RequestCpus=1, RequestMemory=1000, MaxWallTimeSecs=172800, Requirements=requirements())

    def boots(options: dict[str, str]) -> dict[str, int]:
        htc = HTCondorScheduler.from_settings(SchedulerSettings("htcondor", options), clock=condor.clock,
                                              bindings=Htcondor2Bindings(module=condor.sim), sizes=sizes)
        p = plan(snap(demand=htc.poll().demand), settings(sizes=sizes), policy_matrix.load_default())
        return {b.size: b.count for b in p.boots}

    assert boots({}) == {"spot": 3, "ondemand": 1}  # MaxWallTimeSecs means nothing by default
    assert boots({"walltime_attribute": "MaxWallTimeSecs"}) == {"spot": 2, "ondemand": 2}
    with pytest.raises(ValueError, match=r"\[Scheduler\] walltime_attribute: 'Max Wall' is not"):
        boots({"walltime_attribute": "Max Wall"})


def test_jobs_no_size_can_run_are_reported_per_signature_and_never_booted_for(condor, caplog):
    """Issue 14 item 2 end to end: two kinds of 1-core jobs no size can run (Windows, Singularity)
    ask the same cores and memory, yet each signature is its own status page entry, metric series
    and single log line over three cycles, whatever their walltimes and however many wait; nothing
    is booted for them."""
    import logging

    import policy_matrix
    from prometheus_client import generate_latest

    from nodemanager.core import plan
    from nodemanager.console.decision_log import DecisionLog
    from nodemanager.console.metrics import Metrics
    from nodemanager.model import CycleReport
    from nodemanager.console.status_document import StatusView, status_document
    from tests.core_world import settings, snap

    windows = requirements('OpSys == "WINDOWS"')
    for hours in (1, 30):
        condor.sim.submit(RequestCpus=1, RequestMemory=1000, AllowedJobDuration=hours * 3600, Requirements=windows)
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Requirements=requirements("HasSingularity"))
    htc, _ = adapter(condor)
    caplog.set_level(logging.WARNING, "nodemanager.decisions")
    log = DecisionLog()
    for cycle in range(3):
        if cycle == 2:  # more of the same jobs arrive
            condor.sim.submit(RequestCpus=1, RequestMemory=1000, AllowedJobDuration=600, Requirements=windows)
        s = snap(demand=htc.poll().demand)
        p = plan(s, settings(sizes=SIZES), policy_matrix.load_default())
        log.decisions(p, False, None, None)
        assert p.boots == ()
    sigs: dict[str, int] = {}
    for d in s.demand:
        sigs[signature_of(d.unmatched)] = sigs.get(signature_of(d.unmatched), 0) + d.count
    assert sorted(sigs.values()) == [1, 3]
    assert len(sigs) == 2 and "-" not in sigs
    lines = [r.getMessage() for r in caplog.records if "never booted for" in r.getMessage()]
    assert len(lines) == 2 and {sig for sig in sigs if any(sig in line for line in lines)} == set(sigs)
    report = CycleReport(snapshot=s, plan=p)
    metrics = Metrics(clock=lambda: p.now)
    metrics.observe(report)
    series = [line for line in generate_latest(metrics.registry).decode().splitlines()
              if line.startswith("nodemanager_unmatched_jobs{")]
    assert sorted(series) == sorted(f'nodemanager_unmatched_jobs{{signature="1 cpus, 1000 MB, signature {sig}"}} '
                                    f'{float(n)}' for sig, n in sigs.items())
    page = status_document(StatusView(report=report), None, p.now)["why_not_demand"]
    assert sorted((w["reason"], w["key"]) for w in page) == sorted(
        ("unmatched", f"1 cpus, 1000 MB, signature {sig}") for sig in sigs)


def test_one_owners_many_attributes_never_stop_matching_for_another(condor):
    """25 jobs of one owner naming 50 attributes each used to fill the query's one global list of
    1,000 names for good: a later job of another owner naming its own WantSmall was told "no size
    defines WantSmall" and never booted for. Each signature and each owner now add a bounded
    number of names, rebuilt from the queue at every poll, and a missing name is put on the side
    that lacks it."""
    import policy_matrix

    from nodemanager.core import plan
    from tests.core_world import settings, snap

    for j in range(25):
        junk = {f"Junk{j}x{k}": 1 for k in range(50)}
        condor.sim.submit(RequestCpus=1, RequestMemory=1000, Owner="mallory", **junk,
                          Requirements=requirements(" && ".join(f"{n} == 1" for n in junk)))
    condor.advance(60)
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Owner="alice", WantSmall=True,
                      Requirements=requirements("WantSmall =?= true && TARGET.Cpus <= 8"))
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Owner="bob",
                      Requirements=requirements("MY.NeedsScratch && TARGET.HasScratch"))
    htc, b = adapter(condor)
    for _ in range(2):
        demand = htc.poll().demand
    small = frozenset({"cheap", "docker", "gpu"})                 # TARGET.Cpus <= 8: not a100
    assert [(d.count, d.sizes) for d in demand if d.sizes] == [(1, small)]   # alice's job
    p = plan(snap(demand=demand), settings(sizes=SIZES), policy_matrix.load_default())
    assert [b.count for b in p.boots] == [1]                    # alice's job is booted for
    junk_asked = [a for a in b.asked[-1] if a.startswith("Junk")]
    assert 0 < len(junk_asked) <= 128 and "WantSmall" in b.asked[-1]          # one owner's bound
    mallory = [d.unmatched for d in demand if d.unmatched and "Junk" in d.unmatched]
    assert len(mallory) == 25 and all("a signature may add 32 job attributes" in m for m in mallory)
    [bob] = [d.unmatched for d in demand if d.unmatched and "Scratch" in d.unmatched]
    assert bob.endswith("; no size defines HasScratch; the job does not define NeedsScratch")
    condor.sim.jobs[:] = [j for j in condor.sim.jobs if j.get("Owner") != "mallory"]
    htc.poll()
    htc.poll()
    assert not [a for a in b.asked[-1] if a.startswith("Junk")]   # names nobody asks for leave the query


def _doubling(i: int, depth: int = 18) -> dict:
    """A job whose Requirements name X18, each Xn naming X(n-1) twice: 2**18 terms to evaluate
    (about 3 s per job here; at 21 classad2 gives up with an error after 6 s)."""
    job = {"RequestCpus": 1, "RequestMemory": 1000, "Owner": "mallory",
           "X0": classad2.ExprTree(f"TARGET.Cpus + {i}"), "Requirements": requirements(f"X{depth} > 0")}
    job.update({f"X{n}": classad2.ExprTree(f"X{n - 1} + X{n - 1}") for n in range(1, depth + 1)})
    return job


def test_costly_requirements_never_stall_the_other_threads(condor):
    """Jobs whose Requirements double an expression 18 times held the GIL for seconds each while
    the adapter matched them: a ticker thread (another actor's timing) stopped for that long.
    Such an ad is told too costly to evaluate without being evaluated; the others are matched."""
    import threading
    import time

    for i in range(4):
        condor.sim.submit(**_doubling(i))
    condor.sim.submit(RequestCpus=1, RequestMemory=1000, Owner="alice", Requirements=requirements())
    htc, b = adapter(condor)
    stop, ticks = threading.Event(), [time.perf_counter()]

    def ticker() -> None:
        while not stop.wait(0.002):
            ticks.append(time.perf_counter())

    thread = threading.Thread(target=ticker)
    thread.start()
    polls = []
    try:
        for _ in range(8):  # the query learns one more Xn per query, three queries per poll
            started = time.perf_counter()
            demand = htc.poll().demand
            polls.append(time.perf_counter() - started)
    finally:
        ticks.append(time.perf_counter())
        stop.set()
        thread.join()
    assert "X0" in b.asked[-1]                                   # the whole chain is fetched
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < 0.2 and max(polls) < 1.0, (max(gaps), polls)   # before: 0.5 s and 10 s
    assert by_sizes(demand) == {frozenset({"cheap", "docker", "gpu", "a100"}): 1, frozenset(): 4}
    costly = [d.unmatched for d in demand if not d.sizes]
    assert len(costly) == 4 and all("too costly to evaluate" in why for why in costly)


class Steps:
    """A clock that moves ``step`` seconds each time it is read (matching that takes time)."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_matching_keeps_to_its_time_budget_per_signature_and_per_poll():
    """A signature whose matching takes longer than its budget is remembered as too costly; once
    a poll has spent its budget the signatures not matched yet wait for the next poll, which goes
    on where it stopped; every poll ends within its budget plus one signature."""
    def job(i: int) -> classad2.ClassAd:
        return classad2.ClassAd({"ClusterId": i, "ProcId": 0, "RequestCpus": 1, "RequestMemory": 1000 + i,
                                 "Requirements": requirements(f"TARGET.Memory >= {i}")})

    slow = Steps(3.0)   # every signature takes 3 s
    matcher = HTCondorMatcher(SIZES, clock=slow, poll_budget=60.0, signature_budget=1.0)
    [first] = matcher.demand([job(1)])
    assert first.sizes == frozenset() and "too costly to evaluate (matching it took 3.0s, over 1s)" in first.unmatched
    slow.step = 0.0     # remembered as such: not matched again
    assert matcher.demand([job(1)]) == (first,)

    clock = Steps(0.4)  # 0.8 s per signature, 5 s per poll
    matcher = HTCondorMatcher(SIZES, clock=clock, poll_budget=5.0, signature_budget=1.0)
    jobs = [job(i) for i in range(40)]
    waiting = []
    for _ in range(10):
        started = clock.now
        demand = matcher.demand(jobs)
        assert clock.now - started <= 5.0 + 0.8 + 0.4
        waiting.append(sum(d.count for d in demand if not d.sizes))
        assert all("not matched yet: this poll's matching time (5s) is spent" in d.unmatched
                   for d in demand if not d.sizes)
        if not waiting[-1]:
            break
    assert waiting[0] == 33 and waiting == sorted(waiting, reverse=True) and waiting[-1] == 0
