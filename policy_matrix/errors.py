"""Diagnostics of the matrix language: where a problem is and what it is.

``MatrixError`` is the only exception the parser, loader, importer and ``MatrixSource`` raise
for bad input. It carries every error found (``.errors``), the first one being its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

__all__ = ["Diagnostic", "MatrixError", "ERROR", "WARNING"]

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    """One problem at ``file:line:column`` (1-based; line 0 means "the file as a whole")."""

    file: str
    line: int
    column: int
    message: str
    severity: str = ERROR

    @property
    def location(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.column}"

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"

    def format(self) -> str:
        """The compiler-style line a CLI prints: ``file:line:col: error: message``."""
        return f"{self.location}: {self.severity}: {self.message}"


class MatrixError(Exception):
    """A matrix file (or dict import) that cannot be used.

    ``str()`` is ``file:line:col: message`` for the first error; ``.errors`` holds all of them
    as ``Diagnostic`` values, in file order.
    """

    def __init__(self, file: str, line: int, column: int, message: str,
                 errors: Iterable[Diagnostic] = ()) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.errors: tuple[Diagnostic, ...] = tuple(errors) or (Diagnostic(file, line, column, message),)
        super().__init__(str(self.errors[0]))

    @classmethod
    def from_diagnostics(cls, diagnostics: Iterable[Diagnostic]) -> "MatrixError":
        """One error carrying all ``diagnostics`` (at least one), each reported as an error."""
        items = [d if d.severity == ERROR else replace(d, severity=ERROR) for d in diagnostics]
        first = items[0]
        return cls(first.file, first.line, first.column, first.message, items)

    def __str__(self) -> str:
        return str(self.errors[0])
