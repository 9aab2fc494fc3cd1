"""The status document: what ``GET /status.json`` serves and the console shows, built from the
daemon's published :class:`StatusView` (the last cycle, its counters, each node's history).

Pure functions of a view and the time; the HTTP server (:mod:`nodemanager.console.status`) serves them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from nodemanager.console.whynot import of_report as why_nots
from nodemanager.console.admin import AdminState
from nodemanager.core.pricing import spot_limits
from nodemanager.model import EMPTY_MAP, CycleReport, Snapshot
from nodemanager.configuration.settings import CoreSettings
from nodemanager.console.node_words import beside, next_change, shown_tuple
from nodemanager.console.paid_idle import paid_idle, refused_nodes
from nodemanager.console.summary import pool_summary
from nodemanager.tags import TAG_DEPLOYMENT
from nodemanager.text import duration, short_rule

__all__ = ["StatusView", "status_document", "when_text", "cycle_health"]


@dataclass(frozen=True)
class StatusView:
    """What the daemon publishes for the status server: the last cycle and its counters.

    ``last_cycle_at`` is the wall time the last cycle finished (None before the first);
    ``counters`` are the daemon's own totals (cycles, errors...), shown as they are.
    """

    report: CycleReport | None = None
    counters: Mapping[str, float] = field(default_factory=lambda: EMPTY_MAP)
    started_at: float = 0.0
    last_cycle_at: float | None = None
    version: str = ""
    ha: str | None = None           # [HA]: "leader (...)" or "standby; leader is host:pid since ..."
    ha_mismatch: tuple[str, ...] = ()  # [HA]: other heads deciding with another configuration or matrix
    core: CoreSettings | None = None  # prices and caps for the summary (None: none shown)
    history: Any = None             # nodemanager.console.history.NodeHistory: each node's last events
    # (what, seconds since it last happened on the monotonic clock, limit): the last cycle and each
    # input's last good poll; health fails on any past its limit (a wall-clock step moves no age)
    ages: tuple[tuple[str, float, float], ...] = ()
    spend: Any = None               # nodemanager.console.spend_ledger.SpendLedger: who spent what
    config_error: str | None = None  # the last SIGHUP's rejected config (the previous one runs)
    set_aside: tuple[str, ...] = ()  # state files that could not be read, kept under a new name
    trend: Any = None               # nodemanager.console.trend.PoolTrend: the last hours, per minute
    store: Any = None               # nodemanager.store.StoreHealth: is what the daemon remembers written


def when_text(at: float | None, what: str | None, now: float) -> str | None:
    """``"idle grace ends 14:05:10 UTC (in 3m 20s)"``; the date is added when not today."""
    if at is None:
        return None
    t = datetime.fromtimestamp(at, timezone.utc)
    same_day = t.date() == datetime.fromtimestamp(now, timezone.utc).date()
    stamp = t.strftime("%H:%M:%S UTC" if same_day else "%Y-%m-%d %H:%M:%S UTC")
    delta = at - now
    rel = f"in {duration(delta)}" if delta >= 0 else f"{duration(-delta)} ago"
    return f"{what or 'changes'} {stamp} ({rel})"


def cycle_health(view: StatusView, now: float, stale_after: float) -> tuple[bool, str]:
    """(healthy, why): healthy when the last cycle finished within ``stale_after`` seconds and,
    when the view gives ``ages``, each of them is within its limit."""
    if view.last_cycle_at is None:
        return False, f"no cycle has finished yet (up {duration(now - view.started_at)})"
    ages = view.ages or (("cycle finished", now - view.last_cycle_at, stale_after),)
    for what, age, limit in ages:
        if age > limit:
            return False, (f"last {what} {duration(age)} ago (limit {duration(limit)}): "
                           + ("the controller is stuck or stopped" if what.startswith("cycle")
                              else "its poller is stuck or failing"))
    rejected = f"; reload rejected, the previous configuration runs: {view.config_error}" if view.config_error else ""
    return True, "ok: " + ", ".join(f"last {what} {duration(age)} ago" for what, age, _ in ages) + rejected


def status_document(view: StatusView, admin: AdminState | None, now: float, *,
                    stale_after: float = 300.0, admin_enabled: bool = False) -> dict[str, Any]:
    """The ``/status.json`` document (also what the HTML page shows)."""
    healthy, health = cycle_health(view, now, stale_after)
    doc: dict[str, Any] = {
        "version": view.version, "now": now, "now_text": "generated " + datetime.fromtimestamp(now, timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC"),
        "started_at": view.started_at, "last_cycle_at": view.last_cycle_at,
        "healthy": healthy, "health": health, "counters": dict(view.counters), "ha": view.ha,
        "config_error": view.config_error,
        "state_set_aside": list(view.set_aside),
        "ha_mismatch": list(view.ha_mismatch),
        "admin": {"enabled": admin_enabled, **(admin.to_json() if admin else {})},
        "store": store_json(view.store, now),
    }
    report = view.report
    if report is None:
        doc.update(nodes=[], unpaired_workers=[], outcomes=[], notes=[], frozen=None,
                   paused=doc["admin"].get("paused"), why_not_demand=[], recent=[],
                   matrix={"sha256": None, "error": None}, polls={}, summary={}, paid_idle=[])
        return doc
    snap, plan = report.snapshot, report.plan
    admin_json = doc["admin"]
    held = set(snap.held) | set(admin_json.get("held", ()))
    forced = set(snap.forced_drains) | set(admin_json.get("forced_drains", ()))
    reasons = admin_json.get("reasons") or {}
    last_outcome = {o.node: o for o in report.outcomes}
    in_flight = {f.node: f for f in snap.in_flight}
    cloud = {c.id: c for c in snap.cloud_nodes}
    history = view.history
    why_not = why_nots(report)
    recent = history.recent(now) if history is not None else []
    nodes = []
    denied = refused_nodes(report.denied)
    for e in plan.nodes:
        o = last_outcome.get(e.node_id) or last_outcome.get(e.name)
        refused = denied.get(e.node_id)
        w = why_not.node(e)
        f = in_flight.get(e.node_id)
        c = cloud.get(e.node_id)
        at, what, words = next_change(e)
        nodes.append({
            "node_id": e.node_id, "name": e.name, "size": e.size, "worker": e.worker,
            "raw_state": e.raw_state, "tuple": dict(zip(
                ("worker_state", "window", "boot_grace", "idle_grace"), e.tuple.as_tuple())),
            "tuple_text": shown_tuple(e), "matrix_tuple_text": str(e.tuple), "beside": list(beside(e)),
            "rule": e.rule, "rule_short": short_rule(e.rule),
            "matrix_action": e.matrix_action.to_json(),
            "planned_action": e.action.value if e.action else None,
            "blocked_by": e.blocked_by, "budget": e.budget, "why": e.reason,
            "cause": {"reason": e.cause.reason, "by": e.cause.by} if e.cause else None,
            "facts": {"lost": e.lost, "our_drain_since": e.our_drain_since, "drained": e.drained,
                      "counted_up": e.up},
            "next_change": at, "next_change_what": what,
            "next_change_text": words or when_text(at, what, report.snapshot.now),
            "held": e.node_id in held or e.name in held,
            "operator_reason": reasons.get(e.node_id) or reasons.get(e.name),
            "forced_drain": e.node_id in forced or e.name in forced,
            "in_flight": ({"action": f.action, "since": f.since,
                           "for_seconds": round(snap.now - f.since, 1)} if f else None),
            "launched_at": c.launched_at if c else None,
            "last_outcome": refused or (f"{o.kind} {o.result}: {o.detail}" if o else None),
            "why_not": w.to_json() if w else None,
            "events": _events(history.events(e.node_id)) if history is not None else [],
        })
    paired = {e.worker for e in plan.nodes if e.worker}
    doc.update(
        cycle_at=snap.now, frozen=plan.frozen, frozen_by=plan.frozen_by, paused=snap.paused or admin_json.get("paused"),
        matrix={"sha256": report.matrix_hash or None, "error": report.matrix_error},
        polls={k: {"at": v, "age_seconds": round(now - v, 1)} for k, v in snap.polled_at.items()},
        cloud_clock_skew=snap.cloud_clock_skew, scheduler_clock_ahead=snap.scheduler_clock_ahead,
        other_controller=report.other_controller,
        no_permission=_no_permission(report.denied),
        paid_idle=[p.to_json() for p in paid_idle(report, view.core)] if view.core is not None else [],
        foreign_vms=[{"node_id": n.id, "name": n.name, "state": n.state,
                      "deployment": n.tags.get(TAG_DEPLOYMENT) or None} for n in report.foreign_nodes],
        protected_sizes=dict(snap.protected_sizes),
        spot_markets=_spot_markets(snap, view.core),
        capacity_breakers={**dict(snap.open_breakers),
                           **{s: "capacity breaker half-open: one probe boot decides" for s in snap.probe_sizes}},
        price_overrides=[{"size": s.name, "price": s.price, "list_price": s.list_price}
                         for s in (view.core.sizes if view.core else ()) if s.list_price is not None],
        budgets=[{"name": b.name, "active": b.active, "allowed": b.allowed, "held": b.held, "text": b.text}
                 for b in plan.budgets],
        summary=pool_summary(report, view.core, recent), notes=list(plan.notes),
        placement=[{"what": c.what, "jobs": c.jobs, "cloud": c.cloud, "size": c.size, "lost": list(c.lost),
                    "why": c.why} for c in plan.clouds],
        why_not_demand=[w.to_json() for w in why_not.demand],
        recent=[{**r, "events": _events(r["events"])} for r in recent],
        nodes=nodes,
        unpaired_workers=[{"name": w.name, "state": w.state, "draining": w.draining,
                           "drain_reason": w.drain_reason}
                          for w in snap.workers if w.name not in paired],
        outcomes=[{"kind": o.kind, "node": o.node, "result": o.result, "detail": o.detail,
                   "at": o.at, "size": o.size} for o in report.outcomes],
    )
    doc["trend"] = view.trend.to_json() if view.trend is not None else []
    if view.spend is not None and view.spend.enabled:
        doc["top_spenders_today"] = top_spenders_today(view.spend, now)
    return doc


def _no_permission(denied: Mapping[str, str]) -> str | None:
    """The header's words while the scheduler refuses actions for lack of rights (None: it does not)."""
    if not denied:
        return None
    actions = sorted({key.split(":", 1)[0] for key in denied})
    first = next(iter(denied.values()))
    return (f"{' and '.join(actions)} refused: no permission on {len(denied)} node(s) ({first}): "
            "give the daemon's user the right (nodemanager check names it)")


def store_json(health: Any, now: float) -> dict[str, Any] | None:
    """The store's state for the page: ``problem`` in words when it cannot write (or was set aside)."""
    if health is None:
        return None
    problem = ""
    if not health.ok:
        since = f" for {duration(now - health.failing_since)}" if health.failing_since is not None else ""
        problem = (f"cannot write{since} ({health.error}): {health.pending} record(s) kept in memory until it "
                   f"can, at most {health.bound}")
    if health.dropped:
        problem += f"{'; ' if problem else ''}{health.dropped} event(s) dropped (the buffer was full)"
    if health.note:
        problem += f"{'; ' if problem else ''}{health.note}"
    return {"name": health.name, "ok": health.ok, "pending": health.pending, "dropped": health.dropped,
            "written": health.written, "problem": problem}


def top_spenders_today(ledger: Any, now: float, n: int = 5) -> list[dict[str, Any]]:
    """The ``n`` users who spent most since midnight UTC (the rest as ``other``), dearest first."""
    from nodemanager.core.attribution import top
    rows = top(ledger.spend(now - now % 86400.0, now, "user"), n)
    return [{"user": r.name, "node_hours": round(r.node_hours, 3), "money": round(r.money, 3)} for r in rows]


def _events(events: Iterable[tuple[float, str, str]]) -> list[dict[str, Any]]:
    return [{"at": at, "kind": kind, "text": text} for at, kind, text in events]


def _spot_markets(snap: Snapshot, core: CoreSettings | None) -> dict[str, dict[str, Any]]:
    """Each spot size's reclaim rate as priced, in words, and the longest walltime it takes."""
    if core is None:
        return {}
    limits = spot_limits(core.sizes, snap.reclaim_rates, core.max_rerun_share, core.reclaim_penalty)
    return {size: {"reclaims_per_day": round(rate * 24, 6), "why": words,
                   "takes_walltime_up_to": None if math.isinf(limits[size]) else round(limits[size])}
            for size, (rate, words) in snap.reclaim_rates.items() if size in limits}
