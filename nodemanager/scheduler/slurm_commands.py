"""Running SLURM's client commands (``sinfo``, ``squeue``, ``scontrol``, ``scancel``) as the
``[Scheduler]`` options say: ``SLURM_CONF``, ``bin_dir``, the per-command timeout. Every failure is
a :class:`SchedulerError` naming the command and SLURM's own last line of output."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Callable, Sequence

from nodemanager.scheduler.port import SchedulerError, is_denial
from nodemanager.scheduler.slurm_options import SlurmOptions

__all__ = ["run_command", "run_json", "changes_pool"]


def changes_pool(args: Sequence[str]) -> bool:
    """True for a command that changes the pool (the ``[HA]`` send gate stops those)."""
    return args[0] == "scancel" or list(args[:2]) in (["scontrol", "update"], ["scontrol", "requeue"])


def _env(options: SlurmOptions) -> dict[str, str]:
    env = dict(os.environ)
    if options.slurm_conf:
        env["SLURM_CONF"] = options.slurm_conf
    return env


def run_command(options: SlurmOptions, args: Sequence[str], *, node: str | None = None,
                gate: Callable[[str], None] | None = None) -> str:
    """The command's standard output; SchedulerError when it cannot run, fails or times out."""
    argv = list(args)
    if options.bin_dir:
        argv[0] = os.path.join(options.bin_dir, argv[0])
    what = " ".join(args)
    if gate is not None and changes_pool(args):
        gate(node or "")
    if options.slurm_conf:
        # SLURM's tools retry a missing slurm.conf for 60 s: say why at once instead of timing out
        try:
            os.stat(options.slurm_conf)
        except OSError as exc:
            raise SchedulerError(f"{what}: cannot stat file {options.slurm_conf} ([Scheduler] "
                                 f"slurm_conf): {exc.strerror}", node=node) from None
    try:
        proc = subprocess.run(argv, env=_env(options), capture_output=True, text=True,
                              timeout=options.timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SchedulerError(f"{what}: command {argv[0]!r} not found", node=node,
                             transient=False) from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"{what}: timed out after {options.timeout:g}s "
                             "(slurmctld unreachable?)", node=node) from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        last = detail[-1] if detail else "no output"
        raise SchedulerError(f"{what}: failed (exit {proc.returncode}): {last}", node=node,
                             denied=is_denial(last))
    return proc.stdout


def run_json(options: SlurmOptions, args: Sequence[str],
             gate: Callable[[str], None] | None = None) -> Any:
    """The command's output decoded as JSON; SchedulerError when it is not."""
    out = run_command(options, args, gate=gate)
    try:
        return json.loads(out)
    except json.JSONDecodeError as exc:
        raise SchedulerError(f"{' '.join(args)}: reply is not valid JSON "
                             f"(line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting too deep
        raise SchedulerError(f"{' '.join(args)}: reply cannot be decoded ({exc})") from None
