"""``nodemanager run --config FILE [--dry-run]``: the daemon.

Logs one line per decision (node, tuple, matched rule, action) and per actuator outcome; SIGHUP
reloads the config and the matrix; SIGTERM (or Ctrl-C) stops cleanly. Exit codes: 0 stopped,
2 unusable config or matrix (the error names the file and place), 70 stopped by a fatal error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

__all__ = ["register", "setup_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run the node manager daemon",
        description="Poll the cloud and the scheduler, decide with the policy matrix, and boot, "
                    "drain and destroy nodes. SIGHUP reloads FILE and the matrix; SIGTERM stops.")
    parser.add_argument("--config", required=True, metavar="FILE", help="the INI configuration file")
    parser.add_argument("--dry-run", action="store_true",
                        help="plan and log only: never drain, cancel, boot or destroy")
    parser.set_defaults(func=_run)


def setup_logging(level: str, stream: Any = None) -> logging.Handler:
    """Log records at ``level`` and above to ``stream`` (stderr), one line each: text from the
    cloud or the scheduler in a record's arguments is escaped (``nodemanager.text``)."""
    from nodemanager.text import EscapingFilter
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(EscapingFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler


def _run(args: argparse.Namespace) -> int:
    import policy_matrix
    from nodemanager import config
    from nodemanager.daemon import Daemon, tune_gc

    try:
        settings = config.load(args.config, require_sizes=True, resolve=True)
    except config.ConfigError as exc:
        print(f"nodemanager run: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level)
    for warning in config.credential_warnings(args.config, settings):
        logging.getLogger("nodemanager.config").warning("%s", warning)
    try:
        daemon = Daemon(settings, config_path=args.config, dry_run=args.dry_run)
    except policy_matrix.MatrixError as exc:
        print(f"nodemanager run: {exc}", file=sys.stderr)
        return 2
    except (config.ConfigError, ValueError) as exc:
        print(f"nodemanager run: {exc}", file=sys.stderr)
        return 2
    tune_gc()
    return daemon.run()
