"""The operator's decision log (logger ``nodemanager.decisions``): one line per node decision
change, one per planned action, one summary line per cycle, and each node's history events.

Designed so 10,000 nodes do not flood the log: one
line per node *decision change* — node, tuple, matched rule ``file:line``, matrix action, the
planned action and what blocked it — at INFO when a node is first seen, when its worker state
changes (unpaired → busy → idle → down: a few lines per node lifetime) and when the matrix action,
the planned action or what blocks it changes; a change of window, grace or rule that leaves the
decision as it was (a billing window opening with nothing to do) is logged at DEBUG; every planned action is logged at INFO (``dry-run: would ...`` in dry-run);
one summary line per cycle (node counts per worker state, workers, queued jobs, actions, boots,
freeze reason, CPU time) at INFO when it differs from the previous cycle's, else at DEBUG; one
line per actuator outcome (``ok`` at INFO, ``refused``/``failed`` at WARNING, backoff skips at
DEBUG; :meth:`nodemanager.cycle.controller.Controller.record`). A quiet pool logs nothing at INFO. Line
format::

    node NAME -> drain: idle for 6m 10s (idle grace 5m) in the closing phase of its billing \
window; (idle, open, boot wait, idle exceeded) joined, rule default.matrix:30 says START_DRAIN
    node NAME drained -> destroy: our drain (started 40s ago) finished: ...; \
(down, open, boot wait, not idle) drained by us, rule default.matrix:38 says START_SHUTDOWN

The reason comes first and whole; the tuple is the matrix's own (what ``matrix explain`` takes),
with what else is known beside it.
"""

from __future__ import annotations

import logging
from collections import Counter
from operator import attrgetter
from typing import Any

from nodemanager.console.node_words import beside, given_back_as
from nodemanager.core.placement import UNMATCHED
from nodemanager.core.undersized import UNDERSIZED
from nodemanager.model import CycleReport, NodeExplanation, Plan, Snapshot
from nodemanager.text import short_rule

__all__ = ["DecisionLog", "decision_line", "decision_fields", "decision_details", "cancelling", "log_ignored_cancels"]

log = logging.getLogger("nodemanager.decisions")


_WORKER_STATE = attrgetter("tuple.worker_state")


def cancelling(plan: Plan) -> frozenset[str]:
    """The node ids whose drain the plan cancels for an operator."""
    return frozenset(e.node_id for e in plan.nodes if e.cause is not None and e.cause.reason == "operator_cancel")


def log_ignored_cancels(cancels: frozenset[str], plan: Plan) -> None:
    """One line per operator cancel that found no drain of ours to cancel."""
    for node_id in sorted(cancels - cancelling(plan)):
        log.info("node %s: operator cancel ignored: no drain of ours in progress", node_id)


def decision_line(e: NodeExplanation, dry_run: bool = False) -> str:
    """The operator's one line for a node decision, read whole: the node and what it is given back
    as (``drained``), the planned action and the whole reason first, then the matrix's tuple (what
    else is known beside it), the matched rule and the matrix's action. Longer detail (node id,
    size, raw state, the rule's full path) is :func:`decision_details`, logged at DEBUG."""
    action = e.action.value if e.action is not None else "none"
    if dry_run and e.action is not None:
        action = f"dry-run: would {action}"
    what = given_back_as(e)
    reason = e.reason
    for said in (f"matrix says {e.matrix_action}: ", "matrix says no action: "):
        if reason.startswith(said):  # the line ends with the rule and what it says
            reason = reason[len(said):]
            break
    why = f"blocked by {e.blocked_by}: {reason}" if e.blocked_by else reason
    extra = beside(e)
    return (f"node {e.name}{' ' + what if what else ''} -> {action}{': ' + why if why else ''}; "
            f"{e.tuple}{' ' + ', '.join(extra) if extra else ''}, rule {short_rule(e.rule)} "
            f"says {e.matrix_action}")


def decision_fields(e: NodeExplanation, request_id: str | None = None) -> dict[str, Any]:
    """A decision's fields for a JSON log line (``log_format = json``): the line's parts, apart."""
    return {"node": e.name, "node_id": e.node_id, "tuple": str(e.tuple), "beside": list(beside(e)),
            "rule": short_rule(e.rule), "matrix_action": str(e.matrix_action),
            "action": e.action.value if e.action is not None else None, "given_back_as": given_back_as(e),
            "blocked_by": e.blocked_by, "reason": e.reason, "request_id": request_id}


def decision_details(e: NodeExplanation) -> str:
    """Everything about a decision that the short line leaves out (logged at DEBUG)."""
    return (f"node {e.name} ({e.node_id}, {e.size}) worker {e.worker or '-'} state "
            f"{e.raw_state or '-'} rule {e.rule}: {e.matrix_action} -> "
            f"{e.action.value if e.action else 'none'}; blocked by {e.blocked_by or '-'}; {e.reason}")


def _note_change(history: Any, e: NodeExplanation, old: NodeExplanation | None, now: float,
                 dry_run: bool) -> None:
    """Add a history event when the node is new, its worker state or its decision changed."""
    if old is not None and old.tuple.worker_state != e.tuple.worker_state:
        history.add(e.node_id, now, "state", f"{old.tuple.worker_state} -> {e.tuple.worker_state}"
                    + (f" (scheduler: {e.raw_state})" if e.raw_state else ""))
    if old is None or (old.matrix_action, old.action, old.blocked_by) != (e.matrix_action, e.action,
                                                                          e.blocked_by):
        history.add(e.node_id, now, "decision", _Decision(e, dry_run))


class _Decision:
    """A decision event's text, made from the explanation only when someone reads it."""

    __slots__ = ("e", "dry_run")

    def __init__(self, e: NodeExplanation, dry_run: bool) -> None:
        self.e, self.dry_run = e, dry_run

    def __str__(self) -> str:
        return decision_line(self.e, self.dry_run)[len(self.e.name) + 6:]


class DecisionLog:
    """What was last logged per node (so only changes are logged) and the last summary line."""

    def __init__(self) -> None:
        # node id -> its explanation last seen (the plan's own record: no copy kept per node)
        self.seen: dict[str, NodeExplanation] = {}
        self._last_summary: tuple[Any, ...] | None = None
        self._unmatched: dict[str, str] = {}  # signature of demand no size can run -> why logged
        self._undersized: set[str] = set()  # the notes of workers smaller than their size, logged

    def decisions(self, plan: Plan, dry_run: bool, history: Any,
                  last_report: CycleReport | None) -> list[str]:
        """Log decision changes and actions (and add them to ``history``, a
        :class:`~nodemanager.console.history.NodeHistory` or None); return the node ids that left the
        listing (``last_report`` names them in the history)."""
        seen = self.seen
        acted = {i.node_id for i in plan.items}
        requests = {i.node_id: i.request_id for i in plan.items if i.request_id}
        info, debug = log.isEnabledFor(logging.INFO), log.isEnabledFor(logging.DEBUG)
        for e in plan.nodes:
            old = seen.get(e.node_id)
            seen[e.node_id] = e  # the new record replaces the old: the old plan's is not kept
            if e.action is not None or e.node_id in acted:
                level = logging.INFO
            elif old is e or (old is not None and old.matrix_action is e.matrix_action
                              and old.action == e.action and old.blocked_by == e.blocked_by
                              and (old.tuple is e.tuple or old.tuple == e.tuple) and old.rule == e.rule):
                continue  # the common case: nothing new, nothing built (the same record: surely)
            elif (old is None or (old.matrix_action, old.action, old.blocked_by)
                  != (e.matrix_action, e.action, e.blocked_by)
                  or old.tuple.worker_state != e.tuple.worker_state):
                level = logging.INFO  # first seen, a new decision, or a new worker state
            else:  # only the window, a grace or the rule changed, with the same decision
                level = logging.DEBUG
            if debug or (info and level >= logging.INFO):
                log.log(level, "%s", decision_line(e, dry_run), extra=decision_fields(e, requests.get(e.node_id)))
                if debug:
                    log.debug("%s", decision_details(e))
            if history is not None:
                _note_change(history, e, old, plan.now, dry_run)
        explained = {e.node_id for e in plan.nodes}
        # every node explained is in seen now: any other entry is a node that left
        gone = [k for k in seen if k not in explained] if len(seen) > len(explained) else []
        listed = {n.id: n for n in last_report.snapshot.cloud_nodes} \
            if gone and history is not None and last_report is not None else {}
        for node_id in gone:
            del seen[node_id]
            log.info("node %s left the cloud listing", node_id)
            if history is not None:
                n = listed.get(node_id)
                history.gone(node_id, plan.now, {"name": n.name, "size": n.size,
                                                 "launched_at": n.launched_at} if n else None)
        for item in plan.items:
            if item.node_id not in explained:
                prefix = "dry-run: would " if dry_run else ""
                log.info("node %s (%s) -> %s%s [%s]", item.node_name, item.node_id, prefix,
                         item.kind.value, item.reason)
        for b in plan.boots:
            prefix = "dry-run: would " if dry_run else ""
            log.info("boot %s%d x %s [%s]", prefix, b.count, b.size, b.reason)
        self._log_unmatched(plan)
        self._log_undersized(plan)
        return gone

    def _log_undersized(self, plan: Plan) -> None:
        """One warning per node whose worker is smaller than its size, when it is first noted."""
        now = {n for n in plan.notes if UNDERSIZED in n}
        for text in sorted(now - self._undersized):
            log.warning("%s", text)
        self._undersized = now

    def _log_unmatched(self, plan: Plan) -> None:
        """One line per signature no size can run, when it appears or its reason changes."""
        # keyed by what the jobs need, compared without their count: more of them is no news
        now = {u.what: u.text for u in plan.unmet if u.reason == UNMATCHED}
        for what, text in now.items():
            if self._unmatched.get(what, "").partition(what)[2] != text.partition(what)[2]:
                log.warning("demand never booted for: %s", text)
        self._unmatched = now

    def summary(self, snap: Snapshot, plan: Plan, cpu: float, dry_run: bool) -> None:
        """The cycle's summary line: at INFO when it differs from the previous cycle's."""
        counts = Counter(map(_WORKER_STATE, plan.nodes))
        states = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
        boots = sum(b.count for b in plan.boots)
        key = (len(snap.cloud_nodes), states, len(snap.workers), sum(d.count for d in snap.demand),
               len(plan.items), boots, plan.frozen)
        level = logging.DEBUG if key == self._last_summary else logging.INFO
        self._last_summary = key
        log.log(level, "cycle: %d nodes (%s), %d workers, %d queued, %d action(s), %d boot(s)%s%s, %.3fs CPU",
                 len(snap.cloud_nodes), states, len(snap.workers), sum(d.count for d in snap.demand),
                 len(plan.items), boots, f", frozen: {plan.frozen}" if plan.frozen else "",
                 " (dry-run)" if dry_run else "", cpu)

