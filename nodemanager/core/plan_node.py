"""The planner's records of one cloud node, one per stage, each immutable. Pure.

:class:`NodeFacts` is what classification found (stage 1): every fact later stages, the actuator,
metrics and status read about the node is computed there once. :class:`Decision` is what the node
gets (stages 2-4): the disruption reasons propose it, placement marks it needed, the gates block it;
each stage hands on a new record (``_replace``), never edits one. Named tuples, not frozen
dataclasses: :func:`~nodemanager.core.plan` builds two per node per cycle (50,000 nodes). Built
by keyword; a stage changes one with ``_replace``.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from nodemanager.core.classify import Classification
from nodemanager.model import Action, Cause, CloudNode, InFlight, ItemKind, Size, StateTuple, Worker
from nodemanager.model.plan import TimedChange

__all__ = ["NodeFacts", "MatrixVerdict", "OurActions", "NOT_OURS", "Decision", "UNDECIDED", "reason_of"]


class MatrixVerdict(NamedTuple):
    """The matrix's word on one tuple: shared by every node with that tuple in a cycle."""

    tuple: StateTuple
    rule: str                        # file:line of the matrix rule that matched
    maction: Action


class OurActions(NamedTuple):
    """What the operator and our own actions under way say about one node (:data:`NOT_OURS`:
    nothing, most nodes)."""

    flights: Mapping[str, InFlight]  # this node's actions under way, by action
    held: bool                       # an operator holds it: no action
    our_drain: InFlight | None       # a drain of ours under way, not being cancelled
    ours_draining: bool              # ... and it counts in max_concurrent_drains
    drained: bool                    # ... and it finished: drained, no job runs, worker heard


NOT_OURS = OurActions(flights={}, held=False, our_drain=None, ours_draining=False, drained=False)


class NodeFacts(NamedTuple):
    """One cloud node as classified, with the facts computed once per cycle.

    The matrix's word and our actions are held in two small records (most nodes share theirs),
    so a node's facts are built with fewer than 16 keywords: CPython turns a call with more into
    a call through a dict, which costs more than the rest of the record. Their fields read as the
    node's own (``f.tuple``, ``f.held``)."""

    node: CloudNode
    worker: Worker | None            # the paired worker (None: unpaired)
    size: Size | None
    cls: Classification
    verdict: MatrixVerdict           # tuple, rule, maction
    core_state: str                  # the tuple's worker_state as the core treats it
    next_change: float | None
    next_what: str | None
    theirs: str | None               # someone else's drain reason: it takes no jobs
    foreign: bool                    # ... and not reclaimable yet: never touched
    lost: bool                       # the worker was last heard more than node_stale_after ago
    gone: bool                       # the cloud lists it terminated or terminating (model.is_gone)
    up: bool                         # counts towards min_nodes: idle, busy or booting, staying
    ours: OurActions                 # flights, held, our_drain, ours_draining, drained
    # a joined worker's next change after its boot grace ends, which no longer matters to it
    after_boot: TimedChange | None = None

    @property
    def tuple(self) -> StateTuple:
        return self.verdict.tuple

    @property
    def rule(self) -> str:
        return self.verdict.rule

    @property
    def maction(self) -> Action:
        return self.verdict.maction

    @property
    def flights(self) -> Mapping[str, InFlight]:
        return self.ours.flights

    @property
    def held(self) -> bool:
        return self.ours.held

    @property
    def our_drain(self) -> InFlight | None:
        return self.ours.our_drain

    @property
    def ours_draining(self) -> bool:
        return self.ours.ours_draining

    @property
    def drained(self) -> bool:
        return self.ours.drained


class Decision(NamedTuple):
    """What a node gets: the action wanted (None: none), the reason that proposed it, what blocked
    it, in words (empty: no reason claimed the node, the matrix asks for nothing: see
    :func:`reason_of`). ``drain`` is our drain when the node reached the reasons (not held, not
    someone else's, not unconfirmed); ``needed`` says why queued jobs need the node (None: not)."""

    facts: NodeFacts
    want: ItemKind | None = None
    cause: Cause | None = None
    blocked: str | None = None
    reason: str = ""
    cancellable: bool = True
    forced: bool = False
    drain: InFlight | None = None
    needed: str | None = None
    request_id: str | None = None    # the scheduler's id of the drain the action is about
    schedule: str | None = None      # DRAIN/ESCALATE: graceful | quick | fast
    budget: str | None = None        # the [Budget NAME] holding it back

    def wanting(self, want: ItemKind, cause: Cause, reason: str, cancellable: bool = True) -> Decision:
        """This decision with ``want`` proposed by ``cause``."""
        return self._replace(want=want, cause=cause, reason=reason, cancellable=cancellable)

    def held_back(self, blocked: str, reason: str, budget: str | None = None) -> Decision:
        """This decision with no action: ``blocked`` says what stopped it, ``reason`` in words,
        ``budget`` the ``[Budget NAME]`` that did (if one did)."""
        return self._replace(want=None, blocked=blocked, reason=reason, budget=budget)

    def saying(self, reason: str) -> Decision:
        """This decision with only its words changed."""
        return self._replace(reason=reason)


# the fields after ``facts`` of a node no reason looked at yet (``Decision._make((facts, *UNDECIDED))``
# is ``Decision(facts=facts)`` without the keyword binding): the class's own defaults, so a new field
# needs no edit here
UNDECIDED = tuple(Decision._field_defaults[name] for name in Decision._fields[1:])


def reason_of(d: Decision) -> str:
    """The decision's words; for a node no reason claimed, the matrix's (written only when asked:
    most nodes of a large pool are such nodes)."""
    return d.reason or f"matrix says no action: {d.facts.cls.why}"

