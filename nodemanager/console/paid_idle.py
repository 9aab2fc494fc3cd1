"""Paid idle nodes: VMs paid for and doing nothing well past their idle grace, whatever keeps
them (an operator's hold, someone else's drain, a budget, protected mode, a refused or failing
call, the matrix itself). The status page lists each with why it is kept and what its idleness
cost so far; ``nodemanager_paid_idle_nodes`` counts them and ``NodeManagerPaidIdle`` fires.

Nodes kept on purpose by the configuration (``min_nodes``, warm capacity) and nodes queued jobs
wait for are not listed: they are idle by the operator's choice. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from nodemanager.configuration.settings import CoreSettings
from nodemanager.model import Blocked, CycleReport, NodeExplanation
from nodemanager.text import duration

__all__ = ["PaidIdle", "paid_idle", "refused_nodes", "KEPT_ON_PURPOSE"]

# blocks that keep an idle node by the operator's own setting, or for jobs that need it
KEPT_ON_PURPOSE = frozenset({Blocked.MIN_NODES.value, Blocked.WARM.value, Blocked.DEMAND.value})


@dataclass(frozen=True, slots=True)
class PaidIdle:
    """One node paid for and idle since ``since`` (``kept``: what keeps it, in words; ``label``:
    the metric's ``kept_because``: a ``blocked_by`` word, ``action_not_done`` or ``matrix``)."""

    node_id: str
    name: str
    size: str
    since: float
    idle_for: float
    cost: float
    kept: str
    label: str

    def to_json(self) -> dict[str, object]:
        return {"node_id": self.node_id, "name": self.name, "size": self.size, "since": self.since,
                "idle_for_seconds": round(self.idle_for), "cost_so_far": round(self.cost, 4),
                "kept_because": self.kept, "label": self.label,
                "text": f"{self.name}: paid idle for {duration(self.idle_for)} ({self.cost:.2f} so far), "
                        f"kept because {self.kept}"}


def paid_idle(report: CycleReport, core: CoreSettings) -> tuple[PaidIdle, ...]:
    """The report's nodes idle (or drained by us and not yet destroyed) for longer than
    ``idle_grace + paid_idle_after`` (a drained node: ``paid_idle_after``), dearest first."""
    now = report.snapshot.now
    prices = {s.name: s.price for s in core.sizes}
    refused = refused_nodes(report.denied)
    out = []
    for e in report.plan.nodes:
        since, bound = _idle_since(e, core)
        if since is None or e.gone or e.blocked_by in KEPT_ON_PURPOSE or now - since <= bound:
            continue
        idle_for = now - since
        kept, label = _kept(e, refused.get(e.node_id))
        out.append(PaidIdle(node_id=e.node_id, name=e.name, size=e.size, since=since, idle_for=idle_for,
                            cost=prices.get(e.size, 0.0) * idle_for / 3600.0, kept=kept, label=label))
    return tuple(sorted(out, key=lambda p: (-p.cost, p.name)))


def _idle_since(e: NodeExplanation, core: CoreSettings) -> tuple[float | None, float]:
    """Since when the node does nothing, and how long that may last before it is flagged."""
    if e.idle_since is not None:
        return e.idle_since, core.idle_grace + core.paid_idle_after
    if e.drained and e.our_drain_since is not None:
        return e.our_drain_since, core.paid_idle_after
    return None, 0.0


def _kept(e: NodeExplanation, refused: str | None) -> tuple[str, str]:
    if refused is not None:
        return refused, "no_permission"
    if e.blocked_by:
        return f"{e.blocked_by}: {e.reason}", str(e.blocked_by)
    if e.action is not None:
        return f"{e.action.value} planned but not done yet: {e.reason}", "action_not_done"
    return f"its matrix rule ({e.rule}) gives no action: {e.reason}", "matrix"


def refused_nodes(denied: Mapping[str, str]) -> dict[str, str]:
    """Node id -> what its line says while the scheduler refuses us an action on it for lack of
    rights (``denied``: :attr:`~nodemanager.model.CycleReport.denied`)."""
    out: dict[str, str] = {}
    for key, why in denied.items():
        action, _, node = key.partition(":")
        out[node] = f"{action} refused: no permission ({why})"
    return out
