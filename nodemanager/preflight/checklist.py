"""The checklist ``nodemanager check`` prints and ``nodemanager run`` logs at start: one
:class:`Check` per item, with the fix an operator should make when it failed."""

from __future__ import annotations

import logging
from dataclasses import dataclass

__all__ = ["Check", "render", "log_checks"]


@dataclass(frozen=True)
class Check:
    """One line of the checklist. ``ok`` None: could not be decided (a warning, not a failure)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


def log_checks(checks: list[Check], logger: logging.Logger) -> None:
    """One log line per check: INFO when it passed, WARNING undecided, ERROR failed (with the fix)."""
    for c in checks:
        level = {True: logging.INFO, None: logging.WARNING, False: logging.ERROR}[c.ok]
        fix = f"; fix: {c.fix}" if c.fix and c.ok is not True else ""
        logger.log(level, "preflight %s: %s%s", c.name, c.detail, fix)


def render(checks: list[Check]) -> str:
    """The checklist as an operator reads it: one line per check, its fix indented below."""
    marks = {True: "ok  ", False: "FAIL", None: "warn"}
    lines = []
    for c in checks:
        lines.append(f"[{marks[c.ok]}] {c.name}: {c.detail}")
        if c.fix and c.ok is not True:
            lines.append(f"       fix: {c.fix}")
    failed = sum(c.ok is False for c in checks)
    lines.append(f"{len(checks)} checks, {failed} failed" if failed else f"{len(checks)} checks passed")
    return "\n".join(lines)
