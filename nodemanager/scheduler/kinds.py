"""The scheduler kinds: one :class:`SchedulerKind` record per ``[Scheduler] type``, everything the
rest of the tree asks of a scheduler, so nothing outside its own modules branches on its name.

A kind is one module holding ``KIND = SchedulerKind(...)`` (``scheduler/htcondor_kind.py``,
``scheduler/slurm_kind.py``, ``sim/pool_kind.py`` for the simulated pool) and one line in
:data:`SCHEDULER_KINDS`, which names that module. The modules are loaded on first use, so reading
the configuration or a snapshot imports no adapter (and no folder imports another's adapter: the
hooks import their adapter when called).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from nodemanager.model import Classified, Size, Worker

if TYPE_CHECKING:
    from nodemanager.configuration.settings import Settings
    from nodemanager.preflight.checklist import Check
    from nodemanager.scheduler.port import Scheduler

__all__ = ["SchedulerKind", "SCHEDULER_KINDS", "scheduler_kinds", "scheduler_kind"]


@dataclass(frozen=True)
class SchedulerKind:
    """What the tree asks of one scheduler."""

    name: str                                     # its [Scheduler] type
    options: frozenset[str]                       # the [Scheduler] options it reads, besides type
    # its adapter from the settings (``source`` names the config file in errors; ``finished``: the
    # finished jobs a poll reports at most, 0: none); None: the simulated world builds it
    build: Callable[[Settings, str, Sequence[Size], int], Scheduler] | None
    classify: Callable[[Worker], Classified]      # a worker record not read by a live adapter
    native_ad: bool = False                       # its ads are machine ads escalation reads as they are
    gpus_by_requirements: bool = False            # a demand's gpus are matched as its ClassAd RequestGPUs
    # the checks ``nodemanager check`` runs beyond one poll (``polled``: the poll went through;
    # ``scripts``: the boot scripts, where each comes from -> its text)
    preflight: Callable[[Settings, bool, Mapping[str, str]], Iterable[Check]] | None = None


# one line per kind: the module that holds its KIND
SCHEDULER_KINDS: tuple[str, ...] = (
    "nodemanager.scheduler.slurm_kind",
    "nodemanager.scheduler.htcondor_kind",
    "nodemanager.sim.pool_kind",
)


_loaded: tuple[tuple[str, ...], dict[str, SchedulerKind]] = ((), {})


def scheduler_kinds() -> dict[str, SchedulerKind]:
    """Every registered kind by name, in :data:`SCHEDULER_KINDS` order (read when asked; loaded
    once per registration, as a snapshot classifies each of its workers through it)."""
    global _loaded
    homes, kinds = _loaded
    if homes is not SCHEDULER_KINDS:
        kinds = {}
        for home in SCHEDULER_KINDS:
            kind: SchedulerKind = importlib.import_module(home).KIND
            kinds[kind.name] = kind
        _loaded = (SCHEDULER_KINDS, kinds)
    return kinds


def scheduler_kind(name: str) -> SchedulerKind | None:
    """The kind named ``name``, None when none is registered."""
    return scheduler_kinds().get(name)
