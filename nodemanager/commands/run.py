"""``nodemanager run --config FILE [--dry-run]``: the daemon.

Logs one line per decision (node, tuple, matched rule, action) and per actuator outcome; SIGHUP
reloads the config and the matrix; SIGTERM (or Ctrl-C) stops cleanly. Exit codes: 0 stopped,
2 unusable config or matrix (the error names the file and place; also a status port that cannot
be bound, or a state_dir that cannot be locked), 70 stopped by a fatal error, 75 another instance
runs this cluster (the line names its pid, host and start).

Start-up order: config, the instance lock (``nodemanager.cycle.lock``, in ``[Manage] state_dir``), the
deployment record (``nodemanager.cycle.deployment``: a renamed cluster whose old VMs remain is refused,
exit 2), the status port, then the cloud and scheduler and the actors; so a second instance or a taken port
stops before any cloud or scheduler call. A dry run takes no lock (it never acts, so it may run
beside the real daemon to try a config or matrix: give it another ``[Manage] port`` or -1).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

__all__ = ["register", "setup_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
EXIT_RUNNING = 75      # EX_TEMPFAIL: another instance holds the lock; try again when it has stopped


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run the node manager daemon",
        description="Poll the cloud and the scheduler, decide with the policy matrix, and boot, "
                    "drain and destroy nodes. SIGHUP reloads FILE and the matrix; SIGTERM stops.")
    parser.add_argument("--config", required=True, metavar="FILE", help="the INI configuration file")
    parser.add_argument("--dry-run", action="store_true",
                        help="plan and log only: never drain, cancel, boot or destroy")
    parser.set_defaults(func=_run)


def setup_logging(level: str, stream: Any = None, log: Any = None) -> logging.Handler:
    """Log records at ``level`` and above to ``stream`` (stderr), and to ``log.file`` when set
    (:class:`~nodemanager.configuration.settings.LogSettings`, rotated by size): one line per record,
    as text or (``log.format = json``) as one JSON object with the decision's fields. Text from the
    cloud or the scheduler in a record's arguments is escaped (``nodemanager.text``). Returns the
    stderr handler."""
    from logging.handlers import RotatingFileHandler

    from nodemanager.text import EscapingFilter
    formatter = _formatter(log.format if log is not None else "text")
    handlers: list[logging.Handler] = [logging.StreamHandler(stream or sys.stderr)]
    if log is not None and log.file:
        handlers.append(RotatingFileHandler(log.file, maxBytes=log.file_max_mb * 1024 * 1024,
                                            backupCount=log.file_keep, encoding="utf-8"))
    root = logging.getLogger()
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(EscapingFilter())
        root.addHandler(handler)
    root.setLevel(level.upper())
    return handlers[0]




def _formatter(kind: str) -> logging.Formatter:
    if kind != "json":
        return logging.Formatter(LOG_FORMAT)
    from pythonjsonlogger.json import JsonFormatter
    return JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s", datefmt="%Y-%m-%dT%H:%M:%S%z",
                         rename_fields={"asctime": "time", "levelname": "level", "name": "logger"})


def _identity(args: argparse.Namespace, settings: Any, lock: Any) -> tuple[Any, Any]:
    """The settings with the deployment id, and this process's identity (None for a cloud that
    lives in this process: nothing of it outlives the process or is shared)."""
    from dataclasses import replace

    from nodemanager.cycle.deployment import start_identity
    from nodemanager.configuration.kinds import in_process

    if in_process(settings.cloud.driver):
        return settings, None

    def list_cluster(name: str) -> list[Any]:
        from nodemanager.cloud import LibcloudCloud
        return LibcloudCloud(replace(settings.cloud, cluster=name)).list_nodes()

    return start_identity(settings, args.config, lock.holder if lock is not None else None,
                          save=lock is not None, list_cluster=list_cluster)


def _run(args: argparse.Namespace) -> int:
    import policy_matrix
    from nodemanager.configuration import config
    from nodemanager.actors.gc_tuning import tune_gc
    from nodemanager.daemon import Daemon
    from nodemanager.cycle.deployment import IdentityError
    from nodemanager.cycle.lock import InstanceLock, InstanceRunning, LockError

    try:
        settings = config.load(args.config, require_sizes=True, resolve=True)
    except config.ConfigError as exc:
        print(f"nodemanager run: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, log=settings.log)
    for warning in config.credential_warnings(args.config, settings):
        logging.getLogger("nodemanager.config").warning("%s", warning)
    lock = None
    if not (args.dry_run or settings.dry_run):
        try:
            lock = InstanceLock.acquire(settings.manage.state_dir, settings.cloud.cluster)
        except InstanceRunning as exc:
            print(f"nodemanager run: {exc}; not starting", file=sys.stderr)
            return EXIT_RUNNING
        except LockError as exc:
            print(f"nodemanager run: {args.config}: [Manage] state_dir: {exc}", file=sys.stderr)
            return 2
    try:
        try:
            settings, identity = _identity(args, settings, lock)
        except IdentityError as exc:
            print(f"nodemanager run: {exc}", file=sys.stderr)
            return 2
        try:
            daemon = Daemon(settings, config_path=args.config, dry_run=args.dry_run, identity=identity)
        except policy_matrix.MatrixError as exc:
            print(f"nodemanager run: {exc}", file=sys.stderr)
            return 2
        except (config.ConfigError, ValueError) as exc:
            print(f"nodemanager run: {exc}", file=sys.stderr)
            return 2
        if not (daemon.dry_run or settings.ha is not None):
            # the checklist of `nodemanager check`, logged; a cloud or scheduler that is down now
            # does not stop the start (the first cycles retry, stale inputs freeze actions)
            from nodemanager.preflight import log_checks, start_checks
            log_checks(start_checks(settings, daemon.cloud, daemon.scheduler),
                       logging.getLogger("nodemanager.preflight"))
        tune_gc()
        return daemon.run()
    finally:
        if lock is not None:
            lock.release()
