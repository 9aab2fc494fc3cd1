"""``nodemanager check --config FILE``: preflight, the checklist of what ``run`` needs.

Exit codes: 0 every check passed (warnings allowed), 1 some check failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check", help="preflight: validate config and matrix, call the cloud and scheduler read-only",
        description="Validate the configuration and the matrix, list the cloud's nodes and ask the "
                    "cloud whether each call the daemon makes is permitted (EC2: DryRun), look for "
                    "placeholders left in the boot scripts, poll the scheduler (SLURM: the running "
                    "slurmctld's settings, node names and sizes; HTCondor: the collector and READ "
                    "there, READ at the schedds, DRAIN_JOBS at a few of our startds), and check "
                    "the status port (or the running daemon's /healthz), state file, state "
                    "directory and the store (its schema version, who can write it, its size). Nothing "
                    "is changed. Prints a checklist with the fix for each failure.")
    parser.add_argument("--config", required=True, metavar="FILE", help="the INI configuration file")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    import logging

    from nodemanager.preflight import preflight, render

    logging.basicConfig(level=logging.ERROR)  # the checklist says it all; no adapter chatter
    checks = preflight(args.config)
    if args.format == "json":
        print(json.dumps([{"name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix}
                          for c in checks], indent=1))
    else:
        print(render(checks))
    return 1 if any(c.ok is False for c in checks) else 0
