"""``nodemanager status [NODE]``, ``nodemanager why [NODE]`` and the admin verbs
``hold|release|drain|cancel NODE``, ``pause|resume``.

They talk HTTP to a running daemon's status server (see ``nodemanager.console.status``). Where it is:
``--url``, else ``$NODEMANAGER_URL``, else ``[Manage] address/port`` of ``--config``, else
``http://127.0.0.1:8989``. The admin token: ``--token``, else ``$NODEMANAGER_TOKEN``, else
``[Manage] token`` of ``--config``.

Exit codes: 0 done; 1 the server refused or could not be reached (the message says why);
2 bad command-line usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

__all__ = ["register", "DEFAULT_URL"]

DEFAULT_URL = "http://127.0.0.1:8989"
_NODE_VERBS = {
    "hold": "never act on NODE (no drain, no shutdown) until released",
    "release": "undo hold: the matrix decides for NODE again",
    "drain": "drain NODE now (planned next cycle; budgets and holds still apply)",
    "cancel": "cancel our drain of NODE (and withdraw a drain requested with 'drain')",
}
_STATUS_COLUMNS = (("name", "NODE"), ("size", "SIZE"), ("tuple_text", "TUPLE"),
                   ("rule", "RULE"), ("planned_action", "PLANNED"), ("blocked_by", "BLOCKED BY"),
                   ("why", "WHY"), ("next_change_text", "NEXT CHANGE"))


def _common(parser: argparse.ArgumentParser, token: bool) -> None:
    parser.add_argument("--url", help=f"status server URL (default $NODEMANAGER_URL or {DEFAULT_URL})")
    parser.add_argument("--config", metavar="FILE", help="read [Manage] address, port and token from FILE")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    if token:
        parser.add_argument("--token", help="admin token (default $NODEMANAGER_TOKEN); prefer the "
                                            "environment: arguments are visible to other users")


def register(subparsers: argparse._SubParsersAction) -> None:
    status = subparsers.add_parser(
        "status", help="what the running daemon does to each node, and why",
        description="Print each node's state tuple, matched matrix rule, planned action, what blocks "
                    "it and when it next changes, from the daemon's /status.json.")
    _common(status, token=False)
    status.add_argument("--json", action="store_true", help="print the raw /status.json")
    status.add_argument("node", metavar="NODE", nargs="?",
                        help="one node (cloud id, name or worker; also one gone in the last hour): "
                             "its decision, why not, and its last events")
    status.set_defaults(func=_status)
    why = subparsers.add_parser(
        "why", help="why a node is not given back, or queued jobs not booted for",
        description="One sentence per node not being given back and per queued job signature "
                    "not booted for, naming the reason that binds (from /status.json); with NODE, "
                    "that node's only.")
    _common(why, token=False)
    why.add_argument("node", metavar="NODE", nargs="?")
    why.set_defaults(func=_status, why=True, json=False)
    for verb, text in _NODE_VERBS.items():
        p = subparsers.add_parser(verb, help=text, description=f"{text[0].upper()}{text[1:]}. "
                                  "NODE is a cloud node id, node name or worker name.")
        _common(p, token=True)
        p.add_argument("node", metavar="NODE")
        if verb in ("hold", "drain"):
            p.add_argument("--reason", default="", help="why, in words: shown on the status page "
                                                        "beside the node and in the audit line")
        p.set_defaults(func=_admin, verb=verb)
    pause = subparsers.add_parser("pause", help="freeze every action of the daemon until resume")
    _common(pause, token=True)
    pause.add_argument("--reason", default="", help="shown on the status page and in the log")
    pause.set_defaults(func=_admin, verb="pause", node=None)
    resume = subparsers.add_parser("resume", help="undo pause")
    _common(resume, token=True)
    resume.set_defaults(func=_admin, verb="resume", node=None)


def _manage_from_config(path: str | None) -> tuple[str | None, str | None]:
    """(url, token) from a config file's [Manage] section, or (None, None) without --config."""
    if not path:
        return None, None
    from nodemanager.configuration.config import load
    manage = load(path).manage
    host = "127.0.0.1" if manage.address in ("", "0.0.0.0") else \
        "::1" if manage.address == "::" else manage.address
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{manage.port}", manage.token or None


def _target(args: argparse.Namespace) -> tuple[str, str | None]:
    cfg_url, cfg_token = _manage_from_config(args.config)
    url = args.url or os.environ.get("NODEMANAGER_URL") or cfg_url or DEFAULT_URL
    token = getattr(args, "token", None) or os.environ.get("NODEMANAGER_TOKEN") or cfg_token
    return url.rstrip("/"), token


def _fail(message: str) -> int:
    from nodemanager.text import printable
    print(f"nodemanager: {printable(message)}", file=sys.stderr)
    return 1


def _request(method: str, url: str, timeout: float, **kwargs: Any) -> Any:
    import requests
    try:
        return requests.request(method, url, timeout=timeout, **kwargs)
    except requests.RequestException as err:
        raise ConnectionError(f"cannot reach the status server at {url}: "
                              f"{type(err).__name__}") from None


def _error_text(resp: Any) -> str:
    try:
        return str(resp.json().get("error") or resp.text.strip())
    except ValueError:
        return resp.text.strip()


def _status(args: argparse.Namespace) -> int:
    try:
        url, _ = _target(args)
        resp = _request("GET", f"{url}/status.json", args.timeout)
    except Exception as err:  # ConfigError or ConnectionError: both say what went wrong
        return _fail(str(err))
    if resp.status_code != 200:
        return _fail(f"{url}/status.json: HTTP {resp.status_code}: {_error_text(resp)}")
    try:
        doc = resp.json()
    except ValueError:
        return _fail(f"{url}/status.json did not return JSON: is this a nodemanager?")
    from nodemanager.commands.node_text import find_node, node_text, why_text
    node = find_node(doc, args.node) if args.node else None
    if args.node and node is None:
        return _fail(f"no node {args.node!r} in the daemon's last cycle nor gone in the last hour")
    if args.json:
        json.dump(node or doc, sys.stdout, indent=1)
        print()
        return 0
    if getattr(args, "why", False):
        print(why_text(doc, node))
    else:
        print(node_text(doc, node) if node else _status_text(doc))
    return 0


def _status_text(doc: dict[str, Any]) -> str:
    """The status document as text; names and reasons with control characters escaped."""
    from nodemanager.text import counted, local_when, printable, short_rule
    lines = [doc.get("health", "")]
    if doc.get("paused"):
        lines.append(f"PAUSED: {doc['paused']}")
    if doc.get("frozen"):
        lines.append(f"actions frozen: {doc['frozen']}")
    if doc.get("no_permission"):
        lines.append(f"NO PERMISSION: {doc['no_permission']}")
    matrix = doc.get("matrix") or {}
    if matrix.get("error"):
        lines.append(f"matrix error (running the last good one): {matrix['error']}")
    lines.extend(f"paid idle: {p['text']}" for p in doc.get("paid_idle") or ())
    summary = doc.get("summary") or {}
    if summary:
        demand = summary.get("demand", {})
        unlisted = summary.get("created_unlisted", 0)
        lines.append(f"{counted(summary.get('nodes', 0), 'node')}, {summary.get('booting', 0)} booting"
                     + (f" ({unlisted} created, not listed yet)" if unlisted else "")
                     + f"; queue {counted(demand.get('jobs', 0), 'job')}, {counted(demand.get('cpus', 0), 'core')}")
    lines.extend(f"note: {note}" for note in doc.get("notes") or ())
    rows = [[title for _, title in _STATUS_COLUMNS]]
    for node in doc.get("nodes", []):
        row = []
        for key, _ in _STATUS_COLUMNS:
            value = node.get(key)
            text = "-" if value is None else str(value)
            if key == "name" and node.get("held"):
                text += " (held)"
            if key == "why" and node.get("operator_reason"):
                text += f" (operator's reason: {node['operator_reason']})"
            if key == "blocked_by" and node.get("budget"):
                text += f" {node['budget']}"
            if key == "rule":
                text = short_rule(text)
            if key == "next_change_text" and node.get("next_change") is not None:
                text = f"{node.get('next_change_what') or 'changes'} " \
                       f"{local_when(node['next_change'], doc['now'])}"
            row.append(printable(text))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [printable(str(line)) for line in lines]
    lines.append("")
    lines.extend("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
    return "\n".join(lines)


def _admin(args: argparse.Namespace) -> int:
    from urllib.parse import quote
    try:
        url, token = _target(args)
    except Exception as err:
        return _fail(str(err))
    if not token:
        return _fail("no admin token: set NODEMANAGER_TOKEN (or --token, or --config with "
                     "[Manage] token)")
    path = f"/admin/{args.verb}" + (f"/{quote(args.node, safe='')}" if args.node else "")
    body = {"reason": args.reason} if getattr(args, "reason", "") else None
    try:
        resp = _request("POST", url + path, args.timeout, json=body,
                        headers={"Authorization": f"Bearer {token}"})
    except ConnectionError as err:
        return _fail(str(err))
    if resp.status_code != 200:
        hint = {401: " (no token sent)", 403: " (check NODEMANAGER_TOKEN)",
                404: ""}.get(resp.status_code, "")
        return _fail(f"{args.verb}: HTTP {resp.status_code}: {_error_text(resp)}{hint}")
    change = resp.json()
    node = f" {change['node']}" if change.get("node") else ""
    from nodemanager.text import printable
    print(printable(f"{change['action']}{node}: {change['detail']}")
          + ("" if change.get("changed") else " (nothing changed)"))
    return 0
