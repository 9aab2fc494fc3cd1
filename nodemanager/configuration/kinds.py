"""The kinds a configuration may name: one :class:`SchedulerKind` per ``[Scheduler] type`` and one
:class:`CloudKind` per ``[Cloud] driver`` family, each bringing everything the rest of the tree asks
of it, so nothing outside a kind's own modules branches on its name.

A kind is one module holding ``KIND = SchedulerKind(...)`` or ``KIND = CloudKind(...)`` and one
line in :data:`SCHEDULER_KINDS` or :data:`CLOUD_KINDS`, which names that module. The modules are
loaded on first use (reading a configuration or a snapshot imports no adapter), and their hooks
import their adapter when called.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from nodemanager.model import Classified, Size, Worker

__all__ = ["SchedulerKind", "CloudKind", "SCHEDULER_KINDS", "CLOUD_KINDS", "scheduler_kinds", "cloud_kinds",
           "cloud_kind", "in_process", "hook"]

# one line per kind: the module that holds its KIND
SCHEDULER_KINDS: tuple[str, ...] = (
    "nodemanager.scheduler.slurm_kind",
    "nodemanager.scheduler.htcondor_kind",
    "nodemanager.sim.pool_kind",
)
CLOUD_KINDS: tuple[str, ...] = (
    "nodemanager.sim.cloud_kind",
    "nodemanager.cloud.libcloud_kind",
)


@dataclass(frozen=True)
class SchedulerKind:
    """What the tree asks of one scheduler."""

    name: str                                     # its [Scheduler] type
    options: frozenset[str]                       # the [Scheduler] options it reads, besides type
    # its adapter, ``build(settings, source, sizes, finished)`` (``source`` names the config file in
    # errors; ``finished``: the finished jobs a poll reports at most, 0: none); None: the simulated
    # world builds it with the simulated cloud
    build: Callable[..., Any] | None
    classify: Callable[[Worker], Classified]      # a worker record not read by a live adapter
    native_ad: bool = False                       # its ads are machine ads escalation reads as they are
    gpus_by_requirements: bool = False            # a demand's gpus are matched as its ClassAd RequestGPUs
    # those of them that are numbers, each with its parser and finite range
    # (:class:`nodemanager.configuration.values.Ranged`): checked at load, and what its adapter parses with
    numbers: Mapping[str, Any] = field(default_factory=dict)
    # ``module:function`` of the checks ``nodemanager check`` runs beyond one poll, called as
    # ``function(settings, polled, scripts)`` (``polled``: the poll went through; ``scripts``: the
    # boot scripts, where each comes from -> its text), yielding ``Check`` lines
    preflight: str | None = None


@dataclass(frozen=True)
class CloudKind:
    """What the tree asks of one driver family."""

    name: str
    drivers: tuple[str, ...]                      # the [Cloud] driver words it takes
    # of those, the clouds that live inside this process: nothing of theirs outlives a restart or
    # is shared (no journal, memories or history on disk, no deployment identity)
    in_process: frozenset[str]
    # its adapter, ``build(settings) -> CloudDriver``; None: the simulated world builds it
    build: Callable[..., Any] | None
    image_required: Callable[[str], bool]         # driver -> [Cloud Create] image must be set
    # (driver, size) -> (option, why) when the driver cannot buy the size as configured
    market_problem: Callable[[str, Size], "tuple[str, str] | None"]


_loaded: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {}


def _kinds(homes: tuple[str, ...]) -> dict[str, Any]:
    """Each module's KIND by name, loaded once per registration (a snapshot classifies each of
    its workers through it)."""
    key = "scheduler" if homes is SCHEDULER_KINDS else "cloud" if homes is CLOUD_KINDS else repr(homes)
    got = _loaded.get(key)
    if got is None or got[0] is not homes:
        kinds = {}
        for home in homes:
            kind = importlib.import_module(home).KIND
            kinds[kind.name] = kind
        got = _loaded[key] = (homes, kinds)
    return got[1]


def scheduler_kinds() -> dict[str, SchedulerKind]:
    """Every registered scheduler kind by name, in :data:`SCHEDULER_KINDS` order (read when asked)."""
    return _kinds(SCHEDULER_KINDS)


def cloud_kinds() -> dict[str, CloudKind]:
    """Every registered cloud kind by name, in :data:`CLOUD_KINDS` order (read when asked)."""
    return _kinds(CLOUD_KINDS)


def cloud_kind(driver: str) -> CloudKind | None:
    """The kind that takes ``[Cloud] driver = driver``, None when none does."""
    return next((k for k in cloud_kinds().values() if driver in k.drivers), None)


def in_process(driver: str) -> bool:
    """Whether the cloud of ``driver`` lives inside this process (see :attr:`CloudKind.in_process`)."""
    kind = cloud_kind(driver)
    return kind is not None and driver in kind.in_process


def hook(name: str) -> Callable[..., Any]:
    """The function a kind names as ``module:function``."""
    module, _, function = name.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return fn
