"""Which sizes can run a demand item: fills :attr:`Demand.sizes` and :attr:`Demand.unmatched`.

The scheduler side decides eligibility (the core never parses requirements). This first version
matches GPUs (``Demand.gpus`` against ``Size.gpus``) and a SLURM ``partition`` against
``Size.partitions``; ClassAd ``requirements`` and SLURM ``features`` are refused with a clear error
until their matchmaking lands here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from nodemanager.model import Demand, Size

__all__ = ["match_demand", "DemandMatchError"]


class DemandMatchError(ValueError):
    """A demand item this module cannot match (the message says which field and why)."""


def match_demand(demand: Demand, sizes: Sequence[Size], scheduler: str) -> Demand:
    """``demand`` with ``sizes`` set to the names of the sizes that can run it, or to an empty set
    with ``unmatched`` saying why in words. A demand item that already carries ``sizes`` (the
    adapter matched it) is returned as is; one without constraints keeps ``sizes`` None (any size
    whose cores, memory and disk fit). ``scheduler`` is ``htcondor``, ``slurm`` or ``simulated``."""
    if demand.sizes is not None:
        return demand
    if demand.requirements:
        raise DemandMatchError(f"requirements: ClassAd matchmaking of {demand.requirements!r} "
                               f"is not supported yet ({scheduler})")
    if demand.features:
        raise DemandMatchError(f"features: SLURM constraint matching of {demand.features!r} "
                               f"is not supported yet ({scheduler})")
    if not demand.gpus and not demand.partition:
        return demand
    eligible = [s for s in sizes if s.gpus >= demand.gpus
                and (not demand.partition or demand.partition in s.partitions)]
    if eligible:
        return replace(demand, sizes=frozenset(s.name for s in eligible))
    why = []
    if demand.gpus:
        most = max((s.gpus for s in sizes), default=0)
        if most < demand.gpus:
            why.append(f"no size has {demand.gpus} GPU(s) (most: {most})")
    if demand.partition:
        if not any(demand.partition in s.partitions for s in sizes):
            why.append(f"no size is in partition {demand.partition!r}")
        elif not why:
            why.append(f"no size in partition {demand.partition!r} has {demand.gpus} GPU(s)")
    return replace(demand, sizes=frozenset(), unmatched="; ".join(why))
