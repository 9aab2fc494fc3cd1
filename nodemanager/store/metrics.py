"""The store's health as Prometheus series, read when scraped (docs/metrics.md)."""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from nodemanager.store.writer import StoreHealth

__all__ = ["StoreCollector"]


class StoreCollector(Collector):
    """``nodemanager_store_ok``, ``nodemanager_store_pending_records``,
    ``nodemanager_store_dropped_records_total``, ``nodemanager_store_written_records_total``."""

    def __init__(self, health: Callable[[], StoreHealth]) -> None:
        self.health = health

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        h = self.health()
        yield GaugeMetricFamily("nodemanager_store_ok", "1 while the store takes writes, 0 while what the daemon "
                                "learns waits in memory (a full disk, a lock, the database down)", value=1 if h.ok else 0)
        yield GaugeMetricFamily("nodemanager_store_pending_records", "Records waiting in memory to be written to the "
                                "store (at most [Store] buffer)", value=h.pending)
        yield CounterMetricFamily("nodemanager_store_dropped_records", "Events dropped because the store failed "
                                  "longer than the buffer lasts", value=h.dropped)
        yield CounterMetricFamily("nodemanager_store_written_records", "Records written to the store", value=h.written)
