"""Who spent what as Prometheus series, computed from the ledger when scraped: node-hours and
money since midnight UTC per user and per group, the ``spend_top`` largest by money with their
own series and the rest summed as ``other`` (a pool of many users cannot grow the series without
bound)."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from nodemanager.console.metric_families import label
from nodemanager.core.attribution import NO_GROUP, NOBODY, top

__all__ = ["SpendCollector"]


class SpendCollector(Collector):
    """``nodemanager_spend_today_node_hours`` and ``nodemanager_spend_today_money``, labelled
    ``by`` (user, group) and ``name``."""

    def __init__(self, ledger: Any, clock: Callable[[], float], limit: int) -> None:
        self.ledger, self.clock, self.limit = ledger, clock, limit

    def collect(self) -> Iterator[GaugeMetricFamily]:
        hours = GaugeMetricFamily("nodemanager_spend_today_node_hours",
                                  "Node-hours since midnight UTC attributed to a user or group (the top ones, "
                                  "the rest as other)", labels=["by", "name"])
        money = GaugeMetricFamily("nodemanager_spend_today_money",
                                  "Money since midnight UTC attributed to a user or group (the top ones, the "
                                  "rest as other)", labels=["by", "name"])
        now = self.clock()
        for by in ("user", "group"):
            summed: dict[str, tuple[float, float]] = {}
            for r in top(self.ledger.spend(now - now % 86400.0, now, by), self.limit):
                name = "none" if r.name in (NOBODY, NO_GROUP) else label(r.name, "unknown")
                h, m = summed.get(name, (0.0, 0.0))
                summed[name] = (h + r.node_hours, m + r.money)
            for name, (h, m) in sorted(summed.items()):
                hours.add_metric([by, name], h)
                money.add_metric([by, name], m)
        yield hours
        yield money
