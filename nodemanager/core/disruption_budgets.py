"""Disruption budgets (``[Budget NAME]``): how many nodes may be given back at once for the
reasons a budget names, during its schedule's windows. Which reason gives a node back is the
disruption reason behind it, by the ``budget`` word it declares (:mod:`nodemanager.core.reasons`):
for a node a LABELS reason relabelled (``consolidate``, ``max_lifetime``, ``drift``) that reason,
whatever the matrix then does; else the reason that proposed the action (``matrix_drain``,
``matrix_shutdown``: idle nodes and any other rule of the matrix; ``warm_gives_way``: a warm node
drained for queued jobs). Not budgeted: an operator's
forced drain, a node that is no capacity (down, failed boot, spot reclaim), a reason that declares
no budget (finishing a drain under way, a resumed destroy). The nodes going count against every
active budget: our drains under way and what this cycle starts. The most restrictive matching
budget binds. Pure; :func:`nodemanager.core.budgets.gate` applies it.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from nodemanager.core.settings import CoreSettings, DisruptionBudget
from nodemanager.core.plan_node import Decision
from nodemanager.core import reasons as registry
from nodemanager.core.reasons import Reason, Stage
from nodemanager.core.reasons.matrix_drain import MatrixDrain
from nodemanager.core.reasons.matrix_shutdown import MatrixShutdown
from nodemanager.core.schedule import active
from nodemanager.model import Action, BudgetUse
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, IDLE, UNPAIRED

__all__ = ["Allowance", "allowances", "budget_reason", "binding", "covering", "describe", "held_words",
           "tuple_reasons", "uses"]


class Allowance(NamedTuple):
    budget: DisruptionBudget
    active: bool
    allowed: int     # nodes going at once (meaningful when active)


def allowances(settings: CoreSettings, up: int, now: float) -> list[Allowance]:
    """Each configured budget this cycle, with ``up`` nodes counted as up."""
    return [Allowance(b, b.schedule is None or active(b.schedule, now), b.allowed(up))
            for b in settings.disruption_budgets]


def budget_reason(d: Decision, reasons: Mapping[str, Reason]) -> str | None:
    """The budget word of the reason giving the node back (``reasons``: each reason by its name,
    :func:`nodemanager.core.reasons.by_name`), None when not budgeted."""
    f = d.facts
    if d.forced or not f.up or d.cause is None:
        return None
    reason = reasons.get(f.cls.relabelled_by or d.cause.reason)
    return reason.budget if reason is not None else None


def tuple_reasons(worker_state: str, core_state: str, boot_grace: str, action: Action) -> tuple[str, ...]:
    """The budgeted reasons a matrix rule's ``action`` may give a node of this tuple back for, as
    :func:`budget_reason` reads a node; none when the action gives nothing back or the node is no
    capacity (down, reclaimed, a VM past its boot grace without a worker)."""
    up = core_state in (IDLE, BUSY) or (core_state == UNPAIRED and boot_grace != BOOT_EXCEEDED)
    if action is Action.NONE or not up:
        return ()
    relabelling = tuple(r.budget for r in registry.REASONS
                        if r.stage is Stage.LABELS and r.relabels == worker_state and r.budget is not None)
    if relabelling:
        return relabelling
    matrix = MatrixDrain.budget if action is Action.START_DRAIN else MatrixShutdown.budget
    return (matrix,) if matrix is not None else ()


def covering(budgets: Sequence[DisruptionBudget], reason: str) -> list[DisruptionBudget]:
    """The budgets that limit nodes given back for ``reason``, in the configuration's order."""
    return [b for b in budgets if not b.reasons or reason in b.reasons]


def binding(active_ones: Sequence[Allowance], reason: str, going: int) -> Allowance | None:
    """The most restrictive active budget covering ``reason`` once ``going`` nodes are going,
    when it allows no more; else None."""
    tightest = min((a for a in active_ones if not a.budget.reasons or reason in a.budget.reasons),
                   key=lambda a: a.allowed, default=None)
    return tightest if tightest is not None and going >= tightest.allowed else None


def describe(b: DisruptionBudget) -> str:
    """``budget night: 2 node(s) at once for matrix_drain, during '0 22 * * *' for 8h (UTC)``."""
    what = ", ".join(sorted(b.reasons)) or "every budgeted reason"
    when = f", during {b.schedule.text}" if b.schedule is not None else ""
    return f"budget {b.name}: {b.limit} at once for {what}{when}"


def held_words(a: Allowance, reason: str, going: int) -> str:
    """Why a node given back for ``reason`` waits, naming the budget."""
    return (f"held back by budget {a.budget.name} ({reason}: {a.allowed} node(s) at once allowed, "
            f"{going} going)")


def uses(all_: Sequence[Allowance], held: Mapping[str, int]) -> tuple[BudgetUse, ...]:
    """What the status page and metrics show of each budget."""
    return tuple(BudgetUse(name=a.budget.name, active=a.active, allowed=a.allowed,
                           held=held.get(a.budget.name, 0), text=describe(a.budget)) for a in all_)
