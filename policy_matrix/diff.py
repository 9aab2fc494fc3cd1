"""What changes between two matrices, tuple by tuple."""

from __future__ import annotations

from typing import NamedTuple

from policy_matrix.matrix import Matrix
from policy_matrix.vocabulary import Action, StateTuple

__all__ = ["Change", "diff"]


class Change(NamedTuple):
    """A tuple whose action differs: ``(state, old, new)``. ``None`` stands for "not in that matrix"."""

    state: StateTuple
    old: Action | None
    new: Action | None


def diff(old: Matrix, new: Matrix) -> list[Change]:
    """Tuples whose action differs between ``old`` and ``new``, in vocabulary order.

    Tuples present in only one matrix (after a vocabulary change) count as changes, with
    ``None`` on the side that lacks them. Rules that moved but decide the same action do not.
    """
    states = list(old.vocabulary.all_tuples())
    seen = set(states)
    states += [t for t in new.vocabulary.all_tuples() if t not in seen]
    changes = []
    for state in states:
        before = old.table.get(state)
        after = new.table.get(state)
        a = before.action if before else None
        b = after.action if after else None
        if a != b:
            changes.append(Change(state, a, b))
    return changes
