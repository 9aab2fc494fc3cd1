"""Pure parsing of SLURM 22.05 ``sinfo --json`` / ``squeue --json`` (openapi v0.0.38) replies.

No I/O here: :mod:`nodemanager.scheduler.slurm` runs the commands and hands the decoded JSON in.
Every problem with a record is reported as a :class:`FieldError` naming the node (or job) and the
field, and the other records are still parsed.

State: :func:`short_state` turns the JSON's base ``state`` plus ``state_flags`` into what
``sinfo -o %t`` prints (``idle``, ``mix``, ``alloc``, ``drng``, ``drain``, ``down*``, ``idle*``,
``comp``, ...), following SLURM's ``node_state_string_compact``; the core maps that to the
matrix's worker_state.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from nodemanager.model import Demand
from nodemanager.scheduler.port import DRAIN_REASON_PREFIX

__all__ = [
    "FieldError",
    "SlurmNode",
    "SlurmJob",
    "short_state",
    "parse_nodes",
    "parse_jobs",
    "expand_hostlist",
    "array_task_count",
    "demand_from_jobs",
    "drain_reason",
    "request_id_of",
    "cloud_id_of",
    "ACTIVE_JOB_STATES",
    "DEMAND_REASONS",
]

# Job states that hold a node: the node is not free while any of these is on it.
ACTIVE_JOB_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED",
                               "SIGNALING", "STAGE_OUT", "RESIZING"})
# Pending reasons that more nodes would cure; held, dependent, throttled or limited jobs are not demand.
DEMAND_REASONS = frozenset({"None", "Resources", "Priority", "NodeDown", "ReqNodeNotAvail"})

_REQUEST_ID = re.compile(r"\[req=([A-Za-z0-9_.:-]+)\]\s*$")
_CLOUD_ID = re.compile(r"(?:^|[\s,;])instance-id=([^\s,;]+)")


@dataclass(frozen=True, slots=True)
class FieldError:
    """A record that could not be (fully) read: ``what`` is ``node NAME`` or ``job ID``."""

    what: str
    field: str
    problem: str

    def __str__(self) -> str:
        return f"{self.what}: field {self.field!r} {self.problem}"


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
    """One ``squeue --json`` job record, typed. ``nodes`` is the expanded node list."""

    job_id: int
    state: str
    nodes: tuple[str, ...]
    cpus: int
    node_count: int
    memory_per_node: int | None
    memory_per_cpu: int | None
    state_reason: str
    partition: str
    start_time: float
    end_time: float | None      # None: no time limit
    submit_time: float
    requeue: bool
    array_tasks: int            # pending array records: how many tasks this record stands for


# ------------------------------------------------------------------ state


_BASE_SHORT = {"idle": "IDLE", "allocated": "ALLOC", "mixed": "MIX", "down": "DOWN",
               "future": "FUTR", "unknown": "UNK", "error": "ERROR"}
_FLAG_ALIASES = {"MAINT": "MAINTENANCE", "NO_RESPOND": "NOT_RESPONDING",
                 "REBOOT": "REBOOT_REQUESTED", "NET": "PERFCTRS", "POWER_SAVE": "POWERED_DOWN"}
# Suffix characters in SLURM's order of precedence: maint, reboot, powering up/down, off, pending off, no response.
_SUFFIXES = (("MAINTENANCE", "$"), ("REBOOT_REQUESTED", "@"), ("POWERING_UP", "#"),
             ("POWERING_DOWN", "%"), ("POWERED_DOWN", "~"), ("POWER_DOWN", "!"),
             ("NOT_RESPONDING", "*"))


def short_state(base: str, flags: Iterable[str]) -> str:
    """The ``sinfo %t`` form of a node whose JSON ``state`` is ``base`` and ``state_flags`` ``flags``."""
    f = {_FLAG_ALIASES.get(x.upper(), x.upper()) for x in flags}
    b = base.lower()
    alloc_like = b in ("allocated", "mixed")
    no_resp = "NOT_RESPONDING" in f

    def suffix() -> str:
        for flag, ch in _SUFFIXES:
            if flag in f:
                return ch
        return ""

    if "MAINTENANCE" in f and not ("DRAIN" in f or alloc_like or b == "down"):
        return "maint*" if no_resp else "maint"
    if ("REBOOT_REQUESTED" in f or "REBOOT_ISSUED" in f) and not alloc_like:
        if "REBOOT_ISSUED" in f:
            return "boot^"
        return "boot*" if no_resp else "boot"
    if "DRAIN" in f:
        word = "DRNG" if ("COMPLETING" in f or alloc_like) else "DRAIN"
        return (word + suffix()).lower()
    if "FAIL" in f:
        word = "FAILG" if ("COMPLETING" in f or b == "allocated") else "FAIL"
        return (word + ("*" if no_resp else "")).lower()
    if b == "down":
        return ("DOWN" + suffix()).lower()
    if b == "allocated":
        s = suffix()
        return ("ALLOC" + (s or ("+" if "COMPLETING" in f else ""))).lower()
    if "COMPLETING" in f:
        return ("COMP" + suffix()).lower()
    if b == "idle":
        s = suffix()
        if s:
            return ("IDLE" + s).lower()
        if "PLANNED" in f:
            return "plnd"
        if "PERFCTRS" in f:
            return "npc"
        if "RESERVED" in f:
            return "resv"
        return "idle"
    if b == "mixed":
        s = suffix()
        if not s and "PLANNED" in f:
            return "plnd"
        return ("MIX" + s).lower()
    short = _BASE_SHORT.get(b)
    if short is None:
        return b or "?"
    return (short + ("*" if no_resp else "")).lower()


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


# ------------------------------------------------------------------ hostlists


def expand_hostlist(text: str) -> tuple[str, ...]:
    """``node[1-3,05],gpu1`` → ``(node1, node2, node3, node05, gpu1)`` (SLURM hostlist syntax)."""
    names: list[str] = []
    for item in _split_top(text):
        names.extend(_expand_one(item))
    return tuple(names)


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur))
    return [p for p in (x.strip() for x in parts) if p]


def _expand_one(item: str) -> list[str]:
    start = item.find("[")
    if start < 0:
        return [item]
    end = item.find("]", start)
    if end < 0:
        raise ValueError(f"unbalanced '[' in hostlist {item!r}")
    prefix, body, rest = item[:start], item[start + 1:end], item[end + 1:]
    tails = _expand_one(rest) if rest else [""]
    out: list[str] = []
    for part in body.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"bad range {part!r} in hostlist {item!r}")
        width = len(lo)
        for i in range(int(lo), int(hi or lo) + 1):
            out.extend(f"{prefix}{i:0{width}d}{tail}" for tail in tails)
    return out


def array_task_count(text: str) -> int:
    """How many tasks a pending array record like ``4-20%3`` or ``1,3,5-7:2`` stands for."""
    spec = text.split("%", 1)[0].strip()
    total = 0
    for part in spec.split(","):
        if not part:
            continue
        rng, _, step_text = part.partition(":")
        lo, _, hi = rng.partition("-")
        step = int(step_text) if step_text else 1
        total += (int(hi or lo) - int(lo)) // max(step, 1) + 1
    return max(total, 1)


# ------------------------------------------------------------------ records


def _plain(value: Any) -> Any:
    """Unwrap SLURM 23.02+ number objects ``{"set", "infinite", "number"}`` (unset/infinite: None)
    and one-element state lists; other values pass unchanged."""
    if isinstance(value, Mapping) and "number" in value:
        return value["number"] if value.get("set", True) and not value.get("infinite") else None
    return value


_NO_VAL = 0xFFFFFFFE  # SLURM's "not set" for 32-bit fields (and larger ones for 64-bit)


def _memory(r: "_Reader", key: str) -> int | None:
    """A memory request in MB; an absent, unset, negative or NO_VAL one is None, so the other
    field (per node or per CPU) or none at all decides, never a negative demand."""
    if _plain(r.record.get(key)) is None:
        return None
    value = r.integer(key)
    return value if 0 <= value < _NO_VAL else None


class _Reader:
    """Typed access to one record's fields, collecting FieldErrors instead of raising."""

    def __init__(self, record: Mapping[str, Any], what: str, errors: list[FieldError]) -> None:
        self.record, self.what, self.errors = record, what, errors

    def number(self, key: str, default: float = 0.0, *, required: bool = False) -> float:
        value = _plain(self.record.get(key))
        if value is None:
            if required:
                self.errors.append(FieldError(self.what, key, "is missing"))
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.errors.append(FieldError(self.what, key, f"is not a number: {value!r}"))
            return default
        return float(value)

    def integer(self, key: str, default: int = 0, *, required: bool = False) -> int:
        return int(self.number(key, default, required=required))

    def text(self, key: str, default: str = "") -> str:
        value = self.record.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.errors.append(FieldError(self.what, key, f"is not a string: {value!r}"))
            return default
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.record.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            self.errors.append(FieldError(self.what, key, f"is not a list of strings: {value!r}"))
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


def parse_nodes(doc: Any) -> tuple[list[SlurmNode], list[FieldError]]:
    """The nodes of a ``sinfo --json`` reply. A node without a usable name or state is left out
    (with an error); a bad optional field gets its default (with an error). Raises ValueError if
    the reply as a whole is unusable."""
    nodes: list[SlurmNode] = []
    errors: list[FieldError] = []
    for i, rec in enumerate(_records(doc, "nodes", "sinfo --json")):
        if not isinstance(rec, Mapping):
            errors.append(FieldError(f"node #{i}", "-", "is not a JSON object"))
            continue
        name = rec.get("name")
        if not isinstance(name, str) or not name:
            errors.append(FieldError(f"node #{i}", "name", f"is missing or not a string: {name!r}"))
            continue
        r = _Reader(rec, f"node {name}", errors)
        base = rec.get("state")
        flags = r.strings("state_flags")
        if isinstance(base, list) and base and all(isinstance(x, str) for x in base):
            # SLURM 23.02+: "state": ["IDLE", "DRAIN", ...], base state first.
            base, flags = base[0], tuple(base[1:]) + flags
        if not isinstance(base, str) or not base:
            errors.append(FieldError(r.what, "state", f"is missing or not a string: {base!r}"))
            continue
        nodes.append(SlurmNode(
            name=name,
            state=short_state(base, flags),
            base_state=base.lower(),
            flags=tuple(_FLAG_ALIASES.get(f.upper(), f.upper()) for f in flags),
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
        ))
    return nodes, errors


def parse_jobs(doc: Any) -> tuple[list[SlurmJob], list[FieldError]]:
    """The jobs of a ``squeue --json`` reply (all states: 22.05's ``--json`` ignores filters)."""
    jobs: list[SlurmJob] = []
    errors: list[FieldError] = []
    for i, rec in enumerate(_records(doc, "jobs", "squeue --json")):
        if not isinstance(rec, Mapping):
            errors.append(FieldError(f"job #{i}", "-", "is not a JSON object"))
            continue
        job_id = rec.get("job_id")
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            errors.append(FieldError(f"job #{i}", "job_id", f"is missing or not a number: {job_id!r}"))
            continue
        r = _Reader(rec, f"job {job_id}", errors)
        raw_state = rec.get("job_state")
        if isinstance(raw_state, list):
            raw_state = raw_state[0] if raw_state else None
        state = raw_state.upper() if isinstance(raw_state, str) else ""
        if not state:
            errors.append(FieldError(r.what, "job_state", "is missing"))
            continue
        try:
            nodes = expand_hostlist(r.text("nodes"))
        except ValueError as exc:
            errors.append(FieldError(r.what, "nodes", str(exc)))
            nodes = ()
        time_limit = _plain(rec.get("time_limit"))
        end = r.number("end_time") if isinstance(time_limit, int) and not isinstance(time_limit, bool) else None
        array_text = r.text("array_task_string")
        tasks = 1
        if state == "PENDING" and array_text and rec.get("array_task_id") is None:
            try:
                tasks = array_task_count(array_text)
            except ValueError:
                errors.append(FieldError(r.what, "array_task_string", f"cannot be read: {array_text!r}"))
        jobs.append(SlurmJob(
            job_id=job_id,
            state=state,
            nodes=nodes,
            cpus=max(r.integer("cpus", 1), 1),
            node_count=max(r.integer("node_count", 1), 1),
            memory_per_node=_memory(r, "memory_per_node"),
            memory_per_cpu=_memory(r, "memory_per_cpu"),
            state_reason=r.text("state_reason", "None"),
            partition=r.text("partition"),
            start_time=r.number("start_time"),
            end_time=end,
            submit_time=r.number("submit_time"),
            requeue=bool(rec.get("requeue", True)),
            array_tasks=tasks,
        ))
    return jobs, errors


def demand_from_jobs(jobs: Iterable[SlurmJob], partitions: frozenset[str] = frozenset(),
                     reasons: frozenset[str] = DEMAND_REASONS) -> tuple[Demand, ...]:
    """Pending jobs that more nodes would start, grouped by per-node need.

    A job asking for N nodes counts as N nodes' worth of demand (``count``); per node it needs
    ``ceil(cpus / nodes)`` cores and ``memory_per_node`` (or ``memory_per_cpu`` × cores) MB.
    Held, dependent, throttled (``JobArrayTaskLimit``) or limit-blocked jobs are not demand.
    """
    groups: dict[tuple[int, int], list[float]] = {}
    counts: dict[tuple[int, int], int] = {}
    for job in jobs:
        if job.state != "PENDING" or job.state_reason not in reasons:
            continue
        if partitions and not (set(job.partition.split(",")) & partitions):
            continue
        per_node_cpus = math.ceil(job.cpus / job.node_count)
        if job.memory_per_node is not None:
            mem = job.memory_per_node
        elif job.memory_per_cpu is not None:
            mem = job.memory_per_cpu * per_node_cpus
        else:
            mem = 0
        key = (per_node_cpus, mem)
        counts[key] = counts.get(key, 0) + job.node_count * job.array_tasks
        if job.submit_time:
            groups.setdefault(key, []).append(job.submit_time)
    return tuple(
        Demand(cpus=c, ram_mb=m, count=counts[(c, m)],
               oldest_submit=min(groups[(c, m)]) if groups.get((c, m)) else None)
        for (c, m) in sorted(counts)
    )
