"""Where a queued group goes when sizes come from several clouds, and why the other clouds lost.
Pure.

For a group placed on new boots of ``best``, each other cloud with a size that fits the group lost
for one reason: all its fitting sizes are held off (capacity breaker, protected mode, quota, a
silent cloud), the group may not run there (a requirement, a pinned size, a spot limit), or its
cheapest fitting size costs more per job at the expected price (spot reclaims priced in).
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

from nodemanager.core.size_choice import fits, per_node
from nodemanager.model import CloudChoice, Demand, Size

__all__ = ["choose_cloud"]


def choose_cloud(what: str, jobs: int, d: Demand, best: Size, sizes: Iterable[Size],
                 allowed: frozenset[str] | None, usable: Iterable[Size], price: Callable[[Size], float],
                 blocked_why: Mapping[str, str], scaling: float) -> CloudChoice:
    """The choice of ``best``'s cloud for ``jobs`` jobs of ``what`` (``d``), each other cloud's loss."""
    usable_names = {s.name for s in usable}
    fitting: dict[str, list[Size]] = {}
    for s in sizes:
        if s.cloud != best.cloud and fits(s, d, scaling):
            fitting.setdefault(s.cloud, []).append(s)

    def per_job(s: Size) -> float:
        return price(s) / max(per_node(s, d, scaling), 1)

    lost: list[str] = []
    for cloud, candidates in sorted(fitting.items()):
        may = [s for s in candidates if allowed is None or s.name in allowed]
        open_ = [s for s in may if s.name in usable_names]
        if not may:
            lost.append(f"{cloud}: these jobs may not run there ({', '.join(s.name for s in candidates)})")
        elif not open_:
            lost.append(f"{cloud}: " + "; ".join(blocked_why.get(s.name, f"{s.name} blocked") for s in may))
        else:
            cheapest = min(open_, key=lambda s: (per_job(s), s.name))
            lost.append(f"{cloud}: dearer ({cheapest.name} at {per_job(cheapest):.4g}/h per job, "
                        f"{best.name} at {per_job(best):.4g}/h)")
    return CloudChoice(what=what, jobs=jobs, cloud=best.cloud, size=best.name, lost=tuple(lost))
