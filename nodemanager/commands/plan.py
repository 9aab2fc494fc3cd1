"""``nodemanager plan``: run the decision core on a JSON snapshot and print the plan.

Nothing is contacted and nothing is changed: the same pure core as the daemon, on a file.
Exit codes: 0 a plan was printed; 1 the snapshot, config or matrix is unusable (the error names the
file and the field, section/option or line); 2 bad command-line usage (from argparse).
``--live`` (:mod:`nodemanager.commands.plan_live`) exits as diff(1): 0 no change, 1 changes, 2 errors.
See docs/plan.md.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "plan_to_json", "format_table"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan", help="show what the controller would do for a snapshot (no action taken)",
        description="Pair, classify, look up the matrix and plan for the snapshot in FILE, and "
                    "print each node's state tuple, matched rule and planned action.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE",
                        help="snapshot JSON (see docs/plan.md); - reads standard input")
    source.add_argument("--live", action="store_true",
                        help="preview --config/--matrix on the running daemon's last snapshot: "
                             "print only the nodes and boots that would change (on the daemon's "
                             "host no token is needed, from elsewhere the admin token; exit 0 no "
                             "change, 1 changes, 2 errors)")
    parser.add_argument("--config", metavar="INI",
                        help="configuration file (sizes, [Daemon] limits); default: built-in "
                             "defaults. With --live: required; also where the daemon is")
    parser.add_argument("--url", help="with --live: the daemon's status server (default "
                                      "$NODEMANAGER_URL, else [Manage] of --config)")
    parser.add_argument("--token", help="with --live from another host: admin token (default "
                                        "$NODEMANAGER_TOKEN, else [Manage] token of --config)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="with --live: seconds per request (default 60)")
    parser.add_argument("--matrix", metavar="FILE",
                        help="policy matrix file; default: the config's, else the shipped default")
    parser.add_argument("--now", type=_epoch, metavar="EPOCH",
                        help="plan as of this time instead of the snapshot's \"now\"")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=_run)


def _epoch(text: str) -> float:
    from nodemanager.snapshot import SnapshotError, parse_time
    try:
        return parse_time(text)
    except SnapshotError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _fail(*messages: object) -> int:
    from nodemanager.text import printable
    for msg in messages:
        print(f"nodemanager plan: error: {printable(str(msg))}", file=sys.stderr)
    return 1


class _Unusable(Exception):
    """The config, matrix or snapshot cannot be used: the messages name the file and the place."""

    def __init__(self, *messages: object) -> None:
        super().__init__(*messages)
        self.messages = messages


def _inputs(args: argparse.Namespace) -> tuple:
    """(settings, matrix, escalation) from ``--config`` and ``--matrix``; raises _Unusable."""
    import policy_matrix
    from nodemanager.configuration.settings import Settings

    settings = Settings()
    if args.config:
        from nodemanager.configuration.config import ConfigError, load
        try:
            settings = load(args.config)
        except ConfigError as e:
            raise _Unusable(*e.problems) from None
        except OSError as e:
            raise _Unusable(f"{args.config}: cannot read: {e.strerror or e}") from None
    matrix_file = args.matrix or settings.matrix_file
    try:
        matrix = policy_matrix.load(matrix_file) if matrix_file else policy_matrix.load_default()
    except policy_matrix.MatrixError as e:
        raise _Unusable(str(e)) from None
    except OSError as e:
        raise _Unusable(f"{matrix_file}: cannot read: {e.strerror or e}") from None
    escalation = None
    if settings.drain.escalate_quick or settings.drain.escalate_fast or settings.drain.deadline:
        try:
            from nodemanager.core import make_escalation
        except ImportError as e:  # the HTCondor bindings are an optional extra
            raise _Unusable(f"{args.config}: [Drain] escalation needs the htcondor extra ({e})") from None
        try:
            escalation = make_escalation(settings.drain)
        except ValueError as e:
            raise _Unusable(f"{args.config}: {e}") from None
    return settings, matrix, escalation


def _live_inputs(args: argparse.Namespace) -> tuple:
    from nodemanager.commands.plan_live import LiveError
    try:
        return _inputs(args)
    except _Unusable as e:
        raise LiveError("; ".join(str(m) for m in e.messages)) from None


def _run(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from nodemanager import snapshot as snapshot_json
    from nodemanager.core import plan

    if args.live:
        if args.now is not None:
            print("nodemanager plan: error: --now cannot be used with --live (the daemon's "
                  "decisions are for its cycle's time)", file=sys.stderr)
            return 2
        from nodemanager.commands.plan_live import run_live
        return run_live(args, _live_inputs)
    try:
        settings, matrix, escalation = _inputs(args)
        snap = snapshot_json.load(args.snapshot)
        snap = snapshot_json.match_sizes(snap, settings.core.sizes, settings.scheduler.kind,
                                         args.snapshot)
    except _Unusable as e:
        return _fail(*e.messages)
    except snapshot_json.SnapshotError as e:
        return _fail(str(e))
    if args.now is not None:
        snap = dataclasses.replace(snap, now=args.now)
    result = plan(snap, settings.core, matrix, escalation=escalation)
    if args.format == "json":
        json.dump(plan_to_json(result), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_table(result))
    return 0


def plan_to_json(p) -> dict:
    """The JSON form of a :class:`~nodemanager.model.Plan` (the ``--format json`` output)."""
    return {
        "now": p.now,
        "frozen": p.frozen,
        "nodes": [{
            "id": e.node_id, "name": e.name, "size": e.size, "worker": e.worker,
            "raw_state": e.raw_state,
            "tuple": {"worker_state": e.tuple.worker_state, "window": e.tuple.window,
                      "boot_grace": e.tuple.boot_grace, "idle_grace": e.tuple.idle_grace},
            "rule": e.rule, "matrix_action": e.matrix_action.to_json(),
            "action": e.action.value if e.action else None,
            "blocked_by": e.blocked_by, "budget": e.budget, "reason": e.reason,
            "next_change": e.next_change, "next_change_what": e.next_change_what,
        } for e in p.nodes],
        "items": [{"kind": i.kind.value, "node": i.node_id, "name": i.node_name,
                   "worker": i.worker, "cancellable": i.cancellable, "schedule": i.schedule,
                   "request_id": i.request_id, "reason": i.reason} for i in p.items],
        "boots": [{"size": b.size, "count": b.count, "reason": b.reason} for b in p.boots],
        "notes": list(p.notes),
        "unmet": [{"what": u.what, "jobs": u.jobs, "reason": u.reason, "text": u.text}
                  for u in p.unmet],
        "budgets": [{"name": b.name, "active": b.active, "allowed": b.allowed, "held": b.held,
                     "text": b.text} for b in p.budgets],
        "placement": [{"cloud": c.cloud, "size": c.size, "jobs": c.jobs, "what": c.what, "lost": list(c.lost),
                       "why": c.why} for c in p.clouds],
    }


def _short_rule(rule: str) -> str:
    import os
    return os.path.basename(rule)


def _blocked(e) -> str:
    """What stopped the node's action; a budget by its name (``budget night``)."""
    if e.budget is not None:
        return f"{e.blocked_by} {e.budget}"
    return e.blocked_by or "-"


def format_table(p) -> str:
    """A plain-text table of the plan: one line per node, then boots and notes (names and reasons
    from the snapshot with control characters escaped)."""
    from nodemanager.text import local_when, printable
    head = ("NODE", "NAME", "SIZE", "STATE", "WINDOW", "BOOT", "IDLE", "RULE", "MATRIX",
            "ACTION", "BLOCKED")
    rows: list[tuple[str, ...]] = [head]
    for e in p.nodes:
        rows.append(tuple(printable(c) for c in (
            e.node_id, e.name, e.size, *e.tuple.as_tuple(), _short_rule(e.rule),
            str(e.matrix_action), e.action.value if e.action else "-", _blocked(e))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if p.nodes:
        lines.append("")
        lines.append("why:")
        for e in p.nodes:
            nxt = ""
            if e.next_change is not None:
                nxt = f" (next: {e.next_change_what} {local_when(e.next_change, p.now)})"
            lines.append(f"  {e.node_id}: {e.reason}{nxt}")
    lines.append("")
    if p.boots:
        for b in p.boots:
            lines.append(f"boot {b.count} x {b.size}: {b.reason}")
    else:
        lines.append("boot nothing")
    for c in p.clouds:
        lines.append(f"cloud: {c.why}")
    if p.frozen:
        lines.append(f"frozen: {p.frozen}")
    for n in p.notes:
        lines.append(f"note: {n}")
    for b in p.budgets:
        state = f"active, {b.allowed} at once, {b.held} held back" if b.active else "outside its schedule"
        lines.append(f"{b.text}: {state}")
    return "\n".join(printable(line) for line in lines) + "\n"
