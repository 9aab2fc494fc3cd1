"""Disruption reasons: why the plan drains, destroys, cancels or escalates a node, one small
object per reason (as Karpenter's disruption methods), run in the order of :data:`REASONS` within
their :class:`Stage`. Each proposes decisions for its candidates and names, in ``cause``, itself
and the matrix rule, operator command or recovery rule behind it. Budgets (min_nodes, drains,
destroys) are applied to what they propose by :mod:`nodemanager.core.budgets`.

Every way a node is given back is one: the matrix's drain and shutdown, consolidation,
``max_lifetime``, settings drift (these three relabel a busy node, and the matrix says what the new
state gets), finishing and escalating our drains, operator commands, recovery, warm capacity
giving way to queued jobs.

To add a reason: one module here with a class like :class:`MatrixDrain` (``name``, ``stage``,
``propose``; ``budget``, ``time_settings`` and ``relabels`` where the protocol's defaults do not
hold), and one line in :data:`REASONS`. What the rest of the tree asks of the reasons it asks here,
reading :data:`REASONS` when it asks: the budget words a ``[Budget NAME]`` may name
(:func:`budget_words`), the reasons a configuration turns on (:func:`switched_on`) and those that
make a plan depend on time (:func:`time_dependent`);
the plan's budgets read each reason's own ``budget`` (:mod:`nodemanager.core.disruption_budgets`).
"""

from __future__ import annotations

from typing import Any

from nodemanager.core.reasons.base import Context, Escalation, Reason, Stage
from nodemanager.core.reasons.cancel_for_demand import CancelForDemand
from nodemanager.core.reasons.consolidate import Consolidate
from nodemanager.core.reasons.drift import Drift
from nodemanager.core.reasons.escalate import Escalate
from nodemanager.core.reasons.finish_drain import FinishOurDrain
from nodemanager.core.reasons.inherited_drain import InheritedDrain
from nodemanager.core.reasons.matrix_drain import MatrixDrain
from nodemanager.core.reasons.max_lifetime import MaxLifetime
from nodemanager.core.reasons.matrix_shutdown import MatrixShutdown
from nodemanager.core.reasons.operator_cancel import OperatorCancel
from nodemanager.core.reasons.operator_drain import OperatorDrain
from nodemanager.core.reasons.resume_destroy import ResumeDestroy
from nodemanager.core.reasons.warm_gives_way import WarmGivesWay
from nodemanager.core.reasons.would_evict import WouldEvict
from nodemanager.core.settings import CoreSettings

__all__ = ["REASONS", "Reason", "Stage", "Context", "Escalation", "budget_words", "switched_on", "time_dependent"]

# in order: within a stage, an earlier reason relabels a node first (LABELS: a later one sees it
# relabelled and passes it by), claims it first (WANTS) or overrides it later (LAST)
REASONS: tuple[Reason, ...] = (
    Drift(),            # LABELS: a node booted with old settings is replaced whatever its age or load
    MaxLifetime(),      # LABELS: an old node is replaced before its free cores count as spare
    Consolidate(),      # LABELS: last, so only nodes kept for their settings and age count as spare
    FinishOurDrain(),   # WANTS: a drain of ours under way is carried through before anything new
    OperatorDrain(),    # WANTS: an operator's forced drain wins over the matrix's word
    MatrixShutdown(),   # WANTS: the matrix's destroy before its drain (nothing to drain first)
    MatrixDrain(),      # WANTS: the matrix's drain (of relabelled nodes too), for nodes left
    CancelForDemand(),  # AFTER_DEMAND: once demand is placed, a drain of ours that demand needs
    WarmGivesWay(),     # AFTER_DEMAND: once demand is placed, a warm node whose slot or money queued jobs need
    WouldEvict(),       # AFTER_DEMAND: before the budgets, so a drain it stops takes no drain slot
    Escalate(),         # AFTER_GATES: only drains the budgets let stand are made harsher
    InheritedDrain(),   # LAST: a drain a new VM inherited from an older one of its name is cancelled
    ResumeDestroy(),    # LAST: an interrupted destroy is finished whatever else was decided
    OperatorCancel(),   # LAST: an operator's cancel overrides everything but a destroy it follows
)


def budget_words() -> tuple[str, ...]:
    """The words a ``[Budget NAME]`` section's ``reasons`` may name, in :data:`REASONS` order."""
    return tuple(r.budget for r in REASONS if r.budget is not None)


def _set(value: Any) -> bool:
    return bool(value) and not (isinstance(value, (int, float)) and value <= 0)


def switched_on(settings: CoreSettings, stage: Stage | None = None) -> tuple[Reason, ...]:
    """The reasons (of ``stage``; None: of any) that ``settings`` turn on (their ``switches``)."""
    return tuple(r for r in REASONS if (stage is None or r.stage is stage)
                 and (not r.switches or any(_set(getattr(settings, name)) for name in r.switches)))


def time_dependent(settings: CoreSettings, stage: Stage | None = None) -> tuple[Reason, ...]:
    """The reasons (of ``stage``; None: of any) whose ``time_settings`` are set in ``settings``:
    what they propose may change with time alone or with other nodes than the one decided."""
    return tuple(r for r in REASONS if (stage is None or r.stage is stage)
                 and any(_set(getattr(settings, name)) for name in r.time_settings))
