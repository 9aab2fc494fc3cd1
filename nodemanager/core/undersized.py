"""Workers smaller than the size of the VM they run on: the core places jobs by the size's cores,
so a 2-CPU worker on a VM of a 4-core size (a wrong instance type, or a scheduler configured for
fewer CPUs) leaves jobs planned for it waiting. Said in the plan's notes. Pure."""

from __future__ import annotations

from typing import Iterable

from nodemanager.core.plan_node import Decision

__all__ = ["undersized", "UNDERSIZED"]

UNDERSIZED = "smaller than its size"


def undersized(decisions: Iterable[Decision]) -> list[str]:
    """One note per node whose paired worker has fewer CPUs than its size has cores."""
    return [f"node {f.node.name}: worker {f.worker.name} has {f.worker.cpus} CPUs, {UNDERSIZED} "
            f"{f.size.name} ({f.size.cores} cores): jobs placed for its cores wait"
            for f in (d.facts for d in decisions)
            if f.worker is not None and f.size is not None and 0 < f.worker.cpus < f.size.cores]
