"""``nodemanager store-copy``: copy the daemon's store into another one, e.g. from the SQLite file in
``state_dir`` to the PostgreSQL database a later ``[Store] url`` names. Stop the daemon first: what
it writes during the copy is not copied.

Exit codes: 0 copied; 1 the config, the source or the target is unusable, or the target already
holds records (named); 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "store-copy", help="copy the daemon's store to another database (SQLite to PostgreSQL)",
        description="Copy every record of the store --config names (its [Store] url, or the SQLite "
                    "file in its state_dir) into the store --to names, created or upgraded first. "
                    "Stop the daemon before, then set [Store] url to the target.")
    parser.add_argument("--config", metavar="INI", required=True, help="the daemon's configuration file")
    parser.add_argument("--to", metavar="URL", required=True,
                        help="the target: postgresql://user@host/db, or the path of a SQLite file")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from nodemanager.commands.cost import read_store
    from nodemanager.store import StoreError
    from nodemanager.store.schema import TABLES
    from nodemanager.text import printable
    opened = read_store("store-copy", args.config)
    if isinstance(opened, int):
        return opened
    _, source = opened
    target: Any
    if args.to.startswith(("postgresql://", "postgres://")):
        from nodemanager.store.postgres import PostgresStore
        target = PostgresStore(args.to)
    else:
        from nodemanager.store.sqlite import SqliteStore
        target = SqliteStore(args.to)
    try:
        target.ready()
        held = sum(n for kind, n in target.counts().items())
        if held:
            print(f"nodemanager store-copy: error: {target.name} already holds {held} record(s): copy into an "
                  f"empty database", file=sys.stderr)
            return 1
        copied = {}
        for table, columns in TABLES:
            copied[table] = 0
            for rows in source.rows(table, columns):
                target.insert(table, columns, rows)
                copied[table] += len(rows)
    except StoreError as e:
        print(f"nodemanager store-copy: error: {printable(str(e))}", file=sys.stderr)
        return 1
    finally:
        source.close()
        target.close()
    print(f"copied {source.name} to {target.name}: " + ", ".join(f"{n} {t}" for t, n in copied.items()))
    return 0
