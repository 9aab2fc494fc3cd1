"""Which sizes can serve a demand item and the cheapest mix of them to boot. Pure.

A demand item fits a size whose cores, memory (x ``node_mem_scaling``), disk and GPUs suffice;
it may go only to the sizes the scheduler side found eligible (``Demand.sizes``; None: any) and
to its pinned size. :func:`pick` chooses the next boots: one size covering all the jobs, or full
nodes of the size cheapest per job plus the cheapest cover of the rest when that costs less.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Sequence

from nodemanager.model import Demand, Size

__all__ = ["fits", "eligible", "demand_signature", "unmatched_signature", "per_node", "pick"]

_SIGNATURE = re.compile(r"\(signature ([0-9a-f]{8})\)")


def fits(size: Size, d: Demand, scaling: float) -> bool:
    """Whether one empty node of ``size`` holds one job of ``d`` (cores, memory, disk, GPUs)."""
    return (size.cores >= d.cpus and size.ram_mb * scaling >= d.ram_mb and size.gpus >= d.gpus
            and (size.scratch_mb == 0 or size.scratch_mb >= d.scratch_mb))


def eligible(d: Demand, want: str | None) -> frozenset[str] | None:
    """The size names ``d`` may be placed on (None: any): its pinned size ``want`` and the
    scheduler's ``Demand.sizes``."""
    names = d.sizes
    if want is not None:
        names = frozenset({want}) if names is None else names & {want}
    return names


def demand_signature(d: Demand) -> str:
    """What a demand item needs, in words, without its count (a metric label and log key); for
    demand no size can run, with the scheduler's signature, which tells apart jobs asking alike."""
    parts = [f"{d.cpus} cpus", f"{d.ram_mb} MB"]
    if d.gpus:
        parts.append(f"{d.gpus} gpus")
    for what, value in (("size", d.size), ("partition", d.partition), ("features", d.features),
                        ("requirements", d.requirements), ("signature", unmatched_signature(d.unmatched))):
        if value:
            parts.append(f"{what} {value}")
    return ", ".join(parts)


def unmatched_signature(unmatched: str | None) -> str | None:
    """The 8-hex-digit signature inside an ``unmatched`` text (None: it has none)."""
    m = _SIGNATURE.search(unmatched) if unmatched else None
    return m.group(1) if m else None


def per_node(size: Size, d: Demand, scaling: float) -> int:
    """How many jobs of ``d`` one empty node of ``size`` holds (0: none)."""
    per = size.cores // max(d.cpus, 1)
    if d.ram_mb > 0:
        per = min(per, int(size.ram_mb * scaling // d.ram_mb))
    if d.gpus > 0:
        per = min(per, size.gpus // d.gpus)
    return per


def pick(choices: Sequence[Size], left: int, d: Demand, scaling: float,
         price: Callable[[Size], float] = lambda s: s.price) -> tuple[Size, int]:
    """The next boots for ``left`` jobs of ``d``: the size and node count of the cheapest mix,
    each size at ``price`` per node-hour (default its price; spot sizes: reclaims priced in).

    One size covering all of them, unless full nodes of the size cheapest per job plus the
    cheapest cover of the rest cost less (2/4/8/16 cores, the larger slightly cheaper per core:
    19 one-core jobs get 16 + 4 cores, not two 16s; 3 get 4 cores, never 16).
    """
    def per(s: Size) -> int:
        return max(per_node(s, d, scaling), 1)

    def cover(s: Size, n: int) -> float:
        return math.ceil(n / per(s)) * price(s)

    one = min(choices, key=lambda s: (cover(s, left), price(s), s.cores, s.ram_mb, s.name))
    dense = min(choices, key=lambda s: (price(s) / per(s), -per(s), s.name))
    full = left // per(dense)
    if full > 0 and dense is not one:
        rest = left - full * per(dense)
        mixed = full * price(dense) + (min(cover(s, rest) for s in choices) if rest else 0.0)
        # strictly cheaper only: at the same money smaller nodes can each go back on their own
        if mixed < cover(one, left) - 1e-9:
            return dense, full
    return one, math.ceil(left / per(one))
