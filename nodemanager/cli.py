"""The ``nodemanager`` command: one subcommand module per verb under ``nodemanager.commands``.

Each module exposes ``register(subparsers)``, which adds its parser and sets ``func`` (taking the
parsed args, returning the exit code). Modules import heavy dependencies inside ``func`` so that
``nodemanager matrix check`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from nodemanager import installed_version

__all__ = ["main", "COMMAND_MODULES"]

COMMAND_MODULES: tuple[str, ...] = ("matrix", "admin", "plan", "check", "run", "simulate", "advise", "bench", "cost",
                                   "history", "store_copy")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nodemanager",
        description="Elastic cloud node manager for HTCondor and SLURM pools.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version('unknown (not installed)')}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"nodemanager.commands.{name}").register(sub)
    return parser




def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
