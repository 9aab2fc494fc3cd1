"""Per-node work the plan may reuse from one cycle to the next (replay speed).

A :class:`NodeMemo` is owned by the caller (the :class:`~nodemanager.cycle.controller.Controller` keeps
one) and handed to :func:`nodemanager.core.plan` as ``memo=``; ``None`` plans everything afresh.
The plan stays a function of its arguments: a memo only ever returns what the plan would compute
anyway, so a plan with a memo equals the plan without one, cycle after cycle.

What it keeps, per cloud node id, and when it is reused:

* the node's :class:`~nodemanager.core.plan_node.NodeFacts` (stage 1), when the listing holds the
  very same ``CloudNode`` object, paired with the very same ``Worker`` object (identity, ``is``:
  the pollers hand back unchanged records as the same objects; ``==`` would cost as much as the
  work), or with none for the same pairing reason; the same ``CoreSettings`` and matrix objects
  (a reload starts afresh) and the same held set; no action of ours under way on the node, now
  or when the facts were computed; the worker not lost (``last_heard + node_stale_after``); and
  ``now`` before the facts' ``next_change`` (a billing window, the boot grace, the end of
  ``reclaim_foreign_after``). Facts whose words name ``now`` are never kept: an idle node ("idle
  for Ns"; its grace may also follow break-even ``idle_graces``), a lost worker ("not heard from
  for Ns"), a cloud reclaim notice ("in 1m 40s") and a foreign drain past
  ``reclaim_foreign_after`` ("drained by someone else for Ns");
* the node's :class:`~nodemanager.model.NodeExplanation`, when its decision is the undecided one
  (no reason claimed it, nothing blocked it) on the very same facts object, in the same entry as
  its facts (one entry per node: at 50,000 nodes a second table cost 8 MB);
* the facts a later stage derives from a node's facts (:mod:`nodemanager.core.consolidate`: a
  relabel to ``underused``/``expired``, ``max_lifetime``'s end as the next change), when the
  node's facts are the very same object and what else the stage read is equal.

:func:`nodemanager.core.facts.node_facts` and the plan's explanations apply these rules inline
(a call per node would cost what the memo saves); this module holds the entries. Entries of nodes
no longer listed are dropped every cycle (the memo holds one cycle's nodes).
"""

from __future__ import annotations

from typing import Any, Mapping

from nodemanager.core.plan_node import NodeFacts
from nodemanager.configuration.settings import CoreSettings

__all__ = ["NodeMemo", "FactsEntry", "DerivedEntry"]

# [valid while now < this, the pairing reason of an unpaired node, its facts (whose node and
# worker are the records they were made from), the facts its undecided explanation was made from
# (its facts, or what a later stage made of them) or None, that explanation or None]; a list: the
# plan's explanations fill its last two slots in place
FactsEntry = list[Any]
# (the facts a stage started from, what else it read, the facts it made)
DerivedEntry = tuple[NodeFacts, object, NodeFacts]


class NodeMemo:
    """Facts and explanations of the last cycle's nodes, to reuse while their inputs stay the
    same (see the module docstring). Not thread-safe: one planner uses it at a time."""

    __slots__ = ("_settings", "_matrix", "_held", "_facts", "_derived")

    def __init__(self) -> None:
        self._settings: CoreSettings | None = None
        self._matrix: Any = None
        self._held: frozenset[str] | None = None
        self._facts: dict[str, FactsEntry] = {}
        self._derived: dict[str, dict[str, DerivedEntry]] = {}

    def begin(self, settings: CoreSettings, matrix: Any,
              held: frozenset[str]) -> tuple[Mapping[str, FactsEntry], dict[str, FactsEntry]]:
        """Start a cycle's facts: forget everything if the settings, the matrix or the held set
        changed since the last cycle. Returns the last cycle's entries (node id ->
        :data:`FactsEntry`) and this cycle's, which
        :func:`nodemanager.core.facts.node_facts` fills with each entry it reuses or makes."""
        if settings is not self._settings or matrix is not self._matrix or (
                held is not self._held and held != self._held):
            self._settings, self._matrix, self._held = settings, matrix, held
            self._facts, self._derived = {}, {}
        last, self._facts = self._facts, {}
        return last, self._facts

    def entries(self) -> Mapping[str, FactsEntry]:
        """This cycle's facts entries (after :meth:`begin`), whose explanation slots
        :func:`nodemanager.core.plan` reads and fills."""
        return self._facts

    def begin_derived(self, stage: str) -> tuple[Mapping[str, DerivedEntry], dict[str, DerivedEntry]]:
        """Start a cycle of ``stage`` (a name): its last cycle's entries (node id -> (facts, what
        else it read, the facts it made)) and this cycle's, which the stage fills with each one
        it reuses or makes (the others are forgotten)."""
        last = self._derived.get(stage, {})
        kept: dict[str, DerivedEntry] = {}
        self._derived[stage] = kept
        return last, kept
