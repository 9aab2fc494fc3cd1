"""SLURM nodes whose slurmd registered and was refused: a FUTURE node whose VM has fewer CPUs or
less memory than its ``NodeName`` line becomes ``FUTURE+DRAIN+INVALID_REG`` (INVAL), which
``sinfo`` (JSON and text alike) hides. Only ``scontrol -F show node`` shows it, with SLURM's reason
(``Low socket*core*thread count, Low CPUs``). Such a node becomes a worker classified
``unpaired`` whose words are SLURM's reason, so that the VM it belongs to pairs with it by name and
its explanation says why it never joins (the matrix treats it as any VM that did not join)."""

from __future__ import annotations

import logging
import re
from typing import Callable, Collection, Mapping

from nodemanager.model import Classified, Worker
from nodemanager.scheduler.port import SchedulerError
from nodemanager.scheduler.slurm_commands import run_command
from nodemanager.scheduler.slurm_options import SlurmOptions
from nodemanager.scheduler.slurm_show import REJECTED_FLAG, parse_records, show_time, state_flags
from policy_matrix.vocabulary import UNPAIRED

__all__ = ["RejectedNodes", "rejected_workers", "REFRESH"]

log = logging.getLogger(__name__)

# seconds between two asks: one more full node query, so not on every poll
REFRESH = 30.0

_WHO_WHEN = re.compile(r"\s*\[[^\]]*@[^\]]*\]$")  # " [root@2026-11-27T01:51:16]" after a reason


def rejected_workers(nodes: Mapping[str, Mapping[str, str]]) -> tuple[Worker, ...]:
    """The hidden refused nodes of ``scontrol -F -o show node`` (parsed) as workers."""
    out = []
    for name, fields in nodes.items():
        flags = state_flags(fields)
        if REJECTED_FLAG not in flags or "FUTURE" not in flags:
            continue
        reason = _WHO_WHEN.sub("", fields.get("Reason", "")) or "no reason given"
        out.append(Worker(
            name=name, scheduler="slurm", state="inval",
            classified=Classified(UNPAIRED, f"slurm refused its slurmd (INVAL, hidden from sinfo): {reason}"),
            address=fields.get("NodeAddr") or None,
            registered_at=show_time(fields.get("SlurmdStartTime", "")) or 0.0,
            cpus=_count(fields.get("CPUTot")), ram_mb=_count(fields.get("RealMemory")),
            retirement_end=float("inf")))
    return tuple(out)


def _count(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


class RejectedNodes:
    """The refused hidden nodes, asked of slurmctld at most every :data:`REFRESH` seconds; a
    failed ask keeps the last answer (and is said once)."""

    def __init__(self, options: SlurmOptions, clock: Callable[[], float]) -> None:
        self.options = options
        self._clock = clock
        self._asked: float | None = None
        self._workers: tuple[Worker, ...] = ()
        self._failed = ""

    def workers(self, visible: Collection[str]) -> tuple[Worker, ...]:
        """Those not among ``visible`` (the node names ``sinfo`` showed)."""
        now = self._clock()
        if self._asked is None or now - self._asked >= REFRESH:
            self._asked = now
            try:
                text = run_command(self.options, ["scontrol", "-F", "-o", "show", "node"])
            except SchedulerError as exc:
                if str(exc) != self._failed:  # said once per new error, not every REFRESH
                    log.warning("slurm poll: refused nodes hidden from sinfo not read: %s", exc)
                self._failed = str(exc)
            else:
                self._workers, self._failed = rejected_workers(parse_records(text)), ""
        return tuple(w for w in self._workers if w.name not in visible)
