"""How long HTCondor demand with real matchmaking takes: 100,000 idle jobs in 500 signatures
against 20 sizes (target: < 1 s CPU).

    python benchmarks/bench_match.py [--jobs 100000] [--signatures 500] [--sizes 20]

Prints CPU seconds for: today's demand without sizes (the baseline), the first poll with
matching (every signature matched against every size), a later poll (verdicts remembered), and a
poll whose jobs carry no ``AutoClusterId`` yet (grouped by their significant attributes). The jobs
are ``classad2.ClassAd`` objects as the bindings return them, shaped like condor_submit's: the
default Requirements plus a user clause. Not a timed test: a figure to watch.
"""

from __future__ import annotations

import argparse
import time

import classad2

from nodemanager.model import Size
from nodemanager.scheduler.htcondor_ads import demand_from_jobs
from nodemanager.scheduler.htcondor_match import HTCondorMatcher

_SUBMIT = ('TARGET.Arch == "X86_64" && TARGET.OpSys == "LINUX" && TARGET.Disk >= RequestDisk'
           ' && TARGET.Memory >= RequestMemory && TARGET.Cpus >= RequestCpus && TARGET.HasFileTransfer')
_CLAUSES = ("true", "TARGET.HasDocker", "TARGET.GPUs >= RequestGPUs", "TARGET.CUDACapability >= 7.0",
            'OpSysMajorVer == 9', 'TARGET.Site =?= "east"', "TARGET.IsFast =?= true")


def sizes(n: int) -> list[Size]:
    """``n`` sizes of 2..64 cores, every third with a GPU, every fourth with Docker."""
    out = []
    for i in range(n):
        cores = (2, 4, 8, 16, 32, 64)[i % 6]
        attrs: list[tuple[str, str]] = [("OpSysMajorVer", str(8 + i % 2))]
        if i % 4 == 0:
            attrs.append(("HasDocker", "true"))
        if i % 5 == 0:
            attrs.append(("Site", '"east"'))
        gpus = 1 if i % 3 == 0 else 0
        if gpus:
            attrs.append(("CUDACapability", "8.0"))
        out.append(Size(f"s{i}", cores, cores * 4000, price=0.05 * cores + gpus, gpus=gpus,
                        attributes=tuple(attrs)))
    return out


def jobs(n: int, signatures: int, autocluster: bool = True) -> list[object]:
    """``n`` idle job ads spread evenly over ``signatures`` distinct significant-attribute sets."""
    out = []
    for i in range(n):
        s = i % signatures
        ad = {"ClusterId": 1000 + i // 100, "ProcId": i % 100, "QDate": 1_800_000_000 + i,
              "RequestCpus": 1 + s % 8, "RequestMemory": 1000 * (1 + s % 12), "RequestDisk": 100_000,
              "Requirements": classad2.ExprTree(f"{_SUBMIT} && ({_CLAUSES[s % len(_CLAUSES)]})"),
              "JobPrio": s // 40, "GlobalJobId": f"ap.example.org#{1000 + i // 100}.{i % 100}#1800000000"}
        if s % len(_CLAUSES) == 2:
            ad["RequestGPUs"] = 1
        if autocluster:
            ad["AutoClusterId"] = s
        out.append(classad2.ClassAd(ad))
    return out


def _cpu(label: str, fn) -> object:
    t = time.process_time()
    result = fn()
    print(f"{label:<58} {time.process_time() - t:6.3f} s CPU")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--signatures", type=int, default=500)
    ap.add_argument("--sizes", type=int, default=20)
    a = ap.parse_args()
    ads = jobs(a.jobs, a.signatures)
    print(f"{a.jobs} idle jobs, {a.signatures} signatures, {a.sizes} sizes")
    _cpu("today's demand, no matching (baseline)", lambda: demand_from_jobs(ads))
    matcher = _cpu("size ads built", lambda: HTCondorMatcher(sizes(a.sizes)))
    assert isinstance(matcher, HTCondorMatcher)
    demand = _cpu("first poll: every signature matched", lambda: matcher.demand(ads))
    _cpu("later poll: verdicts remembered", lambda: matcher.demand(ads))
    bare = jobs(a.jobs, a.signatures, autocluster=False)
    cold = HTCondorMatcher(sizes(a.sizes))
    _cpu("first poll, jobs without AutoClusterId", lambda: cold.demand(bare))
    assert isinstance(demand, tuple)
    unmatched = sum(d.count for d in demand if d.sizes == frozenset())
    print(f"demand items {len(demand)}, jobs {sum(d.count for d in demand)}, "
          f"of which no size can run {unmatched}")


if __name__ == "__main__":
    main()
