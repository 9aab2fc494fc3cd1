"""Workers smaller than the size of the VM they run on: the core places jobs by the size's cores,
so a 2-CPU worker on a VM of a 4-core size (a wrong instance type, or a scheduler configured for
fewer CPUs) leaves jobs planned for it waiting. Said in the plan's notes. Pure."""

from __future__ import annotations

from typing import Iterable

from nodemanager.core.plan_node import NodeFacts

__all__ = ["undersized", "UNDERSIZED"]

UNDERSIZED = "smaller than its size"


def undersized(facts: Iterable[NodeFacts]) -> list[str]:
    """One note per node whose paired worker has fewer CPUs than its size has cores."""
    return [f"node {f.node.name}: worker {w.name} has {w.cpus} CPUs, {UNDERSIZED} "
            f"{z.name} ({z.cores} cores): jobs placed for its cores wait"
            for f in facts if (w := f.worker) is not None and (z := f.size) is not None and 0 < w.cpus < z.cores]
