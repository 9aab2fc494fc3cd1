"""The controller's memory of suspect nodes: for each node, the seconds of fresh scheduler polls
in a row that showed it unpaired or down. A missing or silent worker is believed only once this
process's own polls showed it so long enough (after a restart or an outage, ads may just be late
or old). Kept in memory only: a restart counts from 0."""

from __future__ import annotations

from typing import Any

from nodemanager.model import Plan
from policy_matrix.vocabulary import DOWN, UNPAIRED

__all__ = ["SuspectMemory"]


class SuspectMemory:
    """Node id -> seconds shown unpaired or down by fresh polls (see the module docstring)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._poll: float | None = None       # polled_at of the last poll counted

    def confirmed(self, after: float) -> set[str]:
        """The nodes counted for ``after`` seconds or more (counts start at 0)."""
        return {k for k, v in self.seconds.items() if v >= after}

    def observe(self, plan: Plan, polled_at: float, now: float, stale_after: float, vocabulary: Any) -> None:
        """Add the time since the last counted poll to each node a new, fresh poll shows unpaired
        or down; a node shown otherwise starts again from 0, and so does every node after a gap in
        the polls longer than ``stale_after`` (an outage is no evidence of absence). A worker_state
        is read as the core reads it (``vocabulary``): one added like unpaired or down counts too."""
        last = self._poll
        if now - polled_at > stale_after:
            self.seconds, self._poll = {}, None
            return
        if last is not None and polled_at <= last:
            return
        gap = polled_at - last if last is not None else 0.0
        if gap > stale_after:
            self.seconds, gap = {}, 0.0
        before = self.seconds
        core_state = vocabulary.core_state if vocabulary is not None else str
        cores: dict[str, str] = {}  # worker_state -> core state, asked once per state
        self.seconds = {e.node_id: before.get(e.node_id, -gap) + gap for e in plan.nodes
                        if (cores.get(ws := e.tuple.worker_state) or cores.setdefault(ws, core_state(ws)))
                        in (UNPAIRED, DOWN)}
        self._poll = polled_at
