"""The cloud kinds: one :class:`CloudKind` record per driver family (libcloud's providers, the
simulated cloud), everything the rest of the tree asks of a ``[Cloud] driver``, so nothing outside
its own modules branches on a driver's name.

A kind is one module holding ``KIND = CloudKind(...)`` (``cloud/libcloud_kind.py``,
``sim/cloud_kind.py``) and one line in :data:`CLOUD_KINDS`, which names that module; the modules
are loaded on first use. A libcloud provider is a row of ``cloud/providers.py`` within its kind.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from nodemanager.cloud.port import CloudDriver
    from nodemanager.configuration.settings import Settings

__all__ = ["CloudKind", "CLOUD_KINDS", "cloud_kinds", "cloud_kind", "in_process"]


@dataclass(frozen=True)
class CloudKind:
    """What the tree asks of one driver family."""

    name: str
    drivers: tuple[str, ...]            # the [Cloud] driver words it takes
    # of those, the clouds that live inside this process: nothing of theirs outlives a restart or
    # is shared (no journal, no memories or history on disk, no deployment identity)
    in_process: frozenset[str]
    # its adapter from the settings; None: the simulated world builds it, with its scheduler
    build: Callable[[Settings], CloudDriver] | None


# one line per kind: the module that holds its KIND
CLOUD_KINDS: tuple[str, ...] = (
    "nodemanager.sim.cloud_kind",
    "nodemanager.cloud.libcloud_kind",
)

_loaded: tuple[tuple[str, ...], dict[str, CloudKind]] = ((), {})


def cloud_kinds() -> dict[str, CloudKind]:
    """Every registered kind by name, in :data:`CLOUD_KINDS` order (read when asked)."""
    global _loaded
    homes, kinds = _loaded
    if homes is not CLOUD_KINDS:
        kinds = {}
        for home in CLOUD_KINDS:
            kind: CloudKind = importlib.import_module(home).KIND
            kinds[kind.name] = kind
        _loaded = (CLOUD_KINDS, kinds)
    return kinds


def cloud_kind(driver: str) -> CloudKind | None:
    """The kind that takes ``[Cloud] driver = driver``, None when none does."""
    return next((k for k in cloud_kinds().values() if driver in k.drivers), None)


def in_process(driver: str) -> bool:
    """Whether the cloud of ``driver`` lives inside this process (see :attr:`CloudKind.in_process`)."""
    kind = cloud_kind(driver)
    return kind is not None and driver in kind.in_process
