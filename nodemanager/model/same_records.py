"""Records handed back unchanged: an adapter keeps, per node, what its last poll built from the
node's source, and while the source is equal it hands back the very same record. The controller's
reuse of last cycle's work (:mod:`nodemanager.cycle.plan_reuse`) then knows an unchanged node by
identity, without comparing its records field by field.

The check is equality of everything the record is built from, never a change counter: a counter
(HTCondor's ``UpdateSequenceNumber``) is only as good as every writer's increment, and an equal
source can only build an equal record."""

from __future__ import annotations

from operator import attrgetter
from typing import Callable, Generic, Hashable, Iterable, TypeVar

__all__ = ["SameRecords", "node_id"]

node_id = attrgetter("id")  # the key of a listed cloud node

R = TypeVar("R")


class SameRecords(Generic[R]):
    """Per key, the last poll's source and the record built from it. :meth:`get` gives the record
    while the source is equal; :meth:`put` keeps a new one; :meth:`end_poll` forgets the keys the
    poll did not name (a node gone is not kept)."""

    __slots__ = ("_last", "_now")

    def __init__(self) -> None:
        self._last: dict[Hashable, tuple[object, R]] = {}
        self._now: dict[Hashable, tuple[object, R]] = {}

    def get(self, key: Hashable, source: object) -> R | None:
        """Last poll's record for ``key`` when it was built from a source equal to ``source``."""
        kept = self._last.get(key)
        if kept is not None and (kept[0] is source or kept[0] == source):
            self._now[key] = kept
            return kept[1]
        return None

    def put(self, key: Hashable, source: object, record: R) -> R:
        """Keep ``record``, built from ``source``, for the next poll; returns it."""
        self._now[key] = (source, record)
        return record

    def holds(self, key: Hashable, record: R) -> bool:
        """True when ``record`` is the very record last poll kept for ``key``."""
        kept = self._last.get(key)
        return kept is not None and kept[1] is record

    def carry(self, key: Hashable) -> R:
        """Last poll's record for ``key``, kept as it was (its source known unchanged)."""
        kept = self._now[key] = self._last[key]
        return kept[1]

    def same(self, key: Hashable, record: R) -> R:
        """Last poll's record for ``key`` when it equals ``record`` (the record is its own
        source), else ``record``, kept for the next poll."""
        kept = self.get(key, record)
        return kept if kept is not None else self.put(key, record, record)

    def keep(self, records: Iterable[R], key: Callable[[R], Hashable]) -> list[R]:
        """``records``, each equal to last poll's record of its key as that very object; this
        poll's are the ones the next poll compares with (a whole poll: :meth:`end_poll` is done)."""
        out = [self.same(key(r), r) for r in records]
        self.end_poll()
        return out

    def end_poll(self) -> None:
        """This poll's records are the ones the next poll compares with."""
        self._last, self._now = self._now, {}
