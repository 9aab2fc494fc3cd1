"""The store's port: what the daemon keeps and asks of it, whichever database holds it.

A :class:`Changes` is what changed in one cycle (node lives, events, gone nodes, memories); a store
applies one in one transaction, all or nothing. Reads are queries over indexes: the spend of a
window, one node's events, the lives still open, one memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from nodemanager.core.attribution import NodeUse, SpendRow
from nodemanager.model import JobOwner

__all__ = ["Store", "Changes", "Life", "StoreError", "StoreTooNew", "KINDS"]

KINDS = ("ledger", "events", "gone", "actions")   # what retention prunes, each by its own age


class StoreError(Exception):
    """The store cannot be opened or used; the message names it."""


class StoreTooNew(StoreError, ValueError):
    """The store was written by a newer daemon (a schema this one does not know)."""


@dataclass(frozen=True)
class Life:
    """One node's life as the ledger keeps it: its use, whether it is over, and (while it is not)
    the jobs last seen on it, charged for the time until it is next seen."""

    use: NodeUse
    closed: bool
    jobs: tuple[JobOwner, ...] = ()


@dataclass
class Changes:
    """What changed since the last write: merged while it waits, written in one transaction."""

    lives: dict[str, Life] = field(default_factory=dict)
    events: list[tuple[str, float, str, str]] = field(default_factory=list)   # node, at, kind, text
    gone: dict[str, tuple[float, str]] = field(default_factory=dict)          # node -> (at, info JSON)
    memories: dict[str, tuple[str, float]] = field(default_factory=dict)      # kind -> (JSON, at)
    marks: dict[str, str] = field(default_factory=dict)                       # meta key -> value
    # the actuator's destroys (by node id) and boots (by request id): (kind, key) -> when; None forgets it
    actions: dict[tuple[str, str], float | None] = field(default_factory=dict)

    def merge(self, newer: Changes) -> None:
        """Add ``newer`` on top of this (a later state of a life or memory replaces the earlier)."""
        self.lives.update(newer.lives)
        self.events.extend(newer.events)
        self.gone.update(newer.gone)
        self.memories.update(newer.memories)
        self.marks.update(newer.marks)
        self.actions.update(newer.actions)

    def __len__(self) -> int:
        return len(self.lives) + len(self.events) + len(self.gone) + len(self.memories) + len(self.marks) \
            + len(self.actions)


class Store(Protocol):
    """One database of what the daemon remembers (:mod:`nodemanager.store.sqlite`,
    :mod:`nodemanager.store.postgres`). Writes come from one thread; reads from any."""

    name: str

    def apply(self, changes: Changes) -> None:
        """Write ``changes`` in one transaction; raises :class:`StoreError` (nothing written)."""

    def open_lives(self) -> list[Life]:
        """The lives not closed yet (the ledger resumes them at start)."""

    def uses(self, since: float, until: float) -> list[NodeUse]:
        """Every life that overlaps [``since``, ``until``]."""

    def spend(self, since: float, until: float, by: str, closed_only: bool = False) -> list[SpendRow]:
        """:func:`nodemanager.core.attribution.attribute` of :meth:`uses` (of the closed lives only
        with ``closed_only``), summed in the database; ``by`` may also be ``node``."""

    def events(self, node_id: str, since: float | None = None,
               limit: int | None = None) -> list[tuple[float, str, str]]:
        """``node_id``'s events since ``since``, oldest first (the last ``limit`` of them)."""

    def gone_since(self, since: float) -> list[tuple[str, float, dict[str, Any]]]:
        """The nodes gone since ``since``: (node id, when, info), latest first."""

    def memory(self, kind: str) -> str | None:
        """The JSON last written for memory ``kind``, None if never."""

    def actions(self, since: float) -> dict[str, dict[str, float]]:
        """The actuator's actions at or after ``since``: kind (``destroy``, ``boot``) -> key -> when."""

    def mark(self, key: str) -> str | None:
        """A meta value (the schema version, a JSON file imported)."""

    def prune(self, kind: str, before: float, batch: int) -> int:
        """Delete up to ``batch`` records of ``kind`` (:data:`KINDS`) older than ``before``; how many."""

    def counts(self) -> Mapping[str, int]:
        """How many records of each kind (for the page and the benchmark)."""

    def close(self) -> None:
        """Close every connection."""

