"""``nodemanager plan --live``: preview a matrix or config edit on the running daemon's last cycle.

The daemon's last snapshot comes from ``GET /snapshot.json`` (no token needed on the daemon's own
host, ``[Manage] loopback_snapshot``; the admin token from elsewhere) and what the daemon
decided for it from ``GET /status.json`` of the same cycle: that is the baseline, exactly what
the running matrix and configuration do. The snapshot is then planned here, by the same core,
with ``--config`` and ``--matrix``; only the nodes whose action or ``blocked_by`` differ, and
the boots that differ, are printed. Where the daemon is and the token: as for the admin
commands (:mod:`nodemanager.commands.admin`).

Exit codes (as diff(1)): 0 nothing would change; 1 some node or boot would change; 2 the daemon
could not be reached or refused, its answer or a file is unusable, or bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any, Mapping

from nodemanager.model import Plan
from nodemanager.text import local_when

__all__ = ["run_live", "NodeChange", "BootChange", "live_changes", "changes_to_json",
           "format_changes", "LiveError"]

_CYCLE_TRIES = 3  # a cycle may end between the two requests: fetch again (cycles are seconds apart)


class LiveError(Exception):
    """Why the preview cannot be made, in one line (the daemon, its answer or a file)."""


@dataclass(frozen=True)
class NodeChange:
    """One node whose action or block would change: ``old`` as the daemon decided, ``new`` as
    the edited files decide."""

    node_id: str
    name: str
    old_tuple: str
    new_tuple: str
    old_rule: str
    new_rule: str
    old_action: str | None
    new_action: str | None
    old_blocked: str | None
    new_blocked: str | None
    old_reason: str
    new_reason: str


@dataclass(frozen=True)
class BootChange:
    """A size whose number of boots would change."""

    size: str
    old: int
    new: int
    reason: str


def live_changes(status: Mapping[str, Any], new: Plan) -> tuple[list[NodeChange], list[BootChange]]:
    """The nodes (and boot sizes) where ``new`` differs from the daemon's plan in ``status`` (its
    ``/status.json`` for the same cycle) in action or ``blocked_by``."""
    old_nodes = {n.get("node_id"): n for n in status.get("nodes") or ()}
    nodes = []
    for e in new.nodes:
        old = old_nodes.get(e.node_id) or {}
        action = e.action.value if e.action else None
        if (old.get("planned_action"), old.get("blocked_by")) == (action, e.blocked_by):
            continue
        # the matrix's tuple, without the detail the page shows beside it ("joined")
        old_tuple = old.get("matrix_tuple_text") or old.get("tuple_text") or "-"
        nodes.append(NodeChange(
            node_id=e.node_id, name=e.name, old_tuple=str(old_tuple),
            new_tuple=str(e.tuple), old_rule=str(old.get("rule") or "-"), new_rule=e.rule,
            old_action=old.get("planned_action"), new_action=action,
            old_blocked=old.get("blocked_by"), new_blocked=e.blocked_by,
            old_reason=str(old.get("why") or "-"), new_reason=e.reason))
    old_boots = {b["size"]: b for b in (status.get("summary") or {}).get("boots") or ()}
    new_boots = {b.size: b for b in new.boots}
    boots = []
    for size in sorted(set(old_boots) | set(new_boots)):
        before = int(old_boots[size]["count"]) if size in old_boots else 0
        after = new_boots[size].count if size in new_boots else 0
        if before != after:
            reason = new_boots[size].reason if size in new_boots else str(old_boots[size]["reason"])
            boots.append(BootChange(size, before, after, reason))
    return nodes, boots


def _action_text(action: str | None, blocked: str | None) -> str:
    text = action or "-"
    return f"{text} (blocked: {blocked})" if blocked else text


def _arrow(old: str, new: str) -> str:
    return new if old == new else f"{old} -> {new}"


def format_changes(nodes: list[NodeChange], boots: list[BootChange], header: str) -> str:
    """The changes as text: a header line, a table of nodes, the new reason of each, the boots."""
    from nodemanager.text import printable, short_rule
    lines = [header]
    if not nodes and not boots:
        lines.append("no node and no boot would change")
        return "\n".join(printable(line) for line in lines) + "\n"
    if nodes:
        rows = [("NODE", "NAME", "TUPLE", "RULE", "ACTION")]
        for c in nodes:
            rows.append((c.node_id, c.name, _arrow(c.old_tuple, c.new_tuple),
                         _arrow(short_rule(c.old_rule), short_rule(c.new_rule)),
                         f"{_action_text(c.old_action, c.old_blocked)} -> "
                         f"{_action_text(c.new_action, c.new_blocked)}"))
        cells: list[tuple[str, ...]] = [tuple(printable(x) for x in r) for r in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
        lines.append("")
        lines.extend("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in cells)
        lines.append("")
        lines.append("why (with the edit):")
        lines.extend(f"  {c.node_id}: {c.new_reason}" for c in nodes)
    lines.append("")
    lines.extend(f"boot {b.size}: {b.old} -> {b.new} ({b.reason})" for b in boots)
    lines.append(f"{len(nodes)} node(s) and {len(boots)} boot size(s) would change")
    return "\n".join(printable(line) for line in lines) + "\n"


def changes_to_json(nodes: list[NodeChange], boots: list[BootChange],
                    context: Mapping[str, Any]) -> dict[str, Any]:
    """The ``--format json`` document: ``context`` (daemon, cycle, matrices) plus the changes."""
    return {**context,
            "nodes": [{"id": c.node_id, "name": c.name,
                       "tuple": {"old": c.old_tuple, "new": c.new_tuple},
                       "rule": {"old": c.old_rule, "new": c.new_rule},
                       "action": {"old": c.old_action, "new": c.new_action},
                       "blocked_by": {"old": c.old_blocked, "new": c.new_blocked},
                       "reason": {"old": c.old_reason, "new": c.new_reason}} for c in nodes],
            "boots": [{"size": b.size, "old": b.old, "new": b.new, "reason": b.reason}
                      for b in boots]}


def _get(url: str, token: str | None, timeout: float, limit: int) -> bytes:
    """The body of ``GET url`` (at most ``limit`` bytes), or LiveError saying why not."""
    import requests

    from nodemanager.commands.admin import _error_text, _request
    resp = _request("GET", url, timeout, stream=True,
                    headers={"Authorization": f"Bearer {token}"} if token else {})
    with resp:
        if resp.status_code != 200:
            elsewhere = (" (from another host the daemon serves its snapshot only to its admin "
                         "token: run plan --live on the head node, or set NODEMANAGER_TOKEN)")
            hint = {403: " (check NODEMANAGER_TOKEN or --token)", 401: elsewhere,
                    404: elsewhere if "admin API disabled" in resp.text else ""}.get(resp.status_code, "")
            raise LiveError(f"{url}: HTTP {resp.status_code}: {_error_text(resp)}{hint}")
        body = bytearray()
        try:
            for chunk in resp.iter_content(1 << 20):
                body += chunk
                if len(body) > limit:
                    raise LiveError(f"{url}: the answer is larger than {limit} bytes")
        except requests.RequestException as e:
            raise LiveError(f"{url}: the answer was cut off: {type(e).__name__}") from None
    return bytes(body)


def _fetch(url: str, token: str | None, timeout: float) -> tuple[Any, dict[str, Any]]:
    """The daemon's last snapshot and its ``/status.json`` of the same cycle."""
    from nodemanager import snapshot as snapshot_json
    for _ in range(_CYCLE_TRIES):
        raw = _get(f"{url}/snapshot.json", token, timeout, snapshot_json.MAX_BYTES)
        try:
            snap = snapshot_json.loads(raw.decode("utf-8"), f"{url}/snapshot.json")
        except UnicodeDecodeError:
            raise LiveError(f"{url}/snapshot.json: not UTF-8 text") from None
        except snapshot_json.SnapshotError as e:
            raise LiveError(str(e)) from None
        raw = _get(f"{url}/status.json", token, timeout, snapshot_json.MAX_BYTES)
        try:
            status = json.loads(raw)
        except ValueError:
            raise LiveError(f"{url}/status.json did not return JSON: is this a nodemanager?") from None
        if not isinstance(status, dict) or not isinstance(status.get("nodes"), list):
            raise LiveError(f"{url}/status.json has no node list: is this a nodemanager?")
        if status.get("cycle_at") == snap.now:
            return snap, status
    raise LiveError(f"{url}: a new cycle ended between each snapshot and status request "
                    f"({_CYCLE_TRIES} tries); try again")


def run_live(args: argparse.Namespace, plan_inputs: Any) -> int:
    """``plan --live``: ``plan_inputs(args)`` gives (settings, matrix, escalation) from
    ``--config``/``--matrix`` or raises LiveError."""
    from nodemanager.commands.admin import _target
    from nodemanager.core import plan
    if not args.config:
        return _fail("--live needs --config: the configuration to plan with (the daemon's file, "
                     "edited or not)")
    try:
        settings, matrix, escalation = plan_inputs(args)
        url, token = _target(args)
        snap, status = _fetch(url, token, args.timeout)
    except (LiveError, ConnectionError) as e:
        return _fail(str(e))
    new = plan(snap, settings.core, matrix, escalation=escalation)
    nodes, boots = live_changes(status, new)
    running = (status.get("matrix") or {}).get("sha256")
    context = {"url": url, "cycle_at": snap.now, "node_count": len(new.nodes),
               "matrix": {"running_sha256": running, "new_sha256": getattr(matrix, "sha256", None),
                          "new_file": getattr(matrix, "source", None)}}
    if args.format == "json":
        json.dump(changes_to_json(nodes, boots, context), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        same = "the running matrix" if running == context["matrix"]["new_sha256"] else \
            f"matrix {str(context['matrix']['new_sha256'])[:12]} (running {str(running)[:12]})"
        sys.stdout.write(format_changes(nodes, boots, (
            f"{url}: cycle at {local_when(snap.now, time.time())}, {len(new.nodes)} nodes; planned with "
            f"{args.config} and {same}")))
    return 1 if nodes or boots else 0


def _fail(message: str) -> int:
    from nodemanager.text import printable
    print(f"nodemanager plan: error: {printable(message)}", file=sys.stderr)
    return 2
