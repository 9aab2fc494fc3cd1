"""Snapshots as JSON: read one into a :class:`~nodemanager.model.Snapshot`, write one back.

The format (documented with an example in ``docs/plan.md``)::

    {"now": E, "polled_at": {"cloud": E, "scheduler": E},
     "cloud_nodes": [{"id": S, "name": S, "size": S, "launched_at": E, "state"?: S,
                      "private_ip"?: S, "hostname"?: S, "tags"?: {S: S}, "reclaim_at"?: E, "cloud"?: S}],
     "workers": [{"name": S, "scheduler": KIND, "state"?: S, "ad"?: {...},
                  "cloud_id"?: S, "address"?: S, "last_heard"?: E, "state_since"?: E,
                  "registered_at"?: E, "cpus"?: N, "cpus_busy"?: N, "ram_mb"?: N,
                  "running_jobs"?: N, "job_end_times"?: [E], "retirement_end"?: E|"never", "draining"?: B,
                  "drain_reason"?: S, "drain_request_id"?: S, "drain_since"?: E,
                  "jobs"?: [...], "predicted_end_times"?: [E]}],   (see nodemanager.snapshot_jobs)
     "demand": [{"cpus": N, "ram_mb": N, "count": N, "scratch_mb"?: N, "size"?: S,
                 "oldest_submit"?: E, "walltime"?: N, "gpus"?: N, "requirements"?: S, "features"?: S,
                 "partition"?: S, "sizes"?: [S], "unmatched"?: S, "user"?: S, "name"?: S, "runtime"?: N}],
     "in_flight": [{"node": S, "action": "drain"|"destroy"|"boot"|"cancel_drain", "since": E,
                    "size"?: S, "request_id"?: S}],
     "held"?: [S], "forced_drains"?: [S], "paused"?: S, "quota"?: N, "blocked_sizes"?: [S], "unconfirmed"?: [S],
     "recent_destroys"?: [E], "cloud_clock_skew"?: N, "protected_sizes"?: {S: S},
     "cancel_drains"?: [S], "destroyed"?: [S], "idle_graces"?: {S: [N, S]},
     "consolidation_backoff"?: {S: [N|null, S]}, "arrivals"?: [E], "known_prices"?: {S: N},
     "recent_boots"?: [E], "scheduler_clock_ahead"?: N, "cloud_polled"?: {S: E}}

``KIND`` is a registered scheduler kind's name (:data:`nodemanager.configuration.kinds.SCHEDULER_KINDS`:
``htcondor``, ``slurm``, ``simulated``), whose classifier reads the worker. For an HTCondor worker, fields missing from the worker object are taken from its ``ad``
(``State/Activity``, ``CloudInstanceID``, ``LastHeardFrom``, ``EnteredCurrentState``,
``DaemonStartTime``, cpus, memory, ``NumDynamicSlots``, ``Draining``, ``LastDrainStartTime``...).

Errors raise :class:`SnapshotError` naming the JSON field path, e.g.
``workers[3].last_heard: expected a number``. Numbers are checked too: times lie between 1970 and
2200 (``nodes[3].launched_at: a number of 400 digits is not a time``), counts are whole, not
negative and at most 10^12; ``NaN``, ``Infinity`` and nesting too deep to read are errors as well.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import Any, Callable, Sequence

from nodemanager.model import CloudNode, Demand, InFlight, Size, Snapshot, Worker, frozen_map
from nodemanager.scheduler import classified
from nodemanager.scheduler.htcondor_ads import htcondor_worker_fields
from nodemanager.configuration.kinds import scheduler_kinds
from nodemanager.snapshot_values import (MAX_COUNT, MAX_TIME, SnapshotError, fail as _fail, Unusable
                                        as _Unusable, int_token as _int_token, float_token as
                                        _float_token, read_number as _number, read_offset as
                                        _offset, parse_time, read_int as _int, check_plain as
                                        _plain, read_str as _str, read_bool as _bool, read_list as
                                        _list, read_obj as _obj, Fields as _Fields, read_strings as
                                        _strings)
from nodemanager.snapshot_jobs import JOB_FIELDS, jobs_json, read_jobs

__all__ = ["SnapshotError", "from_json", "loads", "load", "to_json", "dumps", "parse_time",
           "MAX_TIME", "MAX_COUNT", "MAX_BYTES", "match_sizes"]

MAX_BYTES = 128 * 1024 * 1024
"""Largest snapshot file ``load`` reads: 128 MiB (50,000 nodes take about 25 MB)."""

_IN_FLIGHT_ACTIONS = ("drain", "destroy", "boot", "cancel_drain")
_MAX_DEPTH = 200            # nesting reported by line and column (a snapshot needs 4 levels)


def _cloud_node(v: Any, path: str) -> CloudNode:
    f = _Fields(v, path, ("id", "name", "size", "launched_at", "state", "private_ip", "hostname",
                          "tags", "reclaim_at", "cloud"))
    tags = f.opt("tags", _obj, {})
    for k, t in tags.items():
        _str(t, f"{f.sub('tags')}.{k}")
    return CloudNode(id=f.req("id", _str), name=f.opt("name", _str) or f.req("id", _str),
                     size=f.req("size", _str), launched_at=f.req("launched_at", _number),
                     state=f.opt("state", _str, "running"), private_ip=f.opt("private_ip", _str),
                     hostname=f.opt("hostname", _str), tags=frozen_map(tags),
                     reclaim_at=f.opt("reclaim_at", _number), cloud=f.opt("cloud", _str, ""))


_WORKER_FIELDS = ("name", "scheduler", "state", "ad", "cloud_id", "address", "last_heard",
                  "state_since", "registered_at", "cpus", "cpus_busy", "ram_mb", "running_jobs",
                  "job_end_times", "retirement_end", "draining", "drain_reason", "drain_request_id",
                  "drain_since") + JOB_FIELDS


_NEVER = float("inf")


def _retirement_end(x: Any, path: str) -> float:
    """A time, or ``"never"`` (a drain that never evicts, as SLURM's)."""
    return _NEVER if x == "never" else _number(x, path)


def _worker(v: Any, path: str) -> Worker:
    f = _Fields(v, path, _WORKER_FIELDS)
    scheduler = f.req("scheduler", _str)
    if scheduler not in scheduler_kinds():
        raise _fail(f.sub("scheduler"), f"expected one of {', '.join(scheduler_kinds())}")
    ad = dict(f.opt("ad", _obj, {}))
    _plain(ad, f.sub("ad"))
    derived = htcondor_worker_fields(ad) if ad else {}
    values: dict[str, Any] = {
        "state": f.opt("state", _str),
        "cloud_id": f.opt("cloud_id", _str),
        "address": f.opt("address", _str),
        "last_heard": f.opt("last_heard", _number),
        "state_since": f.opt("state_since", _number),
        "registered_at": f.opt("registered_at", _number),
        "cpus": f.opt("cpus", _int),
        "cpus_busy": f.opt("cpus_busy", _int),
        "ram_mb": f.opt("ram_mb", _int),
        "running_jobs": f.opt("running_jobs", _int),
        "draining": f.opt("draining", _bool),
        "drain_reason": f.opt("drain_reason", _str),
        "drain_request_id": f.opt("drain_request_id", _str),
        "drain_since": f.opt("drain_since", _number),
        "retirement_end": f.opt("retirement_end", _retirement_end),
    }
    for key, val in list(values.items()):
        if val is None and key in derived:
            values[key] = derived[key]
    kwargs = {k: v for k, v in values.items() if v is not None}
    ends = f.opt("job_end_times", _list, [])
    kwargs["job_end_times"] = tuple(_number(t, f"{f.sub('job_end_times')}[{i}]")
                                    for i, t in enumerate(ends))
    kwargs.update(read_jobs(f))
    return classified(Worker(name=f.req("name", _str), scheduler=scheduler, ad=frozen_map(ad), **kwargs))


def _demand(v: Any, path: str) -> Demand:
    f = _Fields(v, path, ("cpus", "ram_mb", "count", "scratch_mb", "size", "oldest_submit",
                          "walltime", "gpus", "requirements", "features", "partition", "sizes", "unmatched",
                          "user", "name", "runtime"))
    return Demand(cpus=f.opt("cpus", lambda x, p: _int(x, p, 1), 1),
                  ram_mb=f.opt("ram_mb", _int, 0), count=f.opt("count", _int, 1),
                  scratch_mb=f.opt("scratch_mb", _int, 0), size=f.opt("size", _str),
                  oldest_submit=f.opt("oldest_submit", _number), walltime=f.opt("walltime", _number),
                  gpus=f.opt("gpus", _int, 0), requirements=f.opt("requirements", _str),
                  features=f.opt("features", _str), partition=f.opt("partition", _str),
                  sizes=f.opt("sizes", _strings), unmatched=f.opt("unmatched", _str),
                  user=f.opt("user", _str), name=f.opt("name", _str), runtime=f.opt("runtime", _number))


def match_sizes(s: Snapshot, sizes: Sequence[Size], scheduler: str, source: str = "") -> Snapshot:
    """``s`` with each demand item's eligible sizes filled in by the scheduler side
    (:func:`nodemanager.scheduler.demand_match.match_demand`); an item it cannot match raises
    :class:`SnapshotError` naming ``demand[i]`` (after ``source``, a file name, when given)."""
    from nodemanager.scheduler.demand_match import match_demand
    out = []
    for i, d in enumerate(s.demand):
        try:
            out.append(match_demand(d, sizes, scheduler))
        except ValueError as exc:
            prefix = f"{source}: " if source else ""
            raise SnapshotError(f"{prefix}demand[{i}].{exc}") from None
    return replace(s, demand=tuple(out))


def _in_flight(v: Any, path: str) -> InFlight:
    f = _Fields(v, path, ("node", "action", "since", "size", "request_id"))
    action = f.req("action", _str)
    if action not in _IN_FLIGHT_ACTIONS:
        raise _fail(f.sub("action"), f"expected one of {', '.join(_IN_FLIGHT_ACTIONS)}")
    return InFlight(node=f.req("node", _str), action=action, since=f.req("since", _number),
                    size=f.opt("size", _str), request_id=f.opt("request_id", _str))


def _items(f: _Fields, key: str, conv: Callable[[Any, str], Any]) -> tuple:
    return tuple(conv(x, f"{key}[{i}]") for i, x in enumerate(f.opt(key, _list, [])))


def from_json(data: Any) -> Snapshot:
    """A :class:`Snapshot` from parsed JSON (raises :class:`SnapshotError` naming the field)."""
    f = _Fields(data, "", ("now", "polled_at", "cloud_nodes", "workers", "demand", "in_flight",
                           "held", "forced_drains", "paused", "quota", "blocked_sizes",
                           "recent_destroys", "unconfirmed", "cloud_clock_skew",
                           "protected_sizes", "cancel_drains", "destroyed", "idle_graces",
                           "consolidation_backoff", "arrivals", "known_prices", "recent_boots",
                           "scheduler_clock_ahead", "cloud_polled"))
    polled = f.req("polled_at", _obj)
    polled_at = {k: _number(t, f"polled_at.{k}") for k, t in polled.items()}
    nodes = _items(f, "cloud_nodes", _cloud_node)
    seen: dict[str, int] = {}
    for i, n in enumerate(nodes):
        if n.id in seen:
            raise _fail(f"cloud_nodes[{i}].id", f"duplicate id {n.id!r} (also cloud_nodes[{seen[n.id]}])")
        seen[n.id] = i
    return Snapshot(
        now=f.req("now", _number),
        polled_at=frozen_map(polled_at),
        cloud_nodes=nodes,
        workers=_items(f, "workers", _worker),
        demand=_items(f, "demand", _demand),
        in_flight=_items(f, "in_flight", _in_flight),
        held=f.opt("held", _strings, frozenset()),
        forced_drains=f.opt("forced_drains", _strings, frozenset()),
        paused=f.opt("paused", _str),
        quota=f.opt("quota", _int),
        blocked_sizes=f.opt("blocked_sizes", _strings, frozenset()),
        recent_destroys=tuple(_number(t, f"recent_destroys[{i}]")
                              for i, t in enumerate(f.opt("recent_destroys", _list, []))),
        unconfirmed=f.opt("unconfirmed", _strings, frozenset()),
        cloud_clock_skew=f.opt("cloud_clock_skew", _offset),
        protected_sizes=frozen_map({k: _str(v, f"protected_sizes.{k}") for k, v in
                                    f.opt("protected_sizes", _obj, {}).items()}),
        cancel_drains=f.opt("cancel_drains", _strings, frozenset()),
        destroyed=f.opt("destroyed", _strings, frozenset()),
        idle_graces=frozen_map({k: _idle_grace(v, f"idle_graces.{k}") for k, v in
                                f.opt("idle_graces", _obj, {}).items()}),
        consolidation_backoff=frozen_map({k: _backoff(v, f"consolidation_backoff.{k}") for k, v in
                                          f.opt("consolidation_backoff", _obj, {}).items()}),
        arrivals=tuple(_number(t, f"arrivals[{i}]") for i, t in enumerate(f.opt("arrivals", _list, []))),
        known_prices=frozen_map({k: _price(v, f"known_prices.{k}") for k, v in f.opt("known_prices", _obj, {}).items()}),
        recent_boots=tuple(_number(t, f"recent_boots[{i}]") for i, t in enumerate(f.opt("recent_boots", _list, []))),
        scheduler_clock_ahead=f.opt("scheduler_clock_ahead", _offset),
        cloud_polled=frozen_map({k: _number(t, f"cloud_polled.{k}") for k, t in
                                 f.opt("cloud_polled", _obj, {}).items()}),
    )


def _price(v: Any, path: str) -> float:
    """A price per hour: a finite number, not negative."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise _fail(path, "expected a price per hour (a number, not negative)")
    return float(v)


def _idle_grace(v: Any, path: str) -> tuple[float, str]:
    """A size's break-even idle grace: ``[seconds, why]``."""
    pair = _list(v, path)
    if len(pair) != 2:
        raise _fail(path, "expected [seconds, why]")
    seconds = _offset(pair[0], f"{path}[0]")
    if seconds < 0:
        raise _fail(f"{path}[0]", "must not be negative")
    return seconds, _str(pair[1], f"{path}[1]")


def _backoff(v: Any, path: str) -> tuple[float, str]:
    """A size's consolidation back-off: ``[times the margin, why]``, null times: paused."""
    pair = _list(v, path)
    if len(pair) != 2:
        raise _fail(path, "expected [times the margin or null, why]")
    factor = math.inf if pair[0] is None else _offset(pair[0], f"{path}[0]")
    if factor < 1:
        raise _fail(f"{path}[0]", "must be at least 1")
    return factor, _str(pair[1], f"{path}[1]")


def loads(text: str, source: str = "") -> Snapshot:
    """Parse snapshot JSON text; errors start with ``source`` (a file name) when given."""
    prefix = f"{source}: " if source else ""
    try:
        data = json.loads(text, parse_int=_int_token, parse_float=_float_token,
                          parse_constant=_Unusable)
    except json.JSONDecodeError as e:
        raise SnapshotError(f"{prefix}line {e.lineno} column {e.colno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise SnapshotError(f"{prefix}{_too_deep(text)}") from None
    try:
        return from_json(data)
    except SnapshotError as e:
        raise SnapshotError(f"{prefix}{e}") from None
    except RecursionError:  # an ad nested just short of the reader's limit
        raise SnapshotError(f"{prefix}{_too_deep(text)}") from None


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{\]}]')


def _too_deep(text: str) -> str:
    """Where ``text`` nests deeper than :data:`_MAX_DEPTH` (only run once reading failed)."""
    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        token = m.group()
        if token[0] in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                column = m.start() - text.rfind("\n", 0, m.start())
                return f"line {line} column {column}: nested deeper than {_MAX_DEPTH} levels"
        elif token[0] in "]}":
            depth -= 1
    return f"nested deeper than {_MAX_DEPTH} levels"


def load(path: str) -> Snapshot:
    """Read a snapshot file (``-`` reads standard input)."""
    from policy_matrix.files import FileRefused, describe_size, read_capped

    try:
        if path == "-":
            import sys
            path = "<stdin>"
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
            if len(data) > MAX_BYTES:
                raise FileRefused(f"a snapshot may be at most {describe_size(MAX_BYTES)}", "too big")
        else:
            data = read_capped(path, MAX_BYTES, what="a snapshot")
        text = data.decode("utf-8")
    except FileRefused as e:
        raise SnapshotError(f"{path}: {e}") from None
    except UnicodeDecodeError:
        raise SnapshotError(f"{path}: not UTF-8 text") from None
    return loads(text, path)


def _drop_defaults(d: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None and defaults.get(k, object()) != v}


_WORKER_DEFAULTS = {"last_heard": 0.0, "state_since": 0.0, "cpus": 0, "cpus_busy": 0,
                    "ram_mb": 0, "running_jobs": 0, "job_end_times": [], "draining": False,
                    "ad": {}, "drain_since": 0.0}


def to_json(s: Snapshot) -> dict[str, Any]:
    """The JSON form of ``s`` (``from_json(to_json(s)) == s`` for snapshots without ``ad`` values
    that JSON cannot hold)."""
    out: dict[str, Any] = {
        "now": s.now,
        "polled_at": dict(s.polled_at),
        "cloud_nodes": [_drop_defaults({
            "id": n.id, "name": n.name, "size": n.size, "launched_at": n.launched_at,
            "state": n.state, "private_ip": n.private_ip, "hostname": n.hostname,
            "tags": dict(n.tags), "reclaim_at": n.reclaim_at, "cloud": n.cloud},
            {"state": "running", "tags": {}, "cloud": ""})
            for n in s.cloud_nodes],
        "workers": [_drop_defaults({
            "name": w.name, "scheduler": w.scheduler, "state": w.state, "ad": dict(w.ad),
            "cloud_id": w.cloud_id, "address": w.address, "last_heard": w.last_heard,
            "state_since": w.state_since, "registered_at": w.registered_at, "cpus": w.cpus,
            "cpus_busy": w.cpus_busy, "ram_mb": w.ram_mb, "running_jobs": w.running_jobs,
            "job_end_times": list(w.job_end_times), "draining": w.draining,
            "retirement_end": "never" if w.retirement_end == _NEVER else w.retirement_end,
            "drain_reason": w.drain_reason, "drain_request_id": w.drain_request_id,
            "drain_since": w.drain_since, **jobs_json(w)},
            _WORKER_DEFAULTS) for w in s.workers],
        "demand": [_drop_defaults({
            "cpus": d.cpus, "ram_mb": d.ram_mb, "count": d.count, "scratch_mb": d.scratch_mb,
            "size": d.size, "oldest_submit": d.oldest_submit, "walltime": d.walltime, "gpus": d.gpus,
            "requirements": d.requirements, "features": d.features, "partition": d.partition,
            "sizes": sorted(d.sizes) if d.sizes is not None else None,
            "unmatched": d.unmatched, "user": d.user, "name": d.name, "runtime": d.runtime},
            {"scratch_mb": 0, "gpus": 0})
            for d in s.demand],
        "in_flight": [_drop_defaults({
            "node": f.node, "action": f.action, "since": f.since, "size": f.size,
            "request_id": f.request_id}, {}) for f in s.in_flight],
    }
    extra = {"held": sorted(s.held), "forced_drains": sorted(s.forced_drains),
             "paused": s.paused, "quota": s.quota, "blocked_sizes": sorted(s.blocked_sizes),
             "recent_destroys": list(s.recent_destroys), "unconfirmed": sorted(s.unconfirmed),
             "cloud_clock_skew": s.cloud_clock_skew, "protected_sizes": dict(s.protected_sizes) or None,
             "cancel_drains": sorted(s.cancel_drains), "destroyed": sorted(s.destroyed),
             "idle_graces": {k: list(v) for k, v in s.idle_graces.items()} or None,
             "consolidation_backoff": {k: [None if math.isinf(f) else f, why]
                                       for k, (f, why) in s.consolidation_backoff.items()} or None,
             "arrivals": list(s.arrivals), "known_prices": dict(s.known_prices) or None,
             "recent_boots": list(s.recent_boots), "scheduler_clock_ahead": s.scheduler_clock_ahead,
             "cloud_polled": dict(s.cloud_polled) or None}
    out.update({k: v for k, v in extra.items() if v not in (None, [])})
    return out


def dumps(s: Snapshot, indent: int | None = 1) -> str:
    """``to_json`` as text."""
    return json.dumps(to_json(s), indent=indent, sort_keys=False)
