"""Warm capacity: per size, idle nodes kept up beyond the demand (``[Size] warm_nodes``, or
``warm_cores`` counted in whole nodes) so that queued jobs start without waiting for a boot. Pure.

Which nodes are the warm ones is stable from cycle to cycle: of a size's idle nodes that no
queued job needs and no drain holds, the longest-running first (launch time, then id). They are
exempt from being given back while idle (:func:`hold_warm`), so idle grace or the matrix never
drains a node that warm capacity would boot again. With a ``warm_schedule`` (working hours, say)
warm capacity is kept only inside its windows; outside them the idle nodes go as any others. Nodes of the size still booting and boots not
listed yet that demand did not take count as warm too; placement boots the rest in the same room
demand boots in (``max_nodes``, the size's ``max_nodes``, the quota, ``max_total_price``).
Warm capacity never starves queued work: when a global cap (``max_nodes``, the quota,
``max_total_price``) holds back jobs, as many warm nodes as would make room for them (the
youngest first) are no longer kept (:func:`give_way`): the reason ``warm_gives_way``
(:mod:`nodemanager.core.reasons.warm_gives_way`) drains them at once, under the budgets, and they
are destroyed once drained; the jobs' note names them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from nodemanager.core.budgets import verb
from nodemanager.core.plan_node import Decision
from nodemanager.core.schedule import active, next_change
from nodemanager.model import Blocked, ItemKind, Size
from nodemanager.core.settings import CoreSettings
from policy_matrix.vocabulary import BOOT_EXCEEDED, IDLE, UNPAIRED

__all__ = ["WarmCount", "warm_target", "warm_wanted", "warm_turns", "count_warm", "hold_warm", "give_way",
           "GIVE_WAY_CAPS"]

# the caps a warm node's slot or price counts in: queued jobs they hold back make warm nodes give way
GIVE_WAY_CAPS = ("max_nodes", "quota", "max_total_price")


def warm_target(size: Size, now: float | None = None) -> int:
    """The idle nodes of ``size`` to keep at ``now``: ``warm_nodes``, or ``warm_cores`` rounded up to
    nodes; none outside the windows of its ``warm_schedule`` (``now`` None: whatever the time)."""
    if now is not None and size.warm_schedule is not None and not active(size.warm_schedule, now):
        return 0
    by_cores = -(-size.warm_cores // size.cores) if size.warm_cores > 0 and size.cores > 0 else 0
    return max(size.warm_nodes, by_cores)


def warm_wanted(settings: CoreSettings) -> bool:
    """Whether any size keeps warm capacity."""
    return any(warm_target(s) > 0 for s in settings.sizes)


def warm_turns(sizes: Iterable[Size], now: float) -> float:
    """The first instant after ``now`` at which a size's warm target turns by its ``warm_schedule``
    alone (a window opens or closes); ``inf`` when none does."""
    return min((next_change(s.warm_schedule, now) for s in sizes
                if s.warm_schedule is not None and warm_target(s) > 0), default=math.inf)


@dataclass(frozen=True)
class WarmCount:
    """One size's warm capacity this cycle: ``target`` idle nodes wanted, ``have`` (idle kept,
    booting, boots not listed yet), and the listed idle nodes kept (node id -> words)."""

    size: str
    target: int
    have: int
    kept: Mapping[str, str]

    @property
    def short(self) -> int:
        """How many more nodes to boot for it."""
        return max(self.target - self.have, 0)

    @property
    def what(self) -> str:
        return f"[Size {self.size}] warm {self.target} idle node(s)"


def _idle_free(d: Decision) -> bool:
    """An idle node nothing else has a hold on: no drain (ours or anyone's), no destroy under way."""
    f = d.facts
    return (f.core_state == IDLE and f.tuple.worker_state == IDLE and d.drain is None and f.our_drain is None
            and f.theirs is None and not f.foreign and not f.gone and not f.lost
            and d.blocked != Blocked.IN_FLIGHT and not d.forced)


def _booting(d: Decision) -> bool:
    f = d.facts
    return f.core_state == UNPAIRED and f.tuple.boot_grace != BOOT_EXCEEDED and d.want is None and f.up


def count_warm(sizes: Iterable[Size], nodes: Sequence[Decision], needed: Mapping[str, str],
               unused_in_flight: Mapping[str, int], now: float) -> list[WarmCount]:
    """Each size with warm capacity at ``now``: its target, what it has, and which idle nodes are
    kept. ``needed``: the nodes queued jobs take (never warm); ``unused_in_flight``: size -> boots
    not listed yet that demand did not take."""
    sizes_by = {s.name: s for s in sizes}
    targets = {name: t for name, s in sizes_by.items() if (t := warm_target(s, now)) > 0}
    if not targets:
        return []
    idle: dict[str, list[Decision]] = {}
    booting: dict[str, int] = {}
    for d in nodes:
        name = d.facts.node.size
        if name not in targets or d.facts.node.id in needed:
            continue
        if _idle_free(d):
            idle.setdefault(name, []).append(d)
        elif _booting(d):
            booting[name] = booting.get(name, 0) + 1
    out = []
    for name, target in sorted(targets.items()):
        ranked = sorted(idle.get(name, ()), key=lambda d: (d.facts.node.launched_at, d.facts.node.id))[:target]
        when = f" ({sizes_by[name].warm_schedule.text})" if sizes_by[name].warm_schedule is not None else ""
        kept = {d.facts.node.id: f"kept warm: [Size {name}] warm {target} idle node(s){when}, "
                                 f"this one of the longest running" for d in ranked}
        have = len(kept) + booting.get(name, 0) + unused_in_flight.get(name, 0)
        out.append(WarmCount(size=name, target=target, have=have, kept=kept))
    return out


def hold_warm(decisions: list[Decision], kept: Mapping[str, str]) -> list[Decision]:
    """``decisions`` with the drains and destroys of the warm nodes (``kept``) held back; an
    operator's forced drain still goes."""
    give_back = (ItemKind.DRAIN, ItemKind.DESTROY)
    return [d.held_back(Blocked.WARM, f"{verb(d.want)} held back: {kept[d.facts.node.id]}; {d.reason}")
            if d.want in give_back and not d.forced and d.facts.node.id in kept else d for d in decisions]


def give_way(warm: Sequence[WarmCount], starved: Sequence[tuple[float, float, str, str]],
             sizes: Mapping[str, Size]) -> tuple[list[WarmCount], list[str], dict[str, str]]:
    """``warm`` with the nodes that give way to queued jobs no longer kept; for each entry of
    ``starved`` (what must be freed: nodes, or money per hour for ``max_total_price``; the least
    that lets one node of the held jobs boot (none give way when the warm nodes cannot free it);
    the cap that binds, one of :data:`GIVE_WAY_CAPS`; the size the held jobs need) the words naming
    the warm nodes that give way for it ("" for none); and each node that gives way (node id -> why)."""
    # the youngest kept warm first: the longest-running stay warm longest
    pool = [(w.size, nid) for w in warm for nid in reversed(list(w.kept))]
    gone: dict[str, list[str]] = {}
    words: list[str] = []
    going: dict[str, str] = {}
    for short, least, cap, held in starved:
        money = cap == "max_total_price"
        freed = 0.0
        popped: list[tuple[str, str]] = []
        taken: list[tuple[str, str]] = []
        while pool and (freed < short - 1e-9 if money else len(taken) < short):
            popped.append(pool.pop(0))
            price = sizes[popped[-1][0]].price if popped[-1][0] in sizes else 0.0
            if money and price <= 0.0:
                continue   # frees no money
            freed += price
            taken.append(popped[-1])
        if (freed if money else len(taken)) < least - 1e-9:   # not even one of the jobs' nodes: all stay warm
            taken = []
        pool[:0] = [t for t in popped if t not in taken]   # what did not give way, for the next jobs
        mine = []
        for name, nid in taken:
            gone.setdefault(name, []).append(nid)
            mine.append(f"{nid} ([Size {name}])")
            going[nid] = f"warm [Size {name}] node gives way to queued [Size {held}] jobs held by {cap}"
        words.append(f"held by warm node(s) {', '.join(mine)}, which give way: no longer kept warm, "
                     f"drained now and destroyed once drained" if mine else "")
    # they still count as had until they are gone: booting their replacements would spend the
    # very slot or money the jobs wait for
    out = [replace(w, kept={k: v for k, v in w.kept.items() if k not in gone[w.size]})
           if w.size in gone else w for w in warm]
    return out, words, going
