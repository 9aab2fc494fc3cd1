"""One entry point that decides which sizes can run a demand item.

:func:`match_demand` fills ``Demand.sizes`` / ``Demand.unmatched`` from what the item asks beyond
cores, memory and disk: ClassAd ``requirements`` (HTCondor: :mod:`.htcondor_match`), a SLURM
``features`` constraint and ``partition`` (:mod:`.slurm_match`), and ``gpus``. The live adapters
match their own jobs (they see the whole job ad); this serves demand given as data (the snapshot
of ``nodemanager plan``). The core never parses requirements itself.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from nodemanager.core.size_choice import unmatched_signature
from nodemanager.model import Demand, Size
from nodemanager.configuration.kinds import scheduler_kinds

if TYPE_CHECKING:
    from nodemanager.scheduler.htcondor_match import HTCondorMatcher

__all__ = ["match_demand", "signature_of"]


def match_demand(demand: Demand, sizes: Sequence[Size], scheduler: str, *,
                 start: str | None = None) -> Demand:
    """``demand`` with ``sizes`` (the sizes that can run its jobs) and, when none can,
    ``unmatched`` (why, in words, with a signature). ``requirements`` is matched as HTCondor's
    negotiator would against each size's offline ad (``start``: the site's START expression);
    ``features`` and ``partition`` as SLURM would; ``gpus`` against ``Size.gpus`` (as
    ``RequestGPUs`` for a scheduler kind that matches GPUs by requirements, HTCondor). An item that asks for none of these, or
    whose ``sizes`` are already decided, is returned as is. Raises ValueError naming the text if
    ``requirements`` or ``features`` does not parse, or if both are given."""
    if demand.sizes is not None or not sizes:
        return demand
    if demand.requirements is not None and demand.features is not None:
        raise ValueError("a demand item has either requirements (HTCondor ClassAd) or features "
                         "(SLURM constraint), not both")
    what = f"jobs of {demand.cpus} cpus, {demand.ram_mb} MB"  # no count: the verdict is kept per signature
    found: list[tuple[frozenset[str], str | None]] = []
    kind = scheduler_kinds().get(scheduler)
    if demand.requirements is not None or (kind is not None and kind.gpus_by_requirements and demand.gpus):
        v = _htcondor(tuple(sizes), start).verdict(
            {"Requirements": demand.requirements or "true"}, what, (demand.cpus, demand.ram_mb, demand.scratch_mb), demand.gpus)
        found.append((v.sizes, v.unmatched))
    slurm_side = demand.features is not None or demand.partition is not None
    if slurm_side or (demand.gpus and not found):
        from nodemanager.scheduler.slurm_json import SlurmJob
        from nodemanager.scheduler.slurm_match import SlurmMatcher, parse_constraint

        if demand.features is not None:
            parse_constraint(demand.features)
        pending = SlurmJob(0, "PENDING", (), demand.cpus, 1, partition=demand.partition or "",
                       features=demand.features or "",
                       gres=f"gres:gpu:{demand.gpus}" if demand.gpus and not found else "")
        n = SlurmMatcher(sizes).need(pending, demand.cpus, demand.ram_mb, what)
        if n.sizes is not None:
            found.append((n.sizes, n.unmatched))
    if not found:
        return demand
    eligible = frozenset.intersection(*(s for s, _ in found))
    why = next((w for _, w in found if w), None)
    if not eligible and why is None:
        why = f"no size can run {what}: no size meets all of what it asks"
    return replace(demand, sizes=eligible, unmatched=why if not eligible else None)


@functools.lru_cache(maxsize=8)
def _htcondor(sizes: tuple[Size, ...], start: str | None) -> "HTCondorMatcher":
    """One matcher per (sizes, START): a snapshot's items share the size ads and the verdicts."""
    from nodemanager.scheduler.htcondor_match import HTCondorMatcher

    return HTCondorMatcher(sizes, start)


def signature_of(unmatched: str) -> str:
    """The short stable signature inside an ``unmatched`` text (8 hex digits; part of the
    ``nodemanager_unmatched_jobs`` label); a text without one gives ``"-"``."""
    return unmatched_signature(unmatched) or "-"
