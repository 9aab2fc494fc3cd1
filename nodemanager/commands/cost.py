"""``nodemanager cost``: who spent what, from the ledger the daemon keeps (``[Manage]
spend_ledger``) in its store (:mod:`nodemanager.store`): one query, read-only, without the
daemon's lock, so the daemon (or an HA standby) may run.

Exit codes: 0 the table was printed; 1 the config or the store is unusable (named); 2 bad usage.
How a node's time is shared: :mod:`nodemanager.core.attribution`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = ["register", "parse_since", "format_rows", "read_store"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cost", help="node-hours and money per user, group or size (the daemon's spend ledger)",
        description="Node-hours and money attributed to each user, group (SLURM account, HTCondor "
                    "accounting group) or size, from the jobs that ran on each node: a node's boot "
                    "and idle time is shared by the jobs it served, pro rata by their core-seconds.")
    parser.add_argument("--config", metavar="INI", required=True,
                        help="the daemon's configuration file (where its state_dir is)")
    parser.add_argument("--since", type=parse_since, default="30d", metavar="WHEN",
                        help="from when: a duration back (30d, 12h), 'today' (UTC midnight), a date "
                             "(2026-11-01) or a time (2026-11-01T08:00); default 30d")
    parser.add_argument("--until", type=parse_since, default=None, metavar="WHEN",
                        help="until when, written as --since is; default now")
    parser.add_argument("--by", choices=("user", "group", "size", "node"), default="user")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table")
    parser.set_defaults(func=_run)


def parse_since(text: str, now: float | None = None) -> float:
    """An epoch time from ``--since``: a duration back, ``today``, or an ISO date or time (UTC)."""
    import datetime as dt

    from nodemanager.configuration.values import parse_duration
    now = time.time() if now is None else now
    t = text.strip()
    if t == "today":
        return now - now % 86400.0
    try:
        return now - parse_duration(t)
    except ValueError:
        pass
    try:
        when = dt.datetime.fromisoformat(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a duration (30d), 'today' or a date "
                                         f"(2026-11-01)") from None
    return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()


def format_rows(rows: list, by: str, fmt: str) -> str:
    """The rows as an aligned table, CSV or JSON (with the totals)."""
    import csv
    import io
    import json
    if fmt == "json":
        return json.dumps({"by": by, "rows": [{by: r.name, "node_hours": round(r.node_hours, 4),
                                               "money": round(r.money, 4), "core_hours": round(r.core_hours, 4)}
                                              for r in rows]}, indent=1)
    if fmt == "csv":
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow([by, "node_hours", "money", "core_hours"])
        for r in rows:
            w.writerow([r.name, f"{r.node_hours:.4f}", f"{r.money:.4f}", f"{r.core_hours:.4f}"])
        return out.getvalue().rstrip("\n")
    total_h, total_m = sum(r.node_hours for r in rows), sum(r.money for r in rows)
    lines = [(by, "node-hours", "money", "share", "core-hours")]
    lines += [(r.name, f"{r.node_hours:.2f}", f"{r.money:.2f}",
               f"{100 * r.money / total_m if total_m else 100 * r.node_hours / (total_h or 1):.1f} %",
               f"{r.core_hours:.2f}") for r in rows]
    lines.append(("total", f"{total_h:.2f}", f"{total_m:.2f}", "", f"{sum(r.core_hours for r in rows):.2f}"))
    width = [max(len(line[k]) for line in lines) for k in range(5)]
    return "\n".join("  ".join(c.ljust(width[k]) if k == 0 else c.rjust(width[k]) for k, c in enumerate(line))
                     for line in lines)


def read_store(command: str, config_path: str) -> tuple[Any, Any] | int:
    """(settings, the store opened read-only) of the daemon configured in ``config_path``, or the exit
    code after an error naming what is wrong (shared by ``cost`` and ``history``)."""
    from nodemanager.configuration.config import ConfigError, load
    from nodemanager.store import StoreError, open_store
    from nodemanager.text import printable
    try:
        settings = load(config_path)
    except ConfigError as e:
        print(f"nodemanager {command}: error: {printable(str(e))}", file=sys.stderr)
        return 1
    try:
        store = open_store(settings, read_only=True)
        store.ready()
    except StoreError as e:
        print(f"nodemanager {command}: error: {printable(str(e))}", file=sys.stderr)
        return 1
    return settings, store


def _run(args: argparse.Namespace) -> int:
    from nodemanager.store import StoreError
    from nodemanager.text import printable
    opened = read_store("cost", args.config)
    if isinstance(opened, int):
        return opened
    settings, store = opened
    try:
        rows = store.spend(args.since, time.time() if args.until is None else args.until, args.by)
    except StoreError as e:
        print(f"nodemanager cost: error: {printable(str(e))}", file=sys.stderr)
        return 1
    finally:
        store.close()
    if not rows and not settings.manage.spend_ledger:
        print("nodemanager cost: error: no spend recorded ([Manage] spend_ledger is off)", file=sys.stderr)
        return 1
    print(format_rows(rows, args.by, args.format))
    return 0
