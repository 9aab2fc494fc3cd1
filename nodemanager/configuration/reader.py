"""Reading typed options out of a parsed INI file, collecting every problem with its file, line,
section and option, so all are reported at once."""

from __future__ import annotations

import configparser
import difflib
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from nodemanager.configuration.options import SECRET_OPTIONS

__all__ = ["Problem", "ConfigError", "Reader", "suggest"]


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    section: str
    option: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        what = f"[{self.section}]" + (f" {self.option}" if self.option else "")
        return f"{where}: {what}: {self.message}"


class ConfigError(Exception):
    """The configuration is unusable. ``problems`` lists every error found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in problems))


def _option_lines(text: str) -> dict[tuple[str, str | None], int]:
    """Line numbers of each ``[section]`` header and ``option`` in an INI text."""
    lines: dict[tuple[str, str | None], int] = {}
    section = ""
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or s[0] in "#;" or raw[:1].isspace():
            continue
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1].strip()
            lines.setdefault((section, None), n)
        else:
            name = re.split(r"[=:]", s, maxsplit=1)[0].strip().lower()
            lines.setdefault((section, name), n)
    return lines


def suggest(word: str, known: Any) -> str:
    """A "did you mean" hint for a misspelled name, else the list of known names."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return " (known: " + (", ".join(sorted(known)) or "none") + ")"


class Reader:
    """Collects problems while reading typed options out of a parsed INI file."""

    def __init__(self, cp: configparser.ConfigParser, source: str, text: str) -> None:
        self.cp = cp
        self.source = source
        self.lines = _option_lines(text)
        self.problems: list[Problem] = []

    def problem(self, section: str, option: str | None, message: str, *,
                at: tuple[str, str | None] | None = None) -> None:
        """Record a problem at the option's line, else its section's, else the line ``at``."""
        line = (self.lines.get((section, option)) or self.lines.get((section, None))
                or (self.lines.get(at) if at else None))
        self.problems.append(Problem(self.source, line, section, option, message))

    def typed(self, section: str, schema: Mapping[str, Callable[[str], Any]],
              *, open_ended: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if not self.cp.has_section(section):
            return out
        for option, raw in self.cp.items(section, raw=True):
            parse = schema.get(option)
            if parse is None:
                if not open_ended:
                    self.problem(section, option, "unknown option" + suggest(option, schema))
                continue
            try:
                out[option] = parse(raw)
            except ValueError as exc:
                shown = ("(hidden)" if option in SECRET_OPTIONS else repr(raw) if len(raw) <= 60
                         else f"{raw[:40]!r}... ({len(raw)} characters)")
                self.problem(section, option, f"{exc}, got {shown}")
        return out
