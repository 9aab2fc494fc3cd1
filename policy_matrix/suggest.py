"""Nearest valid word for a misspelt one ("did you mean 'idle exceeded'?")."""

from __future__ import annotations

from typing import Sequence

__all__ = ["suggest", "quote"]

MAX_ECHO = 40


def quote(word: str) -> str:
    """``word`` in single quotes for a message, shortened when it is long."""
    if len(word) > MAX_ECHO:
        word = word[:MAX_ECHO] + "..."
    return f"'{word}'"


def suggest(word: str, choices: Sequence[str]) -> str | None:
    """The choice ``word`` most likely meant, or None when nothing is close."""
    import difflib

    if len(word) > 4 * MAX_ECHO:
        return None
    lowered = {c.lower(): c for c in choices}
    key = " ".join(word.lower().replace("_", " ").split())
    for c in choices:
        if " ".join(c.lower().replace("_", " ").split()) == key:
            return c
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    if close:
        return lowered[close[0]]
    containing = [c for c in choices if key and key in c.lower().replace("_", " ")]
    if len(containing) == 1:
        return containing[0]
    return None
