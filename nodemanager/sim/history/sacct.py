"""SLURM's job history as ``sacct --parsable2`` prints it, read as the replay's jobs.

The command (times in UTC, so no daylight-saving jump reads as clock skew)::

    TZ=UTC sacct --allusers --parsable2 --starttime 2026-11-01 --endtime 2026-12-01 \\
        --format=JobID,Submit,Start,End,AllocCPUS,ReqCPUS,ReqMem,NNodes,Timelimit,User,Account,Partition,State,JobName

The header line names the fields (any order; case does not matter); without it (``--noheader``)
the fields are taken in the order above. Required: JobID, Submit, Start, End and AllocCPUS or
ReqCPUS (or NCPUS). The rules for each kind of record are in docs/simulator.md, "Replaying your
own history".
"""

from __future__ import annotations

import calendar
import re
import time

from nodemanager.sim.history.lines import HistoryError, HistoryLog, Record, Skip, check_range, numbered_lines

__all__ = ["FIELDS", "read_sacct"]

FIELDS = ("JobID", "Submit", "Start", "End", "AllocCPUS", "ReqCPUS", "ReqMem", "NNodes", "Timelimit",
          "User", "Account", "Partition", "State", "JobName")
_CORES = ("alloccpus", "ncpus", "reqcpus")     # the first one given and above 0 is the job's cores
_SHOWN = {f.lower(): f for f in (*FIELDS, "NCPUS")}
_NO_TIME = {"", "unknown", "none"}
_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)([cn]?)$")
_MEM_SCALE = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 ** 2, "P": 1024 ** 3}
_LIMIT = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+)(?::(\d+))?$")
_PENDING_ARRAY = re.compile(r"^\d+_\[")
_STEP = "a job step (its job's line is replayed)"


def read_sacct(path: str, log: HistoryLog) -> list[Record]:
    """Every replayable job line of ``path``; the others are counted in ``log`` by reason."""
    names: list[str] | None = None
    out: list[Record] = []
    requeued_end: dict[str, float] = {}
    for lineno, line in numbered_lines(path, log):
        parts = line.strip().split("|")
        if names is None:
            if "jobid" in (p.strip().lower() for p in parts):
                names = [p.strip().lower() for p in parts]
                if parts[-1] == "":      # --parsable ends every line with a |
                    names = names[:-1]
                _check_header(path, lineno, names)
                continue
            names = [f.lower() for f in FIELDS]
        if len(parts) == len(names) + 1 and parts[-1] == "":
            parts = parts[:-1]
        log.records += 1
        try:
            if len(parts) != len(names):
                raise Skip(f"not {len(names)} fields")
            row = dict(zip(names, (p.strip() for p in parts)))
            record = _record(row, requeued_end, log)
            out.append(check_range(record, log))
        except Skip as why:
            log.skip(str(why), lineno, name=str(why) != _STEP)
    return out


def _check_header(path: str, lineno: int, names: list[str]) -> None:
    missing = [f for f in ("jobid", "submit", "start", "end") if f not in names]
    if not any(c in names for c in _CORES):
        missing.append("AllocCPUS or ReqCPUS")
    if missing:
        raise HistoryError(f"{path}:{lineno}: the header lacks {', '.join(missing)} (sacct --format=... "
                           "must name them; docs/simulator.md gives the command)")


def _record(row: dict[str, str], requeued_end: dict[str, float], log: HistoryLog) -> Record:
    job = row["jobid"]
    if "." in job:
        raise Skip(_STEP)
    if _PENDING_ARRAY.match(job):
        raise Skip("never started (array tasks still pending)")
    state = (row.get("state") or "").split(" ")[0].upper()
    if row["start"].lower() in _NO_TIME or state == "PENDING":
        raise Skip("never started")
    if row["end"].lower() in _NO_TIME or state == "RUNNING":
        raise Skip("still running (no end time)")
    submit, start, end = _time(row["submit"], "Submit"), _time(row["start"], "Start"), _time(row["end"], "End")
    if job in requeued_end:
        log.adjust("a requeued job's later run: submitted when the run before it ended")
        submit = max(submit, requeued_end.pop(job))
    if state == "REQUEUED":
        requeued_end[job] = end
    cores = 0
    for name in _CORES:
        if name in row and row[name]:
            cores = _int(row[name], _SHOWN.get(name, name))
            if cores > 0:
                break
    nodes = _int(row["nnodes"], "NNodes") if row.get("nnodes") else 1
    return Record(submit=submit, start=start, end=end, cores=cores,
                  mem_mb=_mem(row.get("reqmem", ""), cores, nodes),
                  limit=_limit(row.get("timelimit", "")),
                  user=row.get("user", ""), group=row.get("account", ""),
                  name=row.get("jobname") or row.get("partition", ""))


def _time(text: str, what: str) -> float:
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        raise Skip(f"bad {what} time") from None


def _int(text: str, what: str) -> int:
    if not text.isdigit():
        raise Skip(f"bad {what}")
    return int(text)


def _mem(text: str, cores: int, nodes: int) -> int:
    """ReqMem in MB: ``4000M``, ``4G``; older releases' ``c`` (per CPU) or ``n`` (per node) suffix."""
    if not text:
        return 0
    m = _MEM.match(text)
    if not m:
        raise Skip("bad ReqMem")
    mb = float(m.group(1)) * _MEM_SCALE[m.group(2)]
    mb *= cores if m.group(3) == "c" else nodes if m.group(3) == "n" else 1
    if mb > 1e12:
        raise Skip("bad ReqMem")
    return int(-(-mb // 1))


def _limit(text: str) -> float:
    """Timelimit in seconds: ``[days-]hours:minutes:seconds``, ``minutes:seconds``, ``minutes``;
    -1 for ``UNLIMITED``, ``Partition_Limit`` or none."""
    if not text or text.upper() in ("UNLIMITED", "PARTITION_LIMIT", "INVALID"):
        return -1.0
    m = _LIMIT.match(text)
    if not m:
        raise Skip("bad Timelimit")
    days, a, b, c = m.groups()
    if c is not None:                      # [d-]h:m:s
        h, mi, s = int(a or 0), int(b), int(c)
    elif a is not None:                    # d-h:m or m:s
        h, mi, s = (int(a), int(b), 0) if days else (0, int(a), int(b))
    else:                                  # d-h or minutes
        h, mi, s = (int(b), 0, 0) if days else (0, int(b), 0)
    return float(int(days or 0) * 86400 + h * 3600 + mi * 60 + s)
