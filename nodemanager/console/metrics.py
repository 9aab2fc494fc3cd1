"""Prometheus metrics of one daemon, in a private registry (never the process-global one).

The daemon feeds a :class:`Metrics` with:

* :meth:`Metrics.observe` once per cycle with the :class:`~nodemanager.model.CycleReport`: node
  counts by tuple and size and by raw scheduler state, actions decided and carried out, drains,
  paid node-seconds by what the node was doing, spend, demand, boots, frozen state, matrix hash;
* :meth:`Metrics.observe_call` after every cloud or scheduler call (latency, errors by kind);
* :meth:`Metrics.observe_matrix_reload` after every matrix reload attempt;
* :meth:`Metrics.observe_config_reload` after every reload of the config file;
* :meth:`Metrics.watch_state_dir` once, for the state files set aside as unreadable;
* :meth:`Metrics.observe_record_problems` after every scheduler poll with its unusable values.

Names follow Prometheus conventions (``nodemanager_`` prefix, base units, ``_total`` counters).
Labels are bounded: tuple values, sizes from the config, action kinds, results, error kinds and
call names; never node names. Values from scheduler or user data (unmatched job signatures, raw
worker states) keep the :data:`TOP_SERIES` largest and sum the rest as ``other``; the status page
lists them all. ``docs/metrics.md`` lists every metric.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from nodemanager.core import is_our_drain, late_give_back
from nodemanager.model import CycleReport, NodeExplanation, Size, Snapshot, is_gone
from nodemanager.scheduler import DrainingStats, KINDS, REASONS, RecordProblem
from nodemanager.console.whynot import of_report as why_nots
from nodemanager.console.cycle_money import cycle_money
from nodemanager.console.metric_families import (CALL_TARGETS, FROZEN_REASONS, PAID_STATES,
                                                 TOP_SERIES, frozen_reason, paid_state)
from nodemanager.console.metric_families import top as _top
from nodemanager.console.metric_families import CycleCollector as _CycleCollector
from nodemanager.console.metric_families import CycleGauges as _CycleGauges
from nodemanager.console.metric_families import label as _label
from nodemanager.model import DENIABLE_ACTIONS
from nodemanager.console.paid_idle import PaidIdle
from nodemanager.console.metric_families import unmatched as _unmatched
from nodemanager import installed_version

__all__ = ["Metrics", "PAID_STATES", "FROZEN_REASONS", "CALL_TARGETS", "TOP_SERIES", "paid_state",
           "frozen_reason"]

_CALL_OK = re.compile(r"[a-z][a-z0-9_]{0,39}")
_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    """Every nodemanager metric, in :attr:`registry` (a private ``CollectorRegistry``).

    ``sizes`` give prices (per hour) for spend; ``max_interval`` caps the seconds one cycle may
    add to the paid-time counters (a daemon that was stopped must not book the gap).
    ``clock`` is only used for scrape-time ages and the last-cycle time.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, sizes: Sequence[Size] = (),
                 clock: Callable[[], float] = time.time, max_interval: float = 300.0,
                 version: str | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._clock = clock
        self._sizes = {s.name: s for s in sizes}
        self._max_interval = max_interval
        self._lock = threading.Lock()
        self._last_now: float | None = None
        self._badput_total: float | None = None  # the adapter's total when last seen
        r = self.registry
        self._cycles = Counter("nodemanager_cycles", "Controller cycles completed.", registry=r)
        self._cycle_cpu = Counter("nodemanager_cycle_cpu_seconds",
                                  "CPU seconds spent deciding (pure core).", registry=r)
        self._decided = Counter("nodemanager_actions_decided",
                                "Actions the plan decided, by action (boot counts nodes).",
                                ["action"], registry=r)
        self._done = Counter("nodemanager_actions",
                             "Actions carried out, by action and result (ok, refused, failed, "
                             "skipped).", ["action", "result"], registry=r)
        self._paid = Counter("nodemanager_paid_node_seconds",
                             "Paid node-seconds by what the node was doing and size.",
                             ["state", "size"], registry=r)
        self._cost = Counter("nodemanager_estimated_cost",
                             "Estimated money spent (sizes' prices), by what the node was doing.",
                             ["state"], registry=r)
        self._late = Counter("nodemanager_late_give_backs",
                             "Destroys that came less than shutdown_window into a new billing "
                             "period (a period paid for almost nothing), by size.", ["size"],
                             registry=r)
        self._charges = Counter("nodemanager_estimated_charges",
                                "What the cloud charges for the nodes, by its billing rules (per "
                                "started billing period, or per second with a minimum charge), by "
                                "size.", ["size"], registry=r)
        self._unclaimed = Counter("nodemanager_drain_unclaimed_core_seconds",
                                  "Idle core-seconds on workers while we drain them.", registry=r)
        self._badput = Counter("nodemanager_drain_badput_seconds",
                               "Core-seconds of job runtime lost to drains (HTCondor: the startds' "
                               "TotalMachineDrainingBadput; SLURM: jobs our escalations requeued "
                               "or cancelled).", registry=r)
        self._boots = Counter("nodemanager_boots", "Nodes booted, by size.", ["size"], registry=r)
        self._boot_failures = Counter("nodemanager_boot_failures",
                                      "Boot requests that failed or were refused, by size.",
                                      ["size"], registry=r)
        self._call_seconds = Histogram("nodemanager_call_duration_seconds",
                                       "Latency of cloud and scheduler calls.",
                                       ["target", "call"], buckets=_CALL_BUCKETS, registry=r)
        self._call_errors = Counter("nodemanager_call_errors",
                                    "Failed cloud and scheduler calls, by error kind.",
                                    ["target", "call", "kind"], registry=r)
        self._skipped = Counter("nodemanager_scheduler_records_skipped",
                                "Unusable values in scheduler records, per poll, by record kind "
                                "(job: left out of demand; node: value not used) and reason.",
                                ["kind", "reason"], registry=r)
        for kind in KINDS:
            for reason in REASONS:
                self._skipped.labels(kind, reason)
        self._reloads = Counter("nodemanager_matrix_reloads",
                                "Matrix reload attempts, by result (ok, error).", ["result"],
                                registry=r)
        self._config_rejected = Gauge("nodemanager_config_reload_rejected",
                                      "1 while the last reload of the config file was rejected (the "
                                      "previous configuration runs), until a good reload or restart.",
                                      registry=r)
        self._matrix = Info("nodemanager_matrix", "The matrix in force (sha256 of its text).",
                            registry=r)
        self._matrix_mtime = Gauge("nodemanager_matrix_file_mtime_seconds",
                                   "Modification time of the matrix file in force (epoch seconds).",
                                   registry=r)
        self._foreign = Gauge("nodemanager_foreign_vms",
                              "VMs with this cluster name that carry another deployment's id "
                              "(never touched nor counted).", registry=r)
        self._other_controller = Gauge("nodemanager_other_controller",
                                       "1 when another controller of this deployment was seen acting "
                                       "and this one stopped every boot, drain and destroy.",
                                       registry=r)
        self._denied = Gauge("nodemanager_permission_denied",
                             "1 while the scheduler refuses this kind of action (drain, cancel_drain, "
                             "escalate, destroy) to the daemon's user for lack of rights or credentials.",
                             ["action"], registry=r)
        for action in DENIABLE_ACTIONS:
            self._denied.labels(action)
        self._paid_idle = Gauge("nodemanager_paid_idle_nodes",
                                "Nodes paid for and idle longer than idle_grace + paid_idle_after, by what "
                                "keeps them (a blocked_by word, no_permission, action_not_done, matrix).",
                                ["kept_because"], registry=r)
        self._paid_idle.labels("matrix")
        self._paid_idle_cost = Gauge("nodemanager_paid_idle_cost",
                                     "What the paid idle nodes' idleness cost so far (the sizes' prices).",
                                     registry=r)
        self._build = Info("nodemanager_build", "The nodemanager version.", registry=r)
        self._build.info({"version": version or installed_version("unknown")})
        for result in ("ok", "error"):
            self._reloads.labels(result)
        for size in self._sizes:
            self._charges.labels(_label(size))  # 0 from the start: a missing series is no answer
            self._late.labels(_label(size))
        self._price = Gauge("nodemanager_size_price_per_hour",
                            "Each size's price per node-hour as decisions and money figures use it "
                            "(price_override and licence_price applied), and as configured (list).",
                            ["size", "kind"], registry=r)
        self._set_prices()
        self._gauges = _CycleCollector(clock)
        r.register(self._gauges)

    def _set_prices(self) -> None:
        for s in self._sizes.values():
            self._price.labels(_label(s.name), "effective").set(s.price)
            self._price.labels(_label(s.name), "list").set(s.price if s.list_price is None else s.list_price)

    def set_sizes(self, sizes: Sequence[Size]) -> None:
        """New prices after a config reload."""
        with self._lock:
            self._sizes = {s.name: s for s in sizes}
            self._set_prices()

    def observe_identity(self, report: CycleReport) -> None:
        """Whose VMs the cycle saw: another deployment's, and whether another controller acts."""
        self._foreign.set(sum(1 for n in report.foreign_nodes if not is_gone(n)))
        self._other_controller.set(1 if report.other_controller else 0)
        refused = {key.split(":", 1)[0] for key in report.denied}
        for action in DENIABLE_ACTIONS:
            self._denied.labels(action).set(1 if action in refused else 0)

    def observe_paid_idle(self, found: Sequence[PaidIdle]) -> None:
        """The cycle's paid idle nodes (:func:`~nodemanager.console.paid_idle.paid_idle`)."""
        counts: dict[str, int] = {}
        for p in found:
            counts[p.label] = counts.get(p.label, 0) + 1
        self._paid_idle.clear()
        self._paid_idle.labels("matrix")
        for label, n in counts.items():
            self._paid_idle.labels(_label(label)).set(n)
        self._paid_idle_cost.set(sum(p.cost for p in found))

    # -- explicit calls ----------------------------------------------------------------------
    def observe_call(self, target: str, call: str, seconds: float,
                     error_kind: object | None = None) -> None:
        """One cloud or scheduler call: ``target`` is ``cloud`` or ``scheduler``, ``call`` a short
        name (``list_nodes``, ``create_node``, ``poll``, ``drain``...), ``error_kind`` the failure's
        kind (an ``ErrorKind``, ``transient``...) or None when it succeeded."""
        if target not in CALL_TARGETS:
            raise ValueError(f"call target must be one of {CALL_TARGETS}, not {target!r}")
        if not _CALL_OK.fullmatch(call):
            raise ValueError(f"call name must be a short snake_case word, not {call!r}")
        self._call_seconds.labels(target, call).observe(max(0.0, seconds))
        if error_kind is not None:
            self._call_errors.labels(target, call, _label(error_kind)).inc()

    def observe_matrix_reload(self, ok: bool, sha256: str | None = None, mtime: float | None = None) -> None:
        """One matrix reload attempt; ``sha256`` and file ``mtime`` of the matrix now in force when it
        succeeded."""
        self._reloads.labels("ok" if ok else "error").inc()
        if ok and sha256:
            self._matrix.info({"sha256": sha256})
        if ok and mtime is not None:
            self._matrix_mtime.set(mtime)

    def watch_state_dir(self, state_dir: str) -> None:
        """Expose how many state files of ``state_dir`` were set aside as unreadable (read at
        each scrape: the count falls when the operator removes them)."""
        self.registry.register(_SetAsideCollector(state_dir))

    def observe_config_reload(self, ok: bool) -> None:
        """One reload of the config file (SIGHUP): ``ok`` False while it was rejected."""
        self._config_rejected.set(0 if ok else 1)

    # -- one cycle ---------------------------------------------------------------------------
    def observe(self, report: CycleReport) -> None:
        """Update every metric from one cycle's report (call once per cycle, in order)."""
        snap, plan = report.snapshot, report.plan
        with self._lock:
            last_now = self._last_now
            interval = 0.0 if last_now is None else min(max(0.0, snap.now - last_now), self._max_interval)
            self._last_now = snap.now
            sizes = self._sizes
        # charges are what the cloud bills, however long the gap; nothing before the first cycle
        gap = 0.0 if last_now is None else max(0.0, snap.now - last_now)
        drains = _our_drains(snap, plan.nodes)
        draining_workers = {w.name for w in snap.workers if w.draining}
        draining_nodes = set(drains) | {e.node_id for e in plan.nodes
                                        if e.worker in draining_workers}
        draining_nodes |= {f.node for f in snap.in_flight if f.action == "destroy"}

        # per state tuple object first (the plan shares one per distinct tuple: no hash of its
        # fields per node), then by value
        by_object: dict[tuple[int, str], int] = {}
        of_id: dict[int, Any] = {}
        for e in plan.nodes:
            seen = (id(e.tuple), e.size)
            count = by_object.get(seen)
            if count is None:
                by_object[seen] = 1
                of_id[seen[0]] = e.tuple
            else:
                by_object[seen] = count + 1
        nodes: dict[tuple[str, ...], int] = {}
        for (st_id, size), count in by_object.items():
            labels = (*of_id[st_id].as_tuple(), _label(size))
            nodes[labels] = nodes.get(labels, 0) + count
        raw: dict[str, int] = {}
        for w in snap.workers:
            key = _label(w.state)
            raw[key] = raw.get(key, 0) + 1
        blocked: dict[tuple[str, str], int] = {}
        for e in plan.nodes:
            if e.blocked_by:
                why = (_label(e.blocked_by), e.matrix_action.value)
                blocked[why] = blocked.get(why, 0) + 1
        planned: dict[str, int] = {}
        for item in plan.items:
            planned[item.kind.value] = planned.get(item.kind.value, 0) + 1

        money = cycle_money(report, sizes, draining_nodes, interval, gap)
        paid_nodes, spend, cost, charges = money.paid_nodes, money.spend, money.cost, money.charges
        for size, amount in charges.items():
            self._charges.labels(size).inc(amount)
        if interval:
            for (state, size), count in paid_nodes.items():
                self._paid.labels(state, size).inc(count * interval)
        for state, amount in cost.items():
            self._cost.labels(state).inc(amount)

        if interval:
            idle_cores = sum(max(0, w.cpus - w.cpus_busy) for w in snap.workers if is_our_drain(w))
            self._unclaimed.inc(idle_cores * interval)

        in_flight: dict[str, int] = {}
        for f in snap.in_flight:
            key = _label(f.action)
            in_flight[key] = in_flight.get(key, 0) + 1

        jobs = sum(d.count for d in snap.demand)
        cpus = sum(d.cpus * d.count for d in snap.demand)
        submits = [d.oldest_submit for d in snap.demand if d.oldest_submit is not None]

        self._cycles.inc()
        self._cycle_cpu.inc(max(0.0, report.cpu_seconds))
        for item in plan.items:
            self._decided.labels(item.kind.value).inc()
        for boot in plan.boots:
            self._decided.labels("boot").inc(boot.count)
        for o in report.outcomes:
            kind, result = _label(o.kind), _label(o.result)
            self._done.labels(kind, result).inc()
            size_of = sizes.get(o.size or "")
            if (kind == "destroy" and result == "ok" and size_of is not None and o.launched_at is not None
                    and late_give_back(size_of, o.launched_at, o.at)):
                self._late.labels(_label(o.size)).inc()
            if kind == "boot":
                if result == "ok":
                    self._boots.labels(_label(o.size)).inc()
                elif result in ("failed", "refused"):
                    self._boot_failures.labels(_label(o.size)).inc()
        if report.matrix_hash:
            self._matrix.info({"sha256": report.matrix_hash})

        self._gauges.state = _CycleGauges(
            nodes=nodes, raw_states=_top(raw), blocked=blocked, planned=planned,
            paid_nodes=paid_nodes, spend=spend, in_flight=in_flight,
            why_not=why_nots(report).counts(), drains=len(drains),
            unmatched=_unmatched(plan.unmet),
            protected={_label(size): 1 for size in snap.protected_sizes},
            spot_rates={_label(size): rate * 24 for size, (rate, _) in snap.reclaim_rates.items()},
            drain_oldest_age=max((snap.now - t for t in drains.values()),
                                                     default=0.0),
            foreign_drains=sum(1 for w in snap.workers if w.draining and not is_our_drain(w)),
            demand_jobs=jobs, demand_cpus=cpus,
            demand_oldest_wait=max(0.0, snap.now - min(submits)) if submits else 0.0,
            held=len(snap.held), frozen=frozen_reason(plan, snap.paused),
            matrix_error=report.matrix_error is not None,
            # several clouds: each one's own listing too (input="cloud:NAME")
            polled_at={**snap.polled_at, **{f"cloud:{name}": at for name, at in snap.cloud_polled.items()}},
            last_cycle=self._clock(),
            clock_skew=snap.cloud_clock_skew, scheduler_ahead=snap.scheduler_clock_ahead,
            budget_active={_label(b.name): int(b.active) for b in plan.budgets},
            budget_allowed={_label(b.name): b.allowed for b in plan.budgets if b.active},
            budget_held={_label(b.name): b.held for b in plan.budgets},
            breakers={**{(_label(s), "open"): 1 for s in snap.open_breakers},
                      **{(_label(s), "half-open"): 1 for s in snap.probe_sizes}},
        )

    def observe_record_problems(self, problems: Iterable[RecordProblem]) -> None:
        """One scheduler poll's unusable values (kind and reason are bounded; names never labels)."""
        for p in problems:
            if p.kind in KINDS and p.reason in REASONS:
                self._skipped.labels(p.kind, p.reason).inc()

    def observe_draining(self, stats: DrainingStats) -> None:
        """The scheduler adapter's draining totals (call after each poll): the badput counter grows
        by what the total grew since the last call; the first call only sets the baseline (history
        before we looked), and a total that went down (a new adapter) sets it again."""
        with self._lock:
            last, self._badput_total = self._badput_total, stats.badput
        if last is not None and stats.badput > last:
            self._badput.inc(stats.badput - last)


def _our_drains(snap: Snapshot, nodes: Iterable[NodeExplanation]) -> dict[str, float]:
    """Drains of ours under way: cloud node id -> when the drain started, as the core found them
    (:attr:`NodeExplanation.our_drain_since`), plus unlisted workers drained by us
    (``worker:<name>``)."""
    drains: dict[str, float] = {}
    paired = set()
    for e in nodes:
        if e.our_drain_since is not None:
            drains[e.node_id] = e.our_drain_since
        if e.worker:
            paired.add(e.worker)
    for w in snap.workers:
        if w.name not in paired and is_our_drain(w):
            drains[f"worker:{w.name}"] = w.state_since or snap.now
    return drains




class _SetAsideCollector:
    """``nodemanager_state_files_set_aside``: a listing of the state dir at each scrape."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from nodemanager.store.state_files import set_aside_files
        yield GaugeMetricFamily("nodemanager_state_files_set_aside",
                                "State files that could not be read and were set aside "
                                "(<name>.unreadable-<time>), until the operator removes them.",
                                value=len(set_aside_files(self.state_dir)))
