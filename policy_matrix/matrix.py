"""The compiled matrix: rules as written, and an O(1) table from state tuple to the matching rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import Iterable, Iterator, Mapping

from policy_matrix.errors import Diagnostic
from policy_matrix.vocabulary import DEFAULT_VOCABULARY, Action, StateTuple, Vocabulary

__all__ = ["Rule", "Match", "Matrix", "WILDCARD"]

WILDCARD = "*"


@dataclass(frozen=True)
class Rule:
    """One line of a matrix file.

    ``pattern`` holds one value per dimension, ``"*"`` for any value. ``text`` is the rule as
    written (without its comment); ``comment`` is its trailing comment, or else the comment lines
    right above it.
    """

    file: str
    line: int
    pattern: tuple[str, ...]
    action: Action
    text: str
    comment: str = ""

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def canonical(self) -> str:
        """The rule in normal spacing: ``idle | open | * | idle exceeded -> START_DRAIN``."""
        return " | ".join(self.pattern) + f" -> {self.action}"

    def matches(self, state: StateTuple) -> bool:
        return all(p == WILDCARD or p == v for p, v in zip(self.pattern, state.as_tuple()))

    def expand(self, vocabulary: Vocabulary) -> Iterator[StateTuple]:
        """Every tuple of ``vocabulary`` this rule's pattern matches, in vocabulary order."""
        choices = [d.values if p == WILDCARD else (p,)
                   for p, d in zip(self.pattern, vocabulary.dimensions)]
        for values in product(*choices):
            yield StateTuple(*values)


@dataclass(frozen=True)
class Match:
    """The result of a lookup: the action and the rule that gave it."""

    action: Action
    rule: Rule


@dataclass(frozen=True, eq=False)
class Matrix:
    """A validated matrix. Build it with ``policy_matrix.parse`` / ``load`` / ``load_default``.

    ``lookup`` is one dict access. ``sha256`` is the hex digest of the source bytes, ``source``
    the file name errors and rule locations use.
    """

    source: str
    sha256: str
    rules: tuple[Rule, ...]
    table: Mapping[StateTuple, Match] = field(repr=False)
    vocabulary: Vocabulary = DEFAULT_VOCABULARY
    warnings: tuple[Diagnostic, ...] = ()

    def lookup(self, state: StateTuple) -> Match:
        """The action for ``state`` and the rule that decided it (first matching rule)."""
        try:
            return self.table[state]
        except KeyError:
            raise KeyError(f"{state!s} is not a state tuple of this matrix's vocabulary") from None

    def action(self, state: StateTuple) -> Action:
        return self.lookup(state).action

    def entries(self) -> Iterable[tuple[StateTuple, Match]]:
        """Every (tuple, match) pair, in vocabulary order."""
        table = self.table
        return [(t, table[t]) for t in self.vocabulary.all_tuples()]

    def __len__(self) -> int:
        return len(self.table)
