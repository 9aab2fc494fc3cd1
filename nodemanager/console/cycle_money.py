"""What one cycle's nodes cost, for the metrics: paid nodes by what they were doing and size, the
spend rate per size, the estimated cost of the interval by state and what the cloud charges for
the gap by its billing rules (per started period, or per second after a minimum charge)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from nodemanager.console.metric_families import label as _label
from nodemanager.console.metric_families import paid_state
from nodemanager.console.summary import unlisted_boot_sizes
from nodemanager.core import charged_between
from nodemanager.core.pricing import unsized_price
from nodemanager.model import CycleReport, Size, is_gone

__all__ = ["CycleMoney", "cycle_money"]


@dataclass(frozen=True)
class CycleMoney:
    """One cycle's money figures, labelled as the metrics label them."""

    paid_nodes: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (state, size) -> nodes
    spend: Mapping[str, float] = field(default_factory=dict)     # size -> price per hour of its nodes
    cost: Mapping[str, float] = field(default_factory=dict)      # state -> money over the interval
    charges: Mapping[str, float] = field(default_factory=dict)   # size -> what the cloud bills for the gap


def cycle_money(report: CycleReport, sizes: Mapping[str, Size], draining_nodes: set[str],
                interval: float, gap: float) -> CycleMoney:
    """The money of ``report``'s listed nodes: ``interval`` the seconds booked to paid time (capped),
    ``gap`` the seconds since the last cycle (charges are what the cloud bills, however long)."""
    snap, plan = report.snapshot, report.plan
    explained = {e.node_id: e for e in plan.nodes}
    paid_nodes: dict[tuple[str, str], int] = {}
    spend: dict[str, float] = {}
    cost: dict[str, float] = {}
    charges: dict[str, float] = {}
    by_the_second: dict[str, float] = {}   # size -> prices of nodes billed per second all the gap
    of_size: dict[str, tuple[str, Size | None, float]] = {}   # node size -> label, Size, price
    for node in snap.cloud_nodes:
        shown = explained.get(node.id)
        if (shown.gone if shown is not None else is_gone(node)) or node.id in snap.destroyed:
            continue  # gone, or destroyed by us since the listing: no longer paid
        state = paid_state(report.core_state(shown.tuple.worker_state) if shown else None,
                           node.id in draining_nodes)
        known = of_size.get(node.size)
        if known is None:
            node_size = sizes.get(node.size)
            known = of_size[node.size] = (_label(node.size), node_size,
                                          node_size.price if node_size is not None else 0.0)
        size, node_size, price = known
        if node_size is None:   # a size no longer configured: its VM's booted price
            price = unsized_price(node, snap.known_prices)[0]
        paid_nodes[(state, size)] = paid_nodes.get((state, size), 0) + 1
        spend[size] = spend.get(size, 0.0) + price
        if interval:
            cost[state] = cost.get(state, 0.0) + price * interval / 3600.0
        if gap and node_size is not None:
            if node_size.billing_period <= 0 and snap.now - node.launched_at - gap >= node_size.min_charge:
                by_the_second[size] = by_the_second.get(size, 0.0) + price  # the common case, summed
            else:
                seconds = charged_between(node_size, node.launched_at, snap.now - gap, snap.now)
                charges[size] = charges.get(size, 0.0) + price * seconds / 3600.0
    for node_size_name in unlisted_boot_sizes(report).values():   # paid from the create on
        booted = sizes.get(node_size_name)
        if booted is not None:
            spend[_label(booted.name)] = spend.get(_label(booted.name), 0.0) + booted.price
    for size, prices in by_the_second.items():
        charges[size] = charges.get(size, 0.0) + prices * gap / 3600.0
    return CycleMoney(paid_nodes=paid_nodes, spend=spend, cost=cost, charges=charges)
