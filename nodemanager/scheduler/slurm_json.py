"""Pure parsing of SLURM 22.05 ``sinfo --json`` / ``squeue --json`` (openapi v0.0.38) replies.

No I/O here: :mod:`nodemanager.scheduler.slurm` runs the commands and hands the decoded JSON in.
Every problem with a record is reported as a :class:`~nodemanager.scheduler.records.RecordProblem`
naming the node (or job) and the field, and the other records are still parsed. A value that is not
a number, not finite (JSON ``Infinity``/``NaN``, which Python's decoder accepts), negative or beyond
:data:`~nodemanager.scheduler.records.MAX_COUNT` is unusable: a node's field gets its default; a
pending job with such a size (cpus, node count, memory, array) is left out of demand. A record whose
reading fails in any other way makes the whole reply a :class:`RecordError` naming it.

A node's state words are :mod:`nodemanager.scheduler.slurm_state`'s; hostlists and job arrays
are counted by :mod:`nodemanager.scheduler.slurm_hostlist`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from nodemanager.scheduler.port import DRAIN_REASON_PREFIX
from nodemanager.scheduler.records import MAX_COUNT, RecordProblem, number_problem
from nodemanager.scheduler.slurm_hostlist import array_task_count, expand_hostlist
from nodemanager.scheduler.slurm_gres import gres_per_node
from nodemanager.scheduler.slurm_state import flag_names, short_state

__all__ = ["RecordError", "SlurmNode", "SlurmJob", "parse_nodes", "parse_jobs", "drain_reason", "request_id_of",
           "cloud_id_of", "ACTIVE_JOB_STATES", "Reader", "job_state", "time_limit"]

# Job states that hold a node: the node is not free while any of these is on it.
ACTIVE_JOB_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED",
                               "SIGNALING", "STAGE_OUT", "RESIZING"})

_REQUEST_ID = re.compile(r"\[req=([A-Za-z0-9_.:-]+)\]\s*$")
_CLOUD_ID = re.compile(r"(?:^|[\s,;])instance-id=([^\s,;]+)")


# Epoch seconds beyond 2^53 (exact floats) are no real time.
_MAX_TIME = 2.0**53


class RecordError(ValueError):
    """A record whose reading failed unexpectedly; ``kind`` and ``name`` say which (``node n1``)."""

    def __init__(self, command: str, kind: str, name: str, exc: BaseException) -> None:
        super().__init__(f"{command}: {kind} {name}: cannot be read ({type(exc).__name__}: {exc})")
        self.kind, self.name = kind, name


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One ``sinfo --json`` node record, typed. Times are epoch seconds (0: not reported)."""

    name: str
    state: str                  # as sinfo %t prints it
    base_state: str             # the JSON "state" (idle, mixed, allocated, down, ...)
    flags: tuple[str, ...]      # the JSON "state_flags" (DRAIN, NOT_RESPONDING, ...)
    reason: str
    reason_changed_at: float
    cpus: int
    alloc_cpus: int
    real_memory: int
    alloc_memory: int
    last_busy: float
    slurmd_start_time: float
    boot_time: float
    address: str | None
    hostname: str | None
    comment: str
    extra: str
    features: str
    partitions: tuple[str, ...]

    @property
    def draining(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def responding(self) -> bool:
        return "NOT_RESPONDING" not in self.flags


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One ``squeue --json`` job record, typed. ``nodes`` is the expanded node list. Only what its
    state needs is read: a pending job's size and reason, a running job's nodes and times."""

    job_id: int
    state: str
    nodes: tuple[str, ...]
    cpus: int
    node_count: int
    memory_per_node: int | None = None
    memory_per_cpu: int | None = None
    state_reason: str = "None"
    partition: str = ""
    start_time: float = 0.0
    end_time: float | None = None   # None: no time limit
    submit_time: float = 0.0
    requeue: bool = True
    array_tasks: int = 1            # pending array records: how many tasks this record stands for
    sized: bool = True              # False: a size field (cpus, nodes, memory, array) is unusable
    features: str = ""              # pending: the --constraint expression
    gres: str = ""                  # pending: GRES per node (gres:gpu:1), from --gres, --gpus or --gpus-per-task
    exclusive: bool = False         # pending: --exclusive (a whole node)
    walltime: float | None = None   # --time in seconds (None: none or INFINITE)
    user: str = ""                  # user_name (who spent what; runtime prediction's key)
    account: str = ""               # the SLURM account
    name: str = ""                  # the job name (runtime prediction's key)


# ------------------------------------------------------------------ reasons


def drain_reason(reason: str, request_id: str) -> str:
    """The SLURM ``Reason`` of a drain we start: ``nodemanager: <reason> [req=<id>]``."""
    text = " ".join(reason.split()) or "drain"
    return f"{DRAIN_REASON_PREFIX}: {text} [req={request_id}]"


def request_id_of(reason: str | None) -> str | None:
    """Our request id if ``reason`` is one of our drain reasons, else None."""
    if not reason or not reason.startswith(f"{DRAIN_REASON_PREFIX}:"):
        return None
    m = _REQUEST_ID.search(reason)
    return m.group(1) if m else None


def cloud_id_of(*texts: str) -> str | None:
    """The ``instance-id=<id>`` token from a node's comment, extra or features, if any."""
    for text in texts:
        m = _CLOUD_ID.search(text or "")
        if m:
            return m.group(1)
    return None


def with_cloud_id(text: str, cloud_id: str | None) -> str:
    """``text`` with its ``instance-id=<id>`` token(s) set to ``cloud_id`` (None: taken out)."""
    def swap(m: re.Match[str]) -> str:
        lead = m.group(0)[: m.start(1) - m.start(0) - len("instance-id=")]
        return f"{lead}instance-id={cloud_id}" if cloud_id else lead
    return _CLOUD_ID.sub(swap, text).strip(" ,;")


# ------------------------------------------------------------------ records


def _plain(value: Any) -> Any:
    """Unwrap SLURM 23.02+ number objects ``{"set", "infinite", "number"}`` (unset/infinite: None)
    and one-element state lists; other values pass unchanged."""
    t = type(value)
    if t is int or t is float or t is str or value is None:  # the common case, checked first
        return value
    if isinstance(value, Mapping) and "number" in value:
        return value["number"] if value.get("set", True) and not value.get("infinite") else None
    return value


# SLURM's "not set" and "infinite" for 32- and 64-bit fields (NO_VAL, INFINITE, NO_VAL64, INFINITE64)
_UNSET = frozenset({0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF})


def _memory(r: "Reader", key: str) -> int | None:
    """A memory request in MB; an absent, unset, negative or NO_VAL one is None, so the other
    field (per node or per CPU) or none at all decides, never a negative demand. An unusable one
    (not finite, beyond 2^31-1 MB, not a number) is reported by the reader."""
    raw = r.record.get(key)
    if type(raw) is int and 0 <= raw <= MAX_COUNT:  # the common case, checked first
        return raw
    raw = _plain(raw)
    if raw is None or (number_problem(raw, -math.inf, math.inf) is None and (raw < 0 or raw in _UNSET)):
        return None
    return r.integer(key)


class Reader:
    """Typed access to one record's fields, collecting RecordProblems instead of raising."""

    def __init__(self, record: Mapping[str, Any], kind: str, name: str, errors: list[RecordProblem]) -> None:
        self.record, self.kind, self.name, self.errors = record, kind, name, errors

    def problem(self, key: str, words: str, reason: str = "wrong_type") -> None:
        self.errors.append(RecordProblem(self.kind, self.name, key, words, reason))

    def number(self, key: str, default: float = 0.0, *, required: bool = False,
               high: float = _MAX_TIME) -> float:
        """A number in [0, ``high``] (epoch seconds by default); else ``default``, with a problem."""
        value = self.record.get(key)
        if type(value) is int and 0 <= value <= high:  # the common case, checked first
            return float(value)
        value = _plain(value)
        if value is None:
            if required:
                self.problem(key, "is missing", "unreadable")
            return default
        bad = number_problem(value, 0, high)
        if bad is not None:
            self.problem(key, bad[1], bad[0])
            return default
        return float(value)

    def integer(self, key: str, default: int = 0, *, required: bool = False) -> int:
        """A count in [0, MAX_COUNT]; else ``default``, with a problem."""
        value = self.record.get(key)
        if type(value) is int and 0 <= value <= MAX_COUNT:  # the common case, checked first
            return value
        return int(self.number(key, default, required=required, high=MAX_COUNT))

    def text(self, key: str, default: str = "") -> str:
        value = self.record.get(key)
        if type(value) is str:  # the common case, checked first
            return value
        if value is None:
            return default
        if not isinstance(value, str):
            self.problem(key, f"is not a string: {value!r}")
            return default
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.record.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            self.problem(key, f"is not a list of strings: {value!r}")
            return ()
        return tuple(value)


def _records(doc: Any, key: str, command: str) -> list[Any]:
    if not isinstance(doc, Mapping):
        raise ValueError(f"{command}: reply is not a JSON object")
    errs = doc.get("errors") or []
    if errs:
        raise ValueError(f"{command}: SLURM reported an error: {_error_text(errs)} "
                         "(slurmctld unreachable or refusing?)")
    records = doc.get(key)
    if not isinstance(records, list):
        raise ValueError(f"{command}: reply has no {key!r} list")
    return records


def _error_text(errs: Any) -> str:
    if not isinstance(errs, list):
        return repr(errs)
    out = []
    for e in errs:
        if isinstance(e, Mapping):
            out.append(f"{e.get('error') or e.get('description') or '?'} (errno {e.get('errno', '?')})")
        else:
            out.append(repr(e))
    return "; ".join(out)


def parse_nodes(doc: Any) -> tuple[list[SlurmNode], list[RecordProblem]]:
    """The nodes of a ``sinfo --json`` reply. A node without a usable name or state is left out
    (with a problem); a bad optional field gets its default (with a problem). Raises ValueError if
    the reply as a whole is unusable (:class:`RecordError` if one record cannot be read at all)."""
    nodes: list[SlurmNode] = []
    errors: list[RecordProblem] = []
    for i, rec in enumerate(_records(doc, "nodes", "sinfo --json")):
        if type(rec) is not dict and not isinstance(rec, Mapping):
            errors.append(RecordProblem("node", f"#{i}", "-", "is not a JSON object"))
            continue
        name = rec.get("name")
        if not isinstance(name, str) or not name:
            errors.append(RecordProblem("node", f"#{i}", "name", f"is missing or not a string: {name!r}"))
            continue
        try:
            node = _node(rec, Reader(rec, "node", name, errors))
        except Exception as exc:  # noqa: BLE001 - hostile data: name the record, never a bare traceback
            raise RecordError("sinfo --json", "node", name, exc) from exc
        if node is not None:
            nodes.append(node)
    return nodes, errors


def _node(rec: Mapping[str, Any], r: Reader) -> SlurmNode | None:
    base = rec.get("state")
    flags = r.strings("state_flags")
    if isinstance(base, list) and base and all(isinstance(x, str) for x in base):
        # SLURM 23.02+: "state": ["IDLE", "DRAIN", ...], base state first.
        base, flags = base[0], tuple(base[1:]) + flags
    if not isinstance(base, str) or not base:
        r.problem("state", f"is missing or not a string: {base!r}")
        return None
    return SlurmNode(
        name=r.name,
        state=short_state(base, flags),
        base_state=base.lower(),
        flags=flag_names(flags),
        reason=r.text("reason"),
        reason_changed_at=r.number("reason_changed_at"),
        cpus=r.integer("cpus", required=True),
        alloc_cpus=r.integer("alloc_cpus"),
        real_memory=r.integer("real_memory"),
        alloc_memory=r.integer("alloc_memory"),
        last_busy=r.number("last_busy"),
        slurmd_start_time=r.number("slurmd_start_time"),
        boot_time=r.number("boot_time"),
        address=r.text("address") or None,
        hostname=r.text("hostname") or None,
        comment=r.text("comment"),
        extra=r.text("extra"),
        features=r.text("features"),
        partitions=r.strings("partitions"),
    )


def parse_jobs(doc: Any) -> tuple[list[SlurmJob], list[RecordProblem]]:
    """The jobs of a ``squeue --json`` reply (all states: 22.05's ``--json`` ignores filters).
    A job whose size is unusable is kept (it may hold nodes) but marked ``sized=False``."""
    jobs: list[SlurmJob] = []
    errors: list[RecordProblem] = []
    for i, rec in enumerate(_records(doc, "jobs", "squeue --json")):
        if type(rec) is not dict and not isinstance(rec, Mapping):
            errors.append(RecordProblem("job", f"#{i}", "-", "is not a JSON object"))
            continue
        job_id = rec.get("job_id")
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            errors.append(RecordProblem("job", f"#{i}", "job_id", f"is missing or not a number: {job_id!r}"))
            continue
        try:
            job = _job(rec, job_id, Reader(rec, "job", str(job_id), errors))
        except Exception as exc:  # noqa: BLE001 - hostile data: name the record, never a bare traceback
            raise RecordError("squeue --json", "job", str(job_id), exc) from exc
        if job is not None:
            jobs.append(job)
    return jobs, errors


def _job(rec: Mapping[str, Any], job_id: int, r: Reader) -> SlurmJob | None:
    errors = r.errors
    state = job_state(rec)
    if not state:
        r.problem("job_state", "is missing", "unreadable")
        return None
    pending = state == "PENDING"
    if not pending and state not in ACTIVE_JOB_STATES:
        return None  # finished: holds no node and is no demand (squeue lists it for MinJobAge)
    before = len(errors)  # problems from here on are in the job's size
    cpus = max(r.integer("cpus", 1), 1)
    node_count = max(r.integer("node_count", 1), 1)
    if not pending:
        try:
            nodes = expand_hostlist(r.text("nodes"))
        except ValueError as exc:
            r.problem("nodes", str(exc), "unreadable")
            nodes = ()
        # no limit: absent, infinite, or SLURM's NO_VAL/INFINITE integers (end_time is then start + 1 year)
        limit = time_limit(rec)
        end = r.number("end_time") if limit is not None else None
        # positional: this runs for every running job every poll
        return SlurmJob(job_id, state, nodes, cpus, node_count, None, None, "None", "", r.number("start_time"),
                        end, 0.0, bool(rec.get("requeue", True)), 1, len(errors) == before, "", "", False,
                        limit, r.text("user_name"), r.text("account"), r.text("name"))
    array_text = r.text("array_task_string")
    tasks = 1
    if array_text and rec.get("array_task_id") is None:
        try:
            tasks = array_task_count(array_text)
        except ValueError as exc:
            r.problem("array_task_string", f"cannot be read: {array_text[:60]!r} ({exc})", "unreadable")
    memory_per_node = _memory(r, "memory_per_node")
    memory_per_cpu = _memory(r, "memory_per_cpu")
    sized = len(errors) == before
    if not sized:
        errors[before:] = [replace(e, problem=e.problem + "; the job is left out of demand")
                           for e in errors[before:]]
    return SlurmJob(job_id, state, (), cpus, node_count, memory_per_node, memory_per_cpu,
                    r.text("state_reason", "None"), r.text("partition"), 0.0, None, r.number("submit_time"),
                    bool(rec.get("requeue", True)), tasks, sized, r.text("features"),
                    gres_per_node(r.text("tres_per_node"), r.text("tres_per_job"), r.text("tres_per_task"),
                                  node_count, r.integer("tasks", 1)),
                    _exclusive(rec), time_limit(rec), r.text("user_name"), r.text("account"), r.text("name"))


def job_state(rec: Mapping[str, Any]) -> str:
    """A job record's base state, upper case ("" when missing); SLURM 23.02+ gives a list."""
    state = rec.get("job_state")
    if isinstance(state, list):
        state = state[0] if state else None
    return state.upper() if isinstance(state, str) else ""


def time_limit(rec: Mapping[str, Any]) -> float | None:
    """The job's time limit in seconds (squeue gives minutes); None when absent, INFINITE or NO_VAL."""
    minutes = _plain(rec.get("time_limit"))
    return float(minutes) * 60.0 if type(minutes) is int and minutes not in _UNSET else None


def _exclusive(rec: Mapping[str, Any]) -> bool:
    """--exclusive: 22.05 ``shared`` is ``"none"``; 23.02+ lists (``["none"]``, ``exclusive: ["true"]``)."""
    shared, excl = rec.get("shared"), rec.get("exclusive")
    shared = shared if isinstance(shared, list) else [shared]
    excl = excl if isinstance(excl, list) else [excl]
    return "none" in shared or any(x in (True, "true", "user", "mcs", "topo") for x in excl)
