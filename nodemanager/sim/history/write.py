"""Write jobs as a site's history would show them: ``sacct --parsable2`` lines, or
``condor_history -json`` / ``-af`` output, for tests and the advisor's examples
(``benchmarks/synthetic_workload.py --format``). Each job ran from its submit time (no wait: the site's
history is what a replay re-decides) for its run time; ``at`` is the Unix time of submit 0."""

from __future__ import annotations

import json
import time
from typing import Sequence, TextIO

from nodemanager.sim.history.condor import AF_ATTRS
from nodemanager.sim.history.sacct import FIELDS
from nodemanager.sim.swf import SwfJob

__all__ = ["AT", "write_sacct", "write_condor_json", "write_condor_af", "WRITERS"]

AT = 1_793_491_200.0      # 2026-11-01T00:00:00Z


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))


def _name(prefix: str, number: int) -> str:
    return f"{prefix}{number}" if number >= 0 else ""


def _limit(seconds: float) -> str:
    if seconds <= 0:
        return "UNLIMITED"
    s = int(seconds)
    d, s = divmod(s, 86400)
    return (f"{d}-" if d else "") + f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def write_sacct(out: TextIO, jobs: Sequence[SwfJob], at: float = AT) -> None:
    """A header line, each job's line and its ``.batch`` step's, as ``sacct --parsable2`` prints them."""
    out.write("|".join(FIELDS) + "\n")
    for j in jobs:
        t0, t1 = at + j.submit, at + j.submit + j.runtime
        row = [str(j.id), _iso(t0), _iso(t0), _iso(t1), str(j.cores), str(j.cores), f"{j.mem_mb}M",
               str(-(-j.cores // 8)), _limit(j.requested_time), _name("user", j.user), _name("acct", j.group),
               "batch", "COMPLETED", _name("app", j.executable)]
        out.write("|".join(row) + "\n")
        step = [f"{j.id}.batch", _iso(t0), _iso(t0), _iso(t1), str(j.cores), str(j.cores), "", "1", "",
                "", _name("acct", j.group), "", "COMPLETED", "batch"]
        out.write("|".join(step) + "\n")


def _ad(j: SwfJob, at: float) -> dict[str, object]:
    t0, t1 = int(at + j.submit), int(at + j.submit + j.runtime)
    return {"ClusterId": j.id, "ProcId": 0, "QDate": t0, "JobStartDate": t0, "JobCurrentStartDate": t0,
            "CompletionDate": t1, "EnteredCurrentStatus": t1, "JobStatus": 4, "RequestCpus": j.cores,
            "RequestMemory": j.mem_mb, "RequestGpus": j.gpus, "Owner": _name("user", j.user),
            "AcctGroup": _name("acct", j.group) or None,
            "AllowedJobDuration": int(j.requested_time) if j.requested_time > 0 else None,
            "Cmd": "/opt/" + (_name("app", j.executable) or "job")}


def write_condor_json(out: TextIO, jobs: Sequence[SwfJob], at: float = AT) -> None:
    """The ads as ``condor_history -json`` prints them: a JSON array, one attribute a line."""
    out.write("[\n")
    for k, j in enumerate(jobs):
        if k:
            out.write(",\n")
        ad = {a: v for a, v in _ad(j, at).items() if v is not None}
        out.write("{\n" + ",\n".join(f"  {json.dumps(a)}: {json.dumps(v)}" for a, v in ad.items()) + "\n}\n")
    out.write("]\n")


def write_condor_af(out: TextIO, jobs: Sequence[SwfJob], at: float = AT) -> None:
    """The ads as ``condor_history -af`` prints the attributes of :data:`AF_ATTRS`."""
    for j in jobs:
        ad = _ad(j, at)
        out.write(" ".join("undefined" if ad[a] is None else str(ad[a]) for a in AF_ATTRS) + "\n")


WRITERS = {"sacct": write_sacct, "condor": write_condor_json, "condor-af": write_condor_af}
