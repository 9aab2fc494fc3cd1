"""The planner's records of one cloud node, one per stage, each immutable. Pure.

:class:`NodeFacts` is what classification found (stage 1): every fact later stages, the actuator,
metrics and status read about the node is computed there once. :class:`Decision` is what the node
gets (stages 2-4): the disruption reasons propose it, placement marks it needed, the gates block it;
each stage hands on a new record, never edits one. Named tuples, not frozen dataclasses:
:func:`~nodemanager.core.plan` builds two per node per cycle (50,000 nodes), each from a tuple
in field order (:data:`in_field_order`; the field orders are checked below at import and, field
by field against the record built by keyword, in ``tests/test_plan_records.py``). Elsewhere a
record is built by keyword and changed with ``_replace``.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from nodemanager.core.classify import Classification
from nodemanager.model import Action, Cause, CloudNode, InFlight, ItemKind, Size, StateTuple, TimedChange, Worker

__all__ = ["NodeFacts", "Decision", "UNDECIDED", "in_field_order", "reason_of"]

# a named tuple built from a tuple of its fields in order: the class's own ``__new__`` (a Python
# call) and a keyword binding cost more than the record, and the plan builds several per node
in_field_order = tuple.__new__


class NodeFacts(NamedTuple):
    """One cloud node as classified, with the facts computed once per cycle."""

    node: CloudNode
    worker: Worker | None            # the paired worker (None: unpaired)
    size: Size | None
    cls: Classification
    tuple: StateTuple
    rule: str                        # file:line of the matrix rule that matched
    maction: Action
    core_state: str                  # the tuple's worker_state as the core treats it
    next_change: float | None
    next_what: str | None
    theirs: str | None               # someone else's drain reason: it takes no jobs
    foreign: bool                    # ... and not reclaimable yet: never touched
    flights: Mapping[str, InFlight]  # this node's actions under way, by action
    held: bool                       # an operator holds it: no action
    lost: bool                       # the worker was last heard more than node_stale_after ago
    gone: bool                       # the cloud lists it terminated or terminating (model.is_gone)
    our_drain: InFlight | None       # a drain of ours under way, not being cancelled
    ours_draining: bool              # ... and it counts in max_concurrent_drains
    drained: bool                    # ... and it finished: drained, no job runs, worker heard
    up: bool                         # counts towards min_nodes: idle, busy or booting, staying
    # a joined worker's next change after its boot grace ends, which no longer matters to it
    after_boot: TimedChange | None = None


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

    # the common steps, each a new record from the fields in order: ``_replace`` costs three times as much
    def wanting(self, want: ItemKind, cause: Cause, reason: str, cancellable: bool = True) -> Decision:
        """This decision with ``want`` proposed by ``cause``."""
        return in_field_order(Decision, (self[0], want, cause, self[3], reason, cancellable, self[6], self[7],
                                         self[8], self[9], self[10], self[11]))

    def held_back(self, blocked: str, reason: str, budget: str | None = None) -> Decision:
        """This decision with no action: ``blocked`` says what stopped it, ``reason`` in words,
        ``budget`` the ``[Budget NAME]`` that did (if one did)."""
        return in_field_order(Decision, (self[0], None, self[2], blocked, reason, self[5], self[6], self[7],
                                         self[8], self[9], self[10], budget))

    def saying(self, reason: str) -> Decision:
        """This decision with only its words changed."""
        return in_field_order(Decision, (self[0], self[1], self[2], self[3], reason, self[5], self[6], self[7],
                                         self[8], self[9], self[10], self[11]))


# the fields after ``facts`` of a node no reason looked at yet (``in_field_order(Decision, (facts,) +
# UNDECIDED)`` is ``Decision(facts=facts)``): the class's own defaults, so a new field needs no edit here
UNDECIDED = tuple(Decision._field_defaults[name] for name in Decision._fields[1:])

# the orders :mod:`nodemanager.core.facts` and :class:`Decision` build their records in
assert NodeFacts._fields == (
    "node", "worker", "size", "cls", "tuple", "rule", "maction", "core_state", "next_change", "next_what",
    "theirs", "foreign", "flights", "held", "lost", "gone", "our_drain", "ours_draining", "drained", "up",
    "after_boot"), "node_facts() builds NodeFacts in field order"
assert Decision._fields == (
    "facts", "want", "cause", "blocked", "reason", "cancellable", "forced", "drain", "needed", "request_id",
    "schedule", "budget"), "Decision's steps build it in field order"


def reason_of(d: Decision) -> str:
    """The decision's words; for a node no reason claimed, the matrix's (written only when asked:
    most nodes of a large pool are such nodes)."""
    return d.reason or f"matrix says no action: {d.facts.cls.why}"

