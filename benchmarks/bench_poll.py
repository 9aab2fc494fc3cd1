"""How long one scheduler poll takes at scale, through each adapter's own parsing and poll path.

    python benchmarks/bench_poll.py [--repeat 5] [--slurm 1000x100000,2000x200000]
                                    [--htcondor 50000x200000]

SLURM: ``sinfo --json`` / ``squeue --json`` text for N nodes and J jobs (half running on the nodes,
some across several nodes, half pending) is synthesized once; :class:`SlurmScheduler.poll` then
decodes and parses it as it does a real reply (only the command runner is replaced).
HTCondor: N partitionable-slot ads and J idle job ads as ``classad2.ClassAd`` objects, the form
the production bindings return; :class:`HTCondorScheduler.poll` turns them into workers and demand.

Prints the median wall seconds of ``--repeat`` polls per case, with the garbage collector set up
as ``nodemanager run`` sets it (``tune_gc``). Not a timed test: a figure to watch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Mapping, Sequence

NOW = 1_800_000_000


def slurm_docs(n_nodes: int, n_jobs: int) -> tuple[str, str]:
    """(sinfo text, squeue text): idle and busy nodes; half the jobs run (1-4 nodes each)."""
    nodes = [{"name": f"cn{i:05d}", "state": "mixed" if i % 3 else "idle", "state_flags": [],
              "cpus": 32, "alloc_cpus": 8 if i % 3 else 0, "real_memory": 128000, "alloc_memory": 0,
              "last_busy": NOW - 100, "slurmd_start_time": NOW - 9000, "boot_time": NOW - 9100,
              "reason": "", "reason_changed_at": 0, "comment": f"instance-id=i-{i:08x}",
              "partitions": ["cloud"], "address": f"10.0.{i >> 8 & 255}.{i & 255}", "hostname": f"cn{i:05d}"}
             for i in range(n_nodes)]
    jobs: list[dict[str, Any]] = []
    for j in range(n_jobs):
        job: dict[str, Any] = {"job_id": j + 1, "cpus": 4, "node_count": 1, "memory_per_node": None,
                               "memory_per_cpu": 1000, "partition": "cloud", "submit_time": NOW - j % 5000,
                               "requeue": True, "time_limit": 60, "array_task_string": "",
                               "array_task_id": None, "start_time": NOW - 500, "end_time": NOW + 3100}
        if j % 2:
            first = j % n_nodes
            width = 1 + j % 4 if first + 4 < n_nodes else 1
            job.update(job_state="RUNNING", state_reason="None", node_count=width, cpus=4 * width,
                       nodes=f"cn[{first:05d}-{first + width - 1:05d}]" if width > 1 else f"cn{first:05d}")
        else:
            job.update(job_state="PENDING", state_reason="Resources" if j % 10 else "Priority", nodes="")
        jobs.append(job)
    return json.dumps({"errors": [], "nodes": nodes}), json.dumps({"errors": [], "jobs": jobs})


def bench_slurm(n_nodes: int, n_jobs: int, repeat: int) -> tuple[float, int, int]:
    from nodemanager.scheduler.slurm import SlurmScheduler

    sinfo, squeue = slurm_docs(n_nodes, n_jobs)
    replies = {"sinfo": sinfo, "squeue": squeue}

    class Canned(SlurmScheduler):
        def _run(self, args: Sequence[str], *, node: str | None = None) -> str:
            return replies[args[0]]

        def _json(self, args: Sequence[str]) -> Any:  # decoded as run_json decodes a reply
            return json.loads(replies[args[0]])

    seconds, poll = _median_poll(Canned(clock=lambda: float(NOW)), repeat)
    return seconds, sum(w.running_jobs for w in poll.workers), sum(d.count for d in poll.demand)


def condor_ads(n_startds: int, n_jobs: int) -> tuple[list[Any], list[Any]]:
    """(p-slot ads, idle job ads) as classad2.ClassAd objects, as the bindings return them."""
    import classad2

    slots = []
    for i in range(n_startds):
        busy = i % 3
        slots.append(classad2.ClassAd({
            "MyAddress": f"<10.1.{i >> 8 & 255}.{i & 255}:9618?sock=startd>", "Name": f"slot1@wn{i}",
            "Machine": f"wn{i}", "State": "Unclaimed", "Activity": "Idle", "SlotType": "Partitionable",
            "PartitionableSlot": True, "Cpus": 8 - 2 * busy, "TotalSlotCpus": 8, "Memory": 32000,
            "TotalSlotMemory": 32000, "NumDynamicSlots": busy, "ChildState": ["Claimed"] * busy,
            "Draining": False, "DaemonStartTime": NOW - 9000, "LastHeardFrom": NOW - 30,
            "EnteredCurrentState": NOW - 600, "MyCurrentTime": NOW - 30,
            "ExpectedMachineGracefulDrainingCompletion": NOW + 600,
            "ExpectedMachineGracefulDrainingBadput": 1000 * busy, "CloudInstanceID": f"i-{i:08x}"}))
    jobs = [classad2.ClassAd({"ClusterId": j + 1, "ProcId": 0, "RequestCpus": 1 + j % 4,
                              "RequestMemory": 2048 * (1 + j % 3), "RequestDisk": 1024 * (j % 7),
                              "QDate": NOW - j % 5000}) for j in range(n_jobs)]
    return slots, jobs


def bench_htcondor(n_startds: int, n_jobs: int, repeat: int) -> tuple[float, int, int]:
    from nodemanager.scheduler.htcondor import HTCondorScheduler

    slots, jobs = condor_ads(n_startds, n_jobs)

    class Canned:
        error_types = (OSError,)

        def query_slots(self, constraint: str, projection: Sequence[str]) -> list[Any]:
            return slots

        def query_idle_jobs(self, projection: Sequence[str]) -> list[Mapping[str, Any]]:
            return jobs

    seconds, poll = _median_poll(HTCondorScheduler(Canned(), clock=lambda: float(NOW)), repeat)  # type: ignore[arg-type]
    return seconds, len(poll.workers), sum(d.count for d in poll.demand)


def _median_poll(sched: Any, repeat: int) -> tuple[float, Any]:
    """(median seconds of ``repeat`` polls, the last poll), the collector set up as ``nodemanager
    run`` sets it once started."""
    from nodemanager.daemon import tune_gc

    tune_gc()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        poll = sched.poll()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), poll


def _pairs(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in (p.split("x") for p in text.split(",") if p)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--slurm", default="1000x100000,2000x200000", help="NODESxJOBS,... ('' to skip)")
    ap.add_argument("--htcondor", default="50000x200000", help="STARTDSxJOBS,... ('' to skip)")
    args = ap.parse_args()
    for n, j in _pairs(args.slurm):
        sec, running, demand = bench_slurm(n, j, args.repeat)
        print(f"slurm    {n:>6} nodes   x {j:>7} jobs: poll {sec:.3f} s (median of {args.repeat}; "
              f"{running} job-nodes running, demand {demand} nodes)", flush=True)
    for n, j in _pairs(args.htcondor):
        sec, workers, demand = bench_htcondor(n, j, args.repeat)
        print(f"htcondor {n:>6} startds x {j:>7} jobs: poll {sec:.3f} s (median of {args.repeat}; "
              f"{workers} workers, demand {demand} jobs)", flush=True)


if __name__ == "__main__":
    main()
