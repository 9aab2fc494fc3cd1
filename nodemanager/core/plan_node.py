"""The planner's working record of one cloud node, filled step by step within one plan. Pure."""

from __future__ import annotations

from nodemanager.core.classify import Classification
from nodemanager.model import Action, CloudNode, InFlight, ItemKind, Size, StateTuple, Worker

__all__ = ["PlanNode"]


class PlanNode:
    """Working state of one cloud node during one :func:`~nodemanager.core.plan` call (mutable)."""

    __slots__ = ("node", "worker", "size", "cls", "tuple", "rule", "maction", "next_change",
                 "next_what", "want", "forced", "cancellable", "drain", "blocked", "reason",
                 "needed", "why_needed", "request_id", "schedule", "ours_draining", "drained",
                 "foreign", "theirs", "core_state")
    # set by plan's classification for every node before any other step reads them
    cls: Classification
    tuple: StateTuple
    rule: str
    maction: Action
    next_change: float | None
    next_what: str | None
    core_state: str  # the tuple's worker_state as the core treats it (Vocabulary.core_state)

    def __init__(self, node: CloudNode, worker: Worker | None, size: Size | None) -> None:
        self.node, self.worker, self.size = node, worker, size
        self.want: ItemKind | None = None
        self.forced = False
        self.cancellable = True
        self.drain: InFlight | None = None
        self.blocked: str | None = None
        self.reason = ""
        self.needed = False
        self.why_needed = ""
        self.request_id: str | None = None
        self.schedule: str | None = None
        self.ours_draining = False  # a drain of ours is under way (counts in the drain budget)
        self.drained = False        # ... and it has finished: the worker is drained, ready to go
        self.theirs: str | None = None  # someone else's drain reason: it takes no jobs
        self.foreign = False        # ... and not reclaimable yet: never touched
