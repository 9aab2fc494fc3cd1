"""The pool summary of ``/status.json`` (and the console's summary panel): nodes by worker state
and by action, spend, the queue by job signature, and each cap or budget with what is used and
whether it binds now. A pure function of one cycle's report and the settings.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from nodemanager.tags import TAG_REQUEST
from nodemanager.core import charged_between
from nodemanager.core.pricing import unsized_price
from nodemanager.model import CloudNode, CycleReport, Snapshot, is_gone
from nodemanager.configuration.settings import CoreSettings
from nodemanager.console.whynot import of_report as why_nots
from policy_matrix.vocabulary import BOOT_WAIT

__all__ = ["pool_summary", "local_midnight", "spend_per_hour", "booting", "paid_listed", "unlisted_boot_sizes",
           "unlisted_boots"]


def _count(values: Iterable[str | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        if v is not None:
            out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def local_midnight(now: float) -> float:
    """The epoch of the last midnight in this machine's local zone (``today`` starts there)."""
    t = time.localtime(now)
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))


def pool_summary(report: CycleReport, core: CoreSettings | None,
                 gone: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The summary of ``report``; ``core`` gives prices and caps (None: no spend, no caps);
    ``gone`` the recently destroyed nodes (``size``, ``launched_at``, ``gone_at``) for today's
    spend."""
    plan, snap = report.plan, report.snapshot
    sizes = {s.name: s for s in core.sizes} if core else {}
    why = why_nots(report)
    spend_now = spend_per_hour(report, core)
    # a VM of a size no longer configured counts at its booted price until it is gone
    unsized = [(n, *unsized_price(n, snap.known_prices)) for n in paid_listed(snap) if n.size not in sizes] if core else []
    midnight = local_midnight(snap.now)
    # a VM we destroyed is paid until our destroy, though the listing shows it until the next poll
    ended = {f.node: f.since for f in snap.in_flight if f.action == "destroy" and f.node in snap.destroyed}
    seconds = [(sizes[n.size], n.launched_at, ended.get(n.id, snap.now)) for n in snap.cloud_nodes
               if n.size in sizes]
    seconds += [(sizes[g["size"]], g["launched_at"], g["gone_at"]) for g in gone
                if g.get("size") in sizes and g.get("launched_at") is not None
                and g["gone_at"] > midnight]
    today = sum(s.price * charged_between(s, launched, midnight, end) / 3600.0
                for s, launched, end in seconds if end > launched)
    queue: dict[tuple[int, int, str], int] = {}
    for d in snap.demand:
        key = (d.cpus, d.ram_mb, d.size or "")
        queue[key] = queue.get(key, 0) + d.count
    return {
        "nodes": len(plan.nodes),
        "by_worker_state": _count(e.tuple.worker_state for e in plan.nodes),
        "drained_by_us": sum(1 for e in plan.nodes if e.drained),
        "booting": booting(report), "created_unlisted": len(unlisted_boots(report)),
        "by_matrix_action": _count(str(e.matrix_action) for e in plan.nodes),
        "planned": _count(i.kind.value for i in plan.items),
        "blocked": _count(e.blocked_by for e in plan.nodes),
        "boots": [{"size": b.size, "count": b.count, "reason": b.reason} for b in plan.boots],
        "demand": {"jobs": sum(d.count for d in snap.demand),
                   "cpus": sum(d.count * d.cpus for d in snap.demand)},
        "queue": [{"cpus": c, "ram_mb": r, "size": s or None, "jobs": n}
                  for (c, r, s), n in sorted(queue.items(), key=lambda kv: (-kv[1], kv[0]))],
        "spend": {"per_hour": round(spend_now, 4), "today": round(today, 4),
                  "today_since": midnight,
                  "unsized": [{"node": n.name, "id": n.id, "size": n.size, "per_hour": p, "priced_by": words}
                              for n, p, words in unsized]},
        "caps": _caps(report, core, spend_now, why.counts()) if core else [],
    }


def spend_per_hour(report: CycleReport, core: CoreSettings | None) -> float:
    """What the pool costs per hour now (0 without prices): the listed VMs still paid for at their
    sizes' prices, a VM of a size no longer configured at its booted price, and the VMs created
    but not listed yet."""
    if core is None:
        return 0.0
    snap = report.snapshot
    sizes = {s.name: s for s in core.sizes}
    paid = paid_listed(snap)
    return (sum(sizes[n.size].price for n in paid if n.size in sizes)
            + sum(unsized_price(n, snap.known_prices)[0] for n in paid if n.size not in sizes)
            + sum(sizes[size].price for size in unlisted_boot_sizes(report).values() if size in sizes))


def paid_listed(snap: Snapshot) -> list[CloudNode]:
    """The listed VMs still paid for: neither reported gone by the cloud nor destroyed by us
    since the listing (our destroy counts at once; the next listing confirms it)."""
    return [n for n in snap.cloud_nodes if not is_gone(n) and n.id not in snap.destroyed]


def unlisted_boot_sizes(report: CycleReport) -> dict[str, str]:
    """The VMs created but not listed yet, each with its size: boots under way from earlier
    cycles, and this cycle's creates (paid from the create, not from the next cloud listing)."""
    snap = report.snapshot
    listed = {n.tags.get(TAG_REQUEST) for n in snap.cloud_nodes if n.tags} | {n.id for n in snap.cloud_nodes}
    out = {f.node: f.size or "" for f in snap.in_flight if f.action == "boot" and f.node not in listed}
    out.update({o.node: o.size or "" for o in report.outcomes
                if o.kind == "boot" and o.result == "ok" and o.node not in listed})
    return out


def unlisted_boots(report: CycleReport) -> set[str]:
    """The VMs created but not listed yet (:func:`unlisted_boot_sizes`)."""
    return set(unlisted_boot_sizes(report))


def booting(report: CycleReport) -> int:
    """VMs booting: the listed nodes that wait for their worker, and those created but not listed."""
    waiting = sum(1 for e in report.plan.nodes if e.worker is None and e.tuple.boot_grace == BOOT_WAIT)
    return waiting + len(unlisted_boots(report))


def _caps(report: CycleReport, core: CoreSettings, spend_now: float,
          counts: Mapping[tuple[str, str], int]) -> list[dict[str, Any]]:
    """Each cap and budget: ``used`` of ``limit`` (None: no limit) and ``binds`` (it stops an
    action or a boot this cycle)."""
    snap, plan = report.snapshot, report.plan
    unlisted = len(unlisted_boots(report))
    drains = sum(1 for f in snap.in_flight if f.action == "drain")
    # a budget binds on any node it holds back, drained ones waiting for their destroy too
    budget = any(e.blocked_by == "budget" for e in plan.nodes)
    caps = [
        ("max_nodes", len(snap.cloud_nodes) + unlisted, core.max_nodes,
         counts[("demand", "max_nodes")] > 0),
        ("cloud quota", len(snap.cloud_nodes) + unlisted, snap.quota,
         counts[("demand", "quota")] > 0),
        ("max_total_price", round(spend_now, 4), core.max_total_price or None,
         counts[("demand", "max_total_price")] > 0),
        ("max_concurrent_drains", drains, core.max_concurrent_drains,
         budget and drains >= core.max_concurrent_drains),
        ("max_boots_per_hour", len(snap.recent_boots), core.max_boots_per_hour or None,
         counts[("demand", "max_boots_per_hour")] > 0),
        ("max_destroys_per_hour", len(snap.recent_destroys), core.max_destroys_per_hour or None,
         budget and bool(core.max_destroys_per_hour)
         and len(snap.recent_destroys) >= core.max_destroys_per_hour),
        ("min_nodes", len(plan.nodes), core.min_nodes or None,
         counts[("node", "min_nodes")] > 0),
    ]
    return [{"name": name, "used": used, "limit": limit, "binds": bool(binds)}
            for name, used, limit, binds in caps if limit is not None or name == "max_nodes"]
