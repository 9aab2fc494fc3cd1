"""Disruption reasons: why the plan drains, destroys, cancels or escalates a node, one small
object per reason (as Karpenter's disruption methods), run in the order of :data:`REASONS` within
their :class:`Stage`. Each proposes decisions for its candidates and names, in ``cause``, itself
and the matrix rule, operator command or recovery rule behind it. Budgets (min_nodes, drains,
destroys) are applied to what they propose by :mod:`nodemanager.core.budgets`.

To add a reason: one module here with a class like :class:`MatrixDrain` (``name``, ``stage``,
``propose``), and one line in :data:`REASONS`.
"""

from __future__ import annotations

from nodemanager.core.reasons.base import Context, Escalation, Reason, Stage
from nodemanager.core.reasons.cancel_for_demand import CancelForDemand
from nodemanager.core.reasons.escalate import Escalate
from nodemanager.core.reasons.finish_drain import FinishOurDrain
from nodemanager.core.reasons.inherited_drain import InheritedDrain
from nodemanager.core.reasons.matrix_drain import MatrixDrain
from nodemanager.core.reasons.matrix_shutdown import MatrixShutdown
from nodemanager.core.reasons.operator_cancel import OperatorCancel
from nodemanager.core.reasons.operator_drain import OperatorDrain
from nodemanager.core.reasons.resume_destroy import ResumeDestroy

__all__ = ["REASONS", "Reason", "Stage", "Context", "Escalation"]

# in order: within a stage, an earlier reason claims a node first (WANTS) or overrides it later (LAST)
REASONS: tuple[Reason, ...] = (
    FinishOurDrain(),
    OperatorDrain(),
    MatrixShutdown(),
    MatrixDrain(),
    CancelForDemand(),
    Escalate(),
    InheritedDrain(),
    ResumeDestroy(),
    OperatorCancel(),
)
