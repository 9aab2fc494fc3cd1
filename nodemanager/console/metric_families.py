"""What the metrics are made of: bounded label values (:func:`label`), what a paid node's time
counts as (:func:`paid_state`), why actions are frozen (:func:`frozen_reason`), and the gauges of
the last cycle, served whole at each scrape (:class:`CycleCollector`)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from nodemanager.core.placement import UNMATCHED
from nodemanager.model import Plan, Unmet
from nodemanager.text import printable

__all__ = ["PAID_STATES", "FROZEN_REASONS", "CALL_TARGETS", "TOP_SERIES", "label", "top", "unmatched", "paid_state",
           "frozen_reason", "CycleGauges", "CycleCollector"]

PAID_STATES = ("busy", "idle", "booting", "draining", "down")
FROZEN_REASONS = ("stale", "mass_down", "paused", "clock_skew", "other")
CALL_TARGETS = ("cloud", "scheduler")
TOP_SERIES = 20  # series kept per label taken from scheduler or user data; the rest is "other"
_LABEL_OK = re.compile(r"[a-z0-9_.:*~#!%$@^+/-]{1,40}")


@functools.lru_cache(maxsize=4096)  # a few distinct values, asked for once per node per cycle
def label(value: object, default: str = "unknown") -> str:
    """A bounded label value: lower case, short, from a small alphabet, else ``other``."""
    if value is None or value == "":
        return default
    text = str(value).strip().lower()
    return text if _LABEL_OK.fullmatch(text) else "other"


def top(counts: Mapping[str, int], limit: int = TOP_SERIES) -> dict[str, int]:
    """The ``limit`` largest counts (ties by key), the rest summed as ``other``: one label value
    per series, so a queue of distinct jobs cannot grow the series without bound."""
    if len(counts) <= limit:
        return dict(counts)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:limit])
    rest = sum(n for _, n in ranked[limit:])
    out["other"] = out.get("other", 0) + rest
    return out


def unmatched(unmet: Iterable[Unmet]) -> dict[str, int]:
    """Unmatched jobs by signature (printable, at most 200 characters), :func:`top` of them."""
    out: dict[str, int] = {}
    for u in unmet:
        if u.reason == UNMATCHED:
            key = printable(u.what)[:200]
            out[key] = out.get(key, 0) + u.jobs
    return top(out)


def paid_state(core_state: str | None, draining: bool) -> str:
    """What a paid node's time counts as: one of :data:`PAID_STATES`; ``core_state`` is the
    node's worker_state as the core reads it (:meth:`CycleReport.core_state`), None: no node shown."""
    if draining:
        return "draining"
    if core_state in (None, "unpaired"):
        return "booting"
    return core_state if core_state in PAID_STATES else "down"


def frozen_reason(plan: Plan, paused: str | None) -> str | None:
    """The bounded category of why actions are frozen (:data:`FROZEN_REASONS`), or None: the
    core's typed :attr:`Plan.frozen_by` (``other`` for a plan frozen without one)."""
    if paused:
        return "paused"
    if not plan.frozen:
        return None
    return plan.frozen_by.value if plan.frozen_by is not None else "other"


@dataclass(frozen=True)
class CycleGauges:
    """Gauge values of the last cycle, swapped in whole so a scrape never sees half a cycle."""

    nodes: Mapping[tuple[str, ...], int] = field(default_factory=dict)
    raw_states: Mapping[str, int] = field(default_factory=dict)
    blocked: Mapping[tuple[str, str], int] = field(default_factory=dict)
    planned: Mapping[str, int] = field(default_factory=dict)
    paid_nodes: Mapping[tuple[str, str], int] = field(default_factory=dict)
    spend: Mapping[str, float] = field(default_factory=dict)
    in_flight: Mapping[str, int] = field(default_factory=dict)
    why_not: Mapping[tuple[str, str], int] = field(default_factory=dict)
    drains: int = 0
    drain_oldest_age: float = 0.0
    foreign_drains: int = 0
    demand_jobs: int = 0
    demand_cpus: int = 0
    demand_oldest_wait: float = 0.0
    held: int = 0
    frozen: str | None = None
    matrix_error: bool = False
    polled_at: Mapping[str, float] = field(default_factory=dict)
    last_cycle: float | None = None
    clock_skew: float | None = None
    scheduler_ahead: float | None = None
    unmatched: Mapping[str, int] = field(default_factory=dict)
    protected: Mapping[str, int] = field(default_factory=dict)
    spot_rates: Mapping[str, float] = field(default_factory=dict)
    budget_active: Mapping[str, int] = field(default_factory=dict)   # [Budget NAME] -> 1 inside its schedule
    budget_allowed: Mapping[str, int] = field(default_factory=dict)  # ... nodes given back at once
    budget_held: Mapping[str, int] = field(default_factory=dict)     # ... nodes it held back
    breakers: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (size, open|half-open) -> 1


def labelled(name: str, doc: str, labels: list[str],
              values: Mapping[Any, float]) -> GaugeMetricFamily:
    """A gauge family with one sample per key (a label value, or a tuple of them), sorted."""
    g = GaugeMetricFamily(name, doc, labels=labels)
    for key, v in sorted(values.items()):
        g.add_metric(list(key) if isinstance(key, tuple) else [key], v)
    return g


class CycleCollector(Collector):
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.state = CycleGauges()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        s = self.state
        yield labelled("nodemanager_nodes", "Cloud nodes by state tuple and size.",
                        ["worker_state", "window", "boot_grace", "idle_grace", "size"], s.nodes)
        yield labelled("nodemanager_workers", "Scheduler workers by raw scheduler state.",
                        ["state"], s.raw_states)
        yield labelled("nodemanager_nodes_blocked",
                        "Nodes whose matrix action is held back, by what blocks it.",
                        ["blocked_by", "matrix_action"], s.blocked)
        yield labelled("nodemanager_nodes_planned",
                        "Nodes with an action planned in the last cycle, by action.",
                        ["action"], s.planned)
        yield labelled("nodemanager_paid_nodes", "Paid cloud nodes by what they are doing and size.",
                        ["state", "size"], s.paid_nodes)
        yield labelled("nodemanager_estimated_spend_per_hour",
                        "Estimated spend per hour of the paid nodes (sizes' prices), by size.",
                        ["size"], s.spend)
        yield labelled("nodemanager_in_flight", "Actions under way, by action.",
                        ["action"], s.in_flight)
        yield labelled("nodemanager_why_not",
                        "Nodes not given back (subject=node) and queued job signatures not booted "
                        "for (subject=demand), by the one reason that binds.",
                        ["subject", "reason"], s.why_not)
        yield labelled("nodemanager_unmatched_jobs",
                        "Queued jobs no configured size can run (never booted for), by what they "
                        "need.", ["signature"], s.unmatched)
        yield labelled("nodemanager_size_protected",
                        "1 for each size not booted after its VMs failed to join (protected mode).",
                        ["size"], s.protected)
        yield labelled("nodemanager_spot_reclaims_per_day",
                        "Each spot size's reclaims per VM-day, as priced: the configured rate blended "
                        "with the reclaims seen lately.", ["size"], s.spot_rates)
        yield labelled("nodemanager_capacity_breaker",
                        "1 for each size whose capacity breaker is open (not booted after capacity "
                        "errors) or half-open (one probe boot at a time); closed sizes have no sample.",
                        ["size", "state"], s.breakers)
        yield labelled("nodemanager_budget_active",
                        "1 for each [Budget NAME] inside its schedule (or with none), else 0.",
                        ["budget"], s.budget_active)
        yield labelled("nodemanager_budget_allowed_nodes",
                        "Nodes each active [Budget NAME] lets be given back at once.",
                        ["budget"], s.budget_allowed)
        yield labelled("nodemanager_budget_held_nodes",
                        "Nodes each [Budget NAME] held back in the last cycle (the most restrictive "
                        "matching budget is named).", ["budget"], s.budget_held)
        yield GaugeMetricFamily("nodemanager_drains_in_progress",
                                "Drains of ours under way.", value=s.drains)
        yield GaugeMetricFamily("nodemanager_drain_oldest_age_seconds",
                                "Age of the oldest drain of ours under way (0 when none).",
                                value=s.drain_oldest_age)
        yield GaugeMetricFamily("nodemanager_foreign_drains",
                                "Workers drained by someone else (not nodemanager).",
                                value=s.foreign_drains)
        yield GaugeMetricFamily("nodemanager_demand_jobs", "Jobs waiting in the queue.",
                                value=s.demand_jobs)
        yield GaugeMetricFamily("nodemanager_demand_cpus", "Cores requested by waiting jobs.",
                                value=s.demand_cpus)
        yield GaugeMetricFamily("nodemanager_demand_oldest_wait_seconds",
                                "How long the oldest waiting job has waited (0 when none).",
                                value=s.demand_oldest_wait)
        yield GaugeMetricFamily("nodemanager_nodes_held", "Nodes an operator holds.",
                                value=s.held)
        g = GaugeMetricFamily("nodemanager_actions_frozen",
                              "1 while drains and destroys are frozen, with why.",
                              labels=["reason"])
        for reason in FROZEN_REASONS:
            g.add_metric([reason], 1 if s.frozen == reason else 0)
        yield g
        yield GaugeMetricFamily("nodemanager_matrix_error",
                                "1 while the matrix file fails to load (the last good one runs).",
                                value=1 if s.matrix_error else 0)
        now = self._clock()
        ts = GaugeMetricFamily("nodemanager_last_poll_timestamp_seconds",
                               "When each input (cloud, scheduler) was last polled successfully.",
                               labels=["input"])
        age = GaugeMetricFamily("nodemanager_poll_age_seconds",
                                "Seconds since each input was last polled successfully.",
                                labels=["input"])
        for name, at in sorted(s.polled_at.items()):
            ts.add_metric([name], at)
            age.add_metric([name], max(0.0, now - at))
        yield ts
        yield age
        skew = GaugeMetricFamily("nodemanager_cloud_clock_skew_seconds",
                                 "The cloud's clock minus ours, from its replies' Date header "
                                 "(no sample while unknown).")
        if s.clock_skew is not None:
            skew.add_metric([], s.clock_skew)
        yield skew
        yield GaugeMetricFamily("nodemanager_scheduler_clock_ahead_seconds",
                                "How far the scheduler's clock runs ahead of ours, as the furthest "
                                "idle-since in the future shows (0: none seen).",
                                value=s.scheduler_ahead or 0.0)
        if s.last_cycle is not None:
            yield GaugeMetricFamily("nodemanager_last_cycle_timestamp_seconds",
                                    "When the last controller cycle finished.",
                                    value=s.last_cycle)
