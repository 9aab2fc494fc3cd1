"""Nodes no disruption reason may touch this cycle, and why: a destroy under way, an operator's
hold, an ambiguous pairing (several workers or VMs match: which runs jobs is unknown), a worker
that answers to the node's name or address with another VM's instance id, someone else's drain, an absence or silence this process has not confirmed, a cancel of
our drain under way. Pure."""

from __future__ import annotations

from nodemanager.core.plan_node import Decision, NodeFacts
from nodemanager.model import Action, Blocked, Snapshot
from nodemanager.text import duration
from policy_matrix.vocabulary import DOWN, UNPAIRED

__all__ = ["guard"]


def guard(f: NodeFacts, snapshot: Snapshot, ambiguous: frozenset[str] = frozenset(),
          conflicts: frozenset[str] = frozenset()) -> Decision | None:
    """The node's decision when something stops every reason (None: the reasons may look at it);
    ``ambiguous``, ``conflicts``: the ids of nodes the pairing found ambiguous or in conflict."""
    mine = f.flights
    destroy = mine.get("destroy") if mine else None
    conflict = f.worker is None and f.node.id in conflicts
    unsure = conflict or (f.worker is None and f.node.id in ambiguous)
    # a destroy this process sent is under way whatever holds the node; one known only from a
    # leftover tag is never resumed past a hold or an ambiguous pairing
    if destroy is not None and f.node.id in snapshot.destroyed:
        # the cloud took our destroy; only its listing, polled less often, still shows the VM
        return Decision(facts=f, blocked=Blocked.IN_FLIGHT,
                        reason=f"destroyed by us {duration(snapshot.now - destroy.since)} ago; no longer "
                               "paid; the next cloud listing confirms it")
    if destroy is not None and not (f.held or unsure):
        return Decision(facts=f, blocked=Blocked.IN_FLIGHT,
                        reason=f"destroy under way for {duration(snapshot.now - destroy.since)}")
    if f.held:
        return Decision(facts=f, blocked=Blocked.HELD, reason="held by an operator: no action")
    if conflict:
        return Decision(facts=f, blocked=Blocked.ID_CONFLICT, reason=(
            f"left alone (matrix says {f.maction}) until the worker's instance id is fixed: {f.cls.why}"))
    if unsure:
        return Decision(facts=f, blocked=Blocked.AMBIGUOUS, reason=(
            f"left alone (matrix says {f.maction}) until one worker matches it: {f.cls.why}"))
    if f.foreign:
        # theirs, whatever the matrix, our old drain tag or an operator's forced drain say
        return Decision(facts=f, blocked=Blocked.FOREIGN_DRAIN, reason=f"left alone (matrix says {f.maction}): {f.cls.why}")
    ws = f.core_state
    silent = ws == DOWN and f.lost
    if (f.maction is Action.START_SHUTDOWN and (ws == UNPAIRED or silent)
            and f.node.id in snapshot.unconfirmed):
        # a late or old ad is no proof the node is gone: this process's fresh polls must show it
        what = "silence of its worker" if silent else "missing scheduler record"
        return Decision(facts=f, blocked=Blocked.UNCONFIRMED, reason=(
            f"matrix says START_SHUTDOWN, but the {what} is not confirmed yet by this "
            f"process's fresh polls (node_stale_after): {f.cls.why}"))
    if mine and f.our_drain is None:
        cancel = mine.get("cancel_drain")
        if cancel is not None:
            return Decision(facts=f, reason=f"cancel of our drain under way for {duration(snapshot.now - cancel.since)}")
    return None
