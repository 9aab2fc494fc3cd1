"""One controller cycle as the logs, the metrics and the status page read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from nodemanager.model.plan import Outcome, Plan
from nodemanager.model.records import EMPTY_MAP, CloudNode, Snapshot
from policy_matrix.vocabulary import Vocabulary

__all__ = ["CycleReport", "DENIABLE_ACTIONS"]

# the scheduler actions a missing right refuses (the first part of a ``denied`` key)
DENIABLE_ACTIONS = ("drain", "cancel_drain", "escalate", "destroy")


@dataclass(frozen=True)
class CycleReport:
    """One controller cycle, for logs, metrics and the status page."""

    snapshot: Snapshot
    plan: Plan
    outcomes: tuple[Outcome, ...] = ()
    matrix_hash: str = ""
    matrix_error: str | None = None
    cpu_seconds: float = 0.0
    vocabulary: Vocabulary | None = None   # the matrix's words: how an added worker_state is read
    # VMs with our cluster name and another deployment's id: shown, never touched nor counted
    foreign_nodes: tuple[CloudNode, ...] = ()
    # why this process stopped acting: another controller of this deployment acts (None: it does not)
    other_controller: str | None = None
    # scheduler calls refused for lack of rights: "action:node id" -> the scheduler's error
    denied: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)

    def core_state(self, worker_state: str) -> str:
        """The core's word for ``worker_state`` (busy, idle, down, unpaired): what everything
        outside the matrix reads, so a state added ``like busy`` counts as busy."""
        return self.vocabulary.core_state(worker_state) if self.vocabulary is not None else worker_state
