"""The words of the policy matrix: its four dimensions, their values and the actions.

Spelled as the Arvados policy matrix page spells them. The vocabulary is data: :data:`DEFAULT_VOCABULARY` is
read from the shipped ``default.vocabulary`` file (:func:`parse_vocabulary` gives its format); a
new value (say a ``fail`` worker state) is a word there or :meth:`Vocabulary.extended`, and the
parser, validator, compiler, renderers and planner pick it up without other changes. The named
constants below are the words the core's own rules use (stale contact is ``down``, no worker is
``unpaired``...); the shipped file must keep them.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass, fields
from itertools import product
from typing import Iterator

from policy_matrix.errors import Diagnostic, MatrixError

__all__ = [
    "Action",
    "Dimension",
    "StateTuple",
    "Vocabulary",
    "DEFAULT_VOCABULARY",
    "parse_vocabulary",
    "load_vocabulary",
    "default_vocabulary_path",
    "DIMENSIONS",
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
    """What the matrix asks for. ``NONE`` is written ``None`` in files, as on the Arvados page."""

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
    """The dimensions (in column order) and the actions a matrix may use.

    ``like`` pairs each worker_state added to the core's own (``fail``) with the core state it is
    treated like outside the matrix (``down``: no capacity, not counted up, destroyed without a
    drain); :meth:`core_state` reads it.
    """

    dimensions: tuple[Dimension, ...]
    actions: tuple[Action, ...] = tuple(Action)
    like: tuple[tuple[str, str], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    def all_tuples(self) -> Iterator[StateTuple]:
        """Every tuple of the product, in the vocabulary's order."""
        for values in product(*(d.values for d in self.dimensions)):
            yield StateTuple(*values)

    def core_state(self, worker_state: str) -> str:
        """The core's word for ``worker_state``: itself, or the core state an added one is like."""
        for state, like in self.like:
            if state == worker_state:
                return like
        return worker_state

    def with_worker_state(self, state: str, like: str) -> Vocabulary:
        """This vocabulary with the worker_state ``state`` added (last), treated ``like`` one of
        the core's (``unpaired``, ``busy``, ``idle``, ``down``) outside the matrix."""
        if like not in _CORE_WORDS["worker_state"]:
            raise ValueError(f"{state!r} must be like one of {', '.join(_CORE_WORDS['worker_state'])}")
        return Vocabulary(tuple(Dimension(d.name, (*d.values, state)) if d.name == "worker_state"
                                else d for d in self.dimensions),
                          self.actions, (*self.like, (state, like)))

    @property
    def size(self) -> int:
        n = 1
        for d in self.dimensions:
            n *= len(d.values)
        return n


DIMENSIONS: tuple[str, ...] = tuple(f.name for f in fields(StateTuple))
DEFAULT_VOCABULARY_FILE = "default.vocabulary"
# matrix syntax: a value holding one of these could not be written in a rule
_SYNTAX = re.compile(r"[|,*#]|->")
_LIKE = re.compile(r"(.*?)\s*\(\s*like\s+([^()]*?)\s*\)")
_CORE_WORDS = {"worker_state": (UNPAIRED, BUSY, IDLE, DOWN), "window": (OPEN, CLOSED),
               "boot_grace": (BOOT_WAIT, BOOT_EXCEEDED),
               "idle_grace": (NOT_IDLE, IDLE_WAIT, IDLE_EXCEEDED)}


def parse_vocabulary(text: str, filename: str = "<vocabulary>") -> Vocabulary:
    """A vocabulary from its text: one ``dimension: value, value, ...`` line per dimension, in
    column order (``#`` starts a comment). The dimensions are the four of :class:`StateTuple`,
    each with the core's own words; only ``worker_state`` may add values, each written
    ``fail (like down)``: the core state it is treated like. Raises ``MatrixError`` naming
    ``file:line:column``."""
    errors: list[Diagnostic] = []
    dims: list[Dimension] = []
    like: list[tuple[str, str]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        column = len(line) - len(line.lstrip()) + 1
        name, colon, rest = line.strip().partition(":")
        name = name.strip()
        expected = DIMENSIONS[len(dims)] if len(dims) < len(DIMENSIONS) else None
        if not colon:
            errors.append(Diagnostic(filename, number, column,
                                     "expected 'dimension: value, value, ...'"))
            continue
        if name != expected:
            errors.append(Diagnostic(filename, number, column, (
                f"expected dimension {expected!r}" if expected else f"unexpected dimension {name!r}")
                + f" (the dimensions, in order: {', '.join(DIMENSIONS)})"))
            continue
        values, added, problem = _values(name, rest)
        if problem:
            errors.append(Diagnostic(filename, number, column + line.strip().index(":") + 1,
                                     f"{name}: {problem}"))
            continue
        dims.append(Dimension(name, values))
        like.extend(added)
    if not errors and len(dims) < len(DIMENSIONS):
        errors.append(Diagnostic(filename, 0, 0, f"missing dimension(s): "
                                                 f"{', '.join(DIMENSIONS[len(dims):])}"))
    if errors:
        raise MatrixError.from_diagnostics(errors)
    return Vocabulary(tuple(dims), like=tuple(like))


def _values(name: str, text: str) -> tuple[tuple[str, ...], list[tuple[str, str]], str | None]:
    """One dimension's values, its added worker states with the core state each is like, and
    what is wrong with them (None: nothing)."""
    values: list[str] = []
    added: list[tuple[str, str]] = []
    core = _CORE_WORDS[name]
    for item in (v.strip() for v in text.split(",")):
        found = _LIKE.fullmatch(item)
        value = found.group(1).strip() if found else item
        if not value or _SYNTAX.search(value) or "(" in value or ")" in value:
            return (), [], f"empty value or one holding matrix syntax (| , * # -> ( )): {item!r}"
        if value in values:
            return (), [], f"{value!r} given twice"
        if value not in core:
            if name != "worker_state":
                return (), [], (f"{value!r} is not one of the core's ({', '.join(core)}): the core "
                                f"computes this dimension, only worker_state may grow")
            if not found or found.group(2) not in core:
                return (), [], (f"say which of {', '.join(core)} the core treats {value!r} like: "
                                f"'{value} (like down)'")
            added.append((value, found.group(2)))
        elif found:
            return (), [], f"{value!r} is the core's own: it is like itself"
        values.append(value)
    missing = [w for w in core if w not in values]
    if missing:
        return (), [], f"must keep {', '.join(missing)}: the core's own rules use them"
    return tuple(values), added, None


def load_vocabulary(path: str) -> Vocabulary:
    """The vocabulary file at ``path`` (see :func:`parse_vocabulary`)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise MatrixError(path, 0, 0, f"cannot read the vocabulary: {e}") from None
    return parse_vocabulary(text, path)


def default_vocabulary_path() -> str:
    """File system path of the vocabulary shipped in the package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), DEFAULT_VOCABULARY_FILE)


DEFAULT_VOCABULARY = load_vocabulary(default_vocabulary_path())
