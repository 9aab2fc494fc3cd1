"""nodemanager: an elastic cloud node manager for HTCondor and SLURM pools, driven by a policy
matrix. docs/architecture.md shows how the folders below match the flow of one cycle."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` that hands on each public name from the private module
    ``homes`` names for it, importing that module on first use (a folder's face)."""

    def __getattr__(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__


DISTRIBUTION = "batch-nodemanager"  # the package index name (``nodemanager`` there is another project)


def installed_version(default: str = "unknown") -> str:
    """This installation's version, or ``default`` when run from a source tree never installed."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return default
