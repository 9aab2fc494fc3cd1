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
    return [f"node {d.facts.node.name}: worker {w.name} has {w.cpus} CPUs, {UNDERSIZED} "
            f"{z.name} ({z.cores} cores): jobs placed for its cores wait"
            for d in decisions
            if (w := d.facts.worker) is not None and (z := d.facts.size) is not None and 0 < w.cpus < z.cores]
