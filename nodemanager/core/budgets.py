"""The gates after demand: freezes, demand, ``min_nodes`` (the global one and each size's) and
the budgets (``max_concurrent_drains``, ``max_destroys_per_hour``, the ``[Budget NAME]``
sections of :mod:`nodemanager.core.disruption_budgets`), applied to what the disruption reasons
proposed. :class:`Budgets` is computed once per cycle and drawn from in order: an operator's
forced drains first (they pass min_nodes and the drain budget, but count in both), then the
destroys of nodes that run nothing, then the rest in victim order (:func:`order_victims`) when
not all may go. Pure.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from nodemanager.core.consolidate import too_young
from nodemanager.core.disruption_budgets import allowances, binding, budget_reason, held_words, uses
from nodemanager.core.plan_node import Decision
from nodemanager.core.reasons.base import Reason
from nodemanager.core.victims import Estimator, order_victims
from nodemanager.model import Blocked, BudgetUse, ItemKind, Snapshot, VictimCost
from nodemanager.core.settings import CoreSettings
from policy_matrix.vocabulary import BOOT_EXCEEDED, UNPAIRED

__all__ = ["Budgets", "budgets", "gate", "verb"]

_VERBS: dict[ItemKind | None, str] = {ItemKind.DRAIN: "drain", ItemKind.DESTROY: "destroy",
                                      ItemKind.CANCEL_DRAIN: "cancel of drain",
                                      ItemKind.ESCALATE: "escalation"}
_FREE = VictimCost()  # an unpaired node: nothing runs there


def verb(kind: ItemKind | None) -> str:
    """``drain``, ``destroy``, ``cancel of drain`` or ``escalation``: the action in words."""
    return _VERBS[kind]


class Budgets(NamedTuple):
    """What may still go this cycle; each draw returns the budgets left (``_replace``)."""

    up: int                 # nodes counted as up (towards min_nodes) at the start
    room: int               # how many more may go before min_nodes
    recent: int             # destroys in the last hour
    destroys_left: float    # under max_destroys_per_hour (inf: no cap)
    draining: int           # drains of ours under way that stay (count in max_concurrent_drains)
    started: int            # drains started this cycle (forced ones first)
    max_drains: int

    @property
    def drains_left(self) -> int:
        return max(self.max_drains - self.draining, 0) - self.started


def budgets(decisions: list[Decision], snapshot: Snapshot, settings: CoreSettings) -> Budgets:
    """The cycle's budgets, before any gate: forced drains already count in room and drains."""
    now = snapshot.now
    recent = sum(1 for t in snapshot.recent_destroys if now - t < 3600.0)
    up = forced = draining = 0
    drain = ItemKind.DRAIN
    for d in decisions:
        f = d.facts
        up += f.up
        forced += d.forced and d.want is drain
        draining += f.ours_draining and d.want is None  # with nothing else planned, it stays
    return Budgets(up=up, room=up - settings.min_nodes - forced, recent=recent,
                   destroys_left=(max(settings.max_destroys_per_hour - recent, 0)
                                  if settings.max_destroys_per_hour > 0 else math.inf),
                   draining=draining, started=forced, max_drains=settings.max_concurrent_drains)


def _size_rooms(decisions: list[Decision], settings: CoreSettings) -> dict[str, int]:
    """Per size with a ``min_nodes``: how many more of it may go (forced drains already count)."""
    room = {s.name: -s.min_nodes for s in settings.sizes if s.min_nodes > 0}
    for d in decisions if room else ():
        f = d.facts
        if f.up and f.size is not None and f.size.name in room:
            room[f.size.name] += 1 - (d.forced and d.want is ItemKind.DRAIN)
    return room


def gate(decisions: list[Decision], snapshot: Snapshot, settings: CoreSettings, freeze: str | None,
         estimator: Estimator, reasons: Sequence[Reason]) -> tuple[list[Decision], tuple[BudgetUse, ...]]:
    """``decisions`` with the drains and destroys that may not happen now blocked, in words, and
    what each ``[Budget NAME]`` did (by the ``budget`` word of the reason behind each, of ``reasons``)."""
    b = budgets(decisions, snapshot, settings)
    all_budgets = allowances(settings, b.up, snapshot.now) if settings.disruption_budgets else []
    if freeze:
        return [d.held_back(Blocked.FROZEN, f"{verb(d.want)} held back: {freeze}")
                if d.want in (ItemKind.DRAIN, ItemKind.DESTROY) else d for d in decisions], uses(all_budgets, {})
    out = list(decisions)
    min_nodes, up = settings.min_nodes, b.up
    size_room = _size_rooms(decisions, settings)
    active_budgets = [a for a in all_budgets if a.active]
    by_name = {r.name: r for r in reasons} if active_budgets else {}
    held: dict[str, int] = {}

    def destroy_held(d: Decision, note: str = "") -> Decision:
        return d.held_back(Blocked.BUDGET, f"destroy held back: max_destroys_per_hour "
                           f"{settings.max_destroys_per_hour} reached ({b.recent} in the last hour); "
                           f"{d.reason}{note}")

    # the nodes that want an action (a few of a large pool): the only ones the gates look at
    wanting = [i for i, d in enumerate(decisions) if d.want is not None]
    # nodes being given back count against the [Budget NAME] sections: destroys under way, drained
    # nodes destroyed now (below), drains under way and started now (``b``)
    finishing = sum(1 for d in decisions if "destroy" in d.facts.flights) if active_budgets else 0
    # nodes that run nothing first (not cancellable); a booting one still counts as up
    for i in wanting:
        d = decisions[i]
        if d.want is ItemKind.DESTROY and not d.cancellable:
            booting = d.drain is None and d.facts.tuple.boot_grace != BOOT_EXCEEDED and (
                d.facts.core_state == UNPAIRED)
            if booting and b.room <= 0:
                out[i] = d.held_back(Blocked.MIN_NODES, f"destroy held back: min_nodes {min_nodes} ({up} up); "
                                                        f"{d.reason}")
            elif b.destroys_left <= 0:
                out[i] = destroy_held(d)
                if d.facts.ours_draining:  # the drain stays under way
                    b = b._replace(draining=b.draining + 1)
            else:
                b = b._replace(destroys_left=b.destroys_left - 1, room=b.room - booting)
                finishing += d.drain is not None  # a drained node going: it counts against the budgets

    candidates: list[int] = []
    for i in wanting:
        d = out[i]
        if d.want in (ItemKind.DRAIN, ItemKind.DESTROY) and d.cancellable and not d.forced:
            young = too_young(d.facts, settings, snapshot.now)  # no give-back right after a boot
            if young is not None:
                out[i] = d.held_back(Blocked.MIN_LIFETIME, f"{verb(d.want)} {young}; {d.reason}")
            elif d.needed:
                out[i] = d.held_back(Blocked.DEMAND, f"{verb(d.want)} held back: {d.needed}; {d.reason}")
            else:
                candidates.append(i)
    drains = sum(1 for i in candidates if out[i].want is ItemKind.DRAIN)
    destroys = len(candidates) - drains
    # victims are ordered only when some, not all, may go (pricing thousands of them costs time)
    some_may_go = b.room > 0 and ((drains and b.drains_left > 0) or (destroys and b.destroys_left > 0))
    if some_may_go and (len(candidates) > b.room or drains > b.drains_left or destroys > b.destroys_left
                        or size_room or active_budgets):
        def cost(i: int) -> VictimCost:
            w = out[i].facts.worker
            return estimator(w, snapshot.now) if w is not None else _FREE
        costs = [(out[i].facts.node.id, cost(i)) for i in candidates]
        keeping = {out[i].facts.node.id: (sz.price, sz.cores) for i in candidates
                   if (sz := out[i].facts.size) is not None}
        order = {nid: k for k, nid in enumerate(order_victims(costs, settings.victim_horizon, keeping))}
        candidates.sort(key=lambda i: order[out[i].facts.node.id])
        chosen = "; other nodes cost more to give back (victim order)"
    else:
        chosen = ""
    destroyed = finishing  # with the destroys of this loop: nodes going, for the [Budget NAME] sections
    for i in candidates:
        d = out[i]
        up_now = d.facts.up  # a node that is no capacity (reclaimed) takes nothing from min_nodes
        if b.room <= 0 and up_now:
            out[i] = d.held_back(Blocked.MIN_NODES, f"{verb(d.want)} held back: min_nodes {min_nodes} "
                                                    f"({up} up){chosen}; {d.reason}")
            continue
        size = d.facts.size
        if up_now and size is not None and size.name in size_room and size_room[size.name] <= 0:
            out[i] = d.held_back(Blocked.MIN_NODES, f"{verb(d.want)} held back: [Size {size.name}] min_nodes "
                                                    f"{size.min_nodes}{chosen}; {d.reason}")
            continue
        reason = budget_reason(d, by_name) if active_budgets else None
        if reason is not None:
            going = b.draining + b.started + destroyed
            bound = binding(active_budgets, reason, going)
            if bound is not None:
                held[bound.budget.name] = held.get(bound.budget.name, 0) + 1
                out[i] = d.held_back(Blocked.BUDGET, f"{verb(d.want)} {held_words(bound, reason, going)}"
                                                     f"{chosen}; {d.reason}", budget=bound.budget.name)
                continue
        if d.want is ItemKind.DRAIN:
            if b.drains_left <= 0:
                out[i] = d.held_back(Blocked.BUDGET, f"drain held back: max_concurrent_drains "
                                                     f"{settings.max_concurrent_drains} reached ({b.draining} "
                                                     f"under way, {b.started} starting now){chosen}; {d.reason}")
                continue
            b = b._replace(started=b.started + 1)
        elif b.destroys_left <= 0:
            out[i] = destroy_held(d, chosen)
            continue
        else:
            b = b._replace(destroys_left=b.destroys_left - 1)
            destroyed += 1
        b = b._replace(room=b.room - up_now)
        if size is not None and size.name in size_room:
            size_room[size.name] -= up_now
    return out, uses(all_budgets, held)
