"""``nodemanager run --config FILE [--dry-run]``: the daemon.

Logs one line per decision (node, tuple, matched rule, action) and per actuator outcome; SIGHUP
reloads the config and the matrix; SIGTERM (or Ctrl-C) stops cleanly. Exit codes: 0 stopped,
2 unusable config or matrix (the error names the file and place), 70 stopped by a fatal error.
"""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["register"]

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


def _run(args: argparse.Namespace) -> int:
    import policy_matrix
    from nodemanager import config
    from nodemanager.daemon import Daemon, tune_gc

    try:
        settings = config.load(args.config, require_sizes=True)
    except config.ConfigError as exc:
        print(f"nodemanager run: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format=LOG_FORMAT, stream=sys.stderr)
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
