"""``nodemanager history NODE``: one node's events (decisions, scheduler states, outcomes) from the
daemon's store, read-only and without its lock (the daemon, or an HA standby, may run).

Exit codes: 0 printed (nothing recorded is said so); 1 the config or the store is unusable (named);
2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from nodemanager.commands.cost import parse_since, read_store

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "history", help="one node's events from the daemon's store",
        description="A node's events as the daemon recorded them (every one kept, not only the "
                    "page's last ones), oldest first, named by its cloud node id.")
    parser.add_argument("node", metavar="NODE", help="the cloud node id")
    parser.add_argument("--config", metavar="INI", required=True, help="the daemon's configuration file")
    parser.add_argument("--since", type=parse_since, default=None, metavar="WHEN",
                        help="from when, written as for `cost` (30d, today, 2026-11-01); default all")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import json

    from nodemanager.store import StoreError
    from nodemanager.text import printable
    opened = read_store("history", args.config)
    if isinstance(opened, int):
        return opened
    _, store = opened
    try:
        events = store.events(args.node, since=args.since)
    except StoreError as e:
        print(f"nodemanager history: error: {printable(str(e))}", file=sys.stderr)
        return 1
    finally:
        store.close()
    if args.format == "json":
        print(json.dumps({"node": args.node, "events": [{"at": at, "kind": k, "text": t} for at, k, t in events]},
                         indent=1))
    elif not events:
        print(f"{args.node}: no events recorded" + (" in that time" if args.since is not None else ""))
    else:
        for at, kind, text in events:
            stamp = datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
            print(f"{stamp}  {kind:<8}  {printable(text)}")
    return 0
