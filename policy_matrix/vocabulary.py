"""The words of the policy matrix: its four dimensions, their values and the actions.

Spelled exactly as seed 004 spells them. The vocabulary is data: a later version adds a value
(say a ``fail`` worker state) by extending a tuple here, and the parser, validator, compiler and
renderers pick it up without other changes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from itertools import product
from typing import Iterator

__all__ = [
    "Action",
    "Dimension",
    "StateTuple",
    "Vocabulary",
    "DEFAULT_VOCABULARY",
    "UNPAIRED", "BUSY", "IDLE", "DOWN",
    "OPEN", "CLOSED",
    "BOOT_WAIT", "BOOT_EXCEEDED",
    "NOT_IDLE", "IDLE_WAIT", "IDLE_EXCEEDED",
]

UNPAIRED, BUSY, IDLE, DOWN = "unpaired", "busy", "idle", "down"
OPEN, CLOSED = "open", "closed"
BOOT_WAIT, BOOT_EXCEEDED = "boot wait", "boot exceeded"
NOT_IDLE, IDLE_WAIT, IDLE_EXCEEDED = "not idle", "idle wait", "idle exceeded"


class Action(enum.Enum):
    """What the matrix asks for. ``NONE`` is written ``None`` in files, as in the seed."""

    NONE = "None"
    START_DRAIN = "START_DRAIN"
    START_SHUTDOWN = "START_SHUTDOWN"

    def __str__(self) -> str:
        return self.value

    def to_json(self) -> str | None:
        """JSON form: ``null`` for None, else the action's name."""
        return None if self is Action.NONE else self.value


@dataclass(frozen=True)
class Dimension:
    name: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StateTuple:
    """A node's state as the matrix sees it: one value of each dimension."""

    worker_state: str
    window: str
    boot_grace: str
    idle_grace: str

    def as_tuple(self) -> tuple[str, str, str, str]:
        return (self.worker_state, self.window, self.boot_grace, self.idle_grace)

    def __str__(self) -> str:
        return "(" + ", ".join(self.as_tuple()) + ")"


@dataclass(frozen=True)
class Vocabulary:
    """The dimensions (in column order) and the actions a matrix may use."""

    dimensions: tuple[Dimension, ...]
    actions: tuple[Action, ...] = tuple(Action)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    def all_tuples(self) -> Iterator[StateTuple]:
        """Every tuple of the product, in the vocabulary's order."""
        for values in product(*(d.values for d in self.dimensions)):
            yield StateTuple(*values)

    @property
    def size(self) -> int:
        n = 1
        for d in self.dimensions:
            n *= len(d.values)
        return n


DEFAULT_VOCABULARY = Vocabulary(
    dimensions=(
        Dimension("worker_state", (UNPAIRED, BUSY, IDLE, DOWN)),
        Dimension("window", (OPEN, CLOSED)),
        Dimension("boot_grace", (BOOT_WAIT, BOOT_EXCEEDED)),
        Dimension("idle_grace", (NOT_IDLE, IDLE_WAIT, IDLE_EXCEEDED)),
    )
)
