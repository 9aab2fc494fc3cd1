"""Why not? The one binding reason for each node not being given back and each queued demand
not booted for, as a typed value that the status page, ``nodemanager why`` and the
``nodemanager_why_not`` metric all read (:func:`of_report`: once per cycle's report).

``reason`` is always one of :data:`NODE_REASONS` or :data:`DEMAND_REASONS` (a bounded metric
label, never free text); ``text`` is the sentence for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from nodemanager.text import short_rule

if TYPE_CHECKING:
    from nodemanager.model import CycleReport, NodeExplanation, Plan, Snapshot

__all__ = ["WhyNot", "WhyNots", "why_not", "of_report", "NODE_REASONS", "DEMAND_REASONS"]

# what the core's blocked_by can say (nodemanager.core.plan), plus "matrix": the rule keeps it
NODE_REASONS = ("matrix", "held", "paused", "stale", "frozen", "min_nodes", "demand", "budget",
                "in_flight", "no_worker", "unconfirmed", "foreign_drain", "ambiguous", "id_conflict", "warm",
                "other")
DEMAND_REASONS = ("max_nodes", "quota", "max_total_price", "max_boots_per_hour", "no_size", "backoff", "paused",
                  "stale", "other", "unmatched")
_GIVING_BACK = frozenset({"drain", "destroy", "escalate"})


@dataclass(frozen=True, slots=True)
class WhyNot:
    """``subject`` is ``node`` (``key``: the cloud node id) or ``demand`` (``key``: what is
    queued, e.g. ``"2 job(s) of 16 cpus, 0 MB"``); ``reason`` a bounded enum value; ``text`` one
    sentence naming the binding reason."""

    subject: str
    key: str
    reason: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"subject": self.subject, "key": self.key, "reason": self.reason, "text": self.text}


@dataclass(frozen=True, slots=True)
class WhyNots:
    """Every why-not of one cycle: ``reasons`` maps each node id not given back to its reason
    (the sentence is made by :meth:`node` when asked: 50,000 kept nodes cost no string each);
    ``demand`` in the plan's order."""

    reasons: Mapping[str, str]
    demand: tuple[WhyNot, ...]

    def node(self, e: NodeExplanation) -> WhyNot | None:
        """The why-not of the node ``e`` explains, or None when it is being given back."""
        reason = self.reasons.get(e.node_id)
        if reason is None:
            return None
        rule = f"rule {short_rule(e.rule)} says {e.matrix_action}"
        if e.blocked_by:
            text = f"{e.name} is kept: {e.blocked_by}: {e.reason} ({rule})"
        else:
            text = f"{e.name} is kept: {rule} for {e.tuple}" + (f": {e.reason}" if e.reason else "")
        return WhyNot("node", e.node_id, reason, text)

    def counts(self) -> dict[tuple[str, str], int]:
        """``(subject, reason) -> count`` with every reason present (0 when none): the metric."""
        out = {("node", r): 0 for r in NODE_REASONS}
        out.update({("demand", r): 0 for r in DEMAND_REASONS})
        for r in self.reasons.values():
            out[("node", r)] += 1
        for w in self.demand:
            out[("demand", w.reason)] += 1
        return out


def why_not(snapshot: Snapshot, plan: Plan) -> WhyNots:
    """The why-nots of ``plan`` made for ``snapshot`` (a cycle's: :func:`of_report`)."""
    going = {f.node for f in snapshot.in_flight if f.action in ("drain", "destroy")}
    known = frozenset(NODE_REASONS)
    reasons: dict[str, str] = {}
    for e in plan.nodes:
        if (e.action is not None and e.action.value in _GIVING_BACK) or e.node_id in going:
            continue  # being given back: nothing to explain
        b = e.blocked_by
        reasons[e.node_id] = "matrix" if not b else b if b in known else "other"
    demand = tuple(WhyNot("demand", u.what, u.reason if u.reason in DEMAND_REASONS else "other",
                          u.text) for u in plan.unmet)
    return WhyNots(reasons, demand)


_KEPT = "_why_not"  # the attribute a report keeps its why-nots under, as functools.cached_property would


def of_report(report: CycleReport) -> WhyNots:
    """The why-nots of one cycle's report, computed on first use and kept with the report (the
    status page, the metrics and the summary read the same report)."""
    kept: WhyNots | None = report.__dict__.get(_KEPT)
    if kept is None:
        kept = report.__dict__[_KEPT] = why_not(report.snapshot, report.plan)
    return kept
