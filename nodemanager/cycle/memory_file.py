"""One JSON file of the state dir per memory: written whole and atomically (a temporary file, then
a rename), read back at start. A missing file is an empty memory; an unreadable or malformed one
is one warning naming the file, and the memory starts empty (the daemon never stops for it)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Protocol, TypeVar

__all__ = ["save_json", "load_json", "Keeper", "FileKeeper", "FILES"]

log = logging.getLogger("nodemanager.controller")

T = TypeVar("T")


def save_json(path: str, doc: Any, what: str) -> bool:
    """Write ``doc`` to ``path`` atomically; False (one warning naming ``what`` and the file) when
    it cannot be written."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError) as exc:
        log.warning("cannot keep the %s in %s: %s", what, path, exc)
        return False
    return True


def load_json(path: str, parse: Callable[[Any], T], what: str) -> T | None:
    """``parse`` of the JSON in ``path``; None when the file is missing, or (one warning naming the
    file and what is wrong) when it cannot be read, is not JSON or ``parse`` rejects it."""
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return parse(doc)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        log.warning("%s: unreadable (%s: %s); the %s starts empty", path, type(exc).__name__, exc, what)
        return None


class Keeper(Protocol):
    """Where the controller's memories are kept, each under its ``kind`` (``path``: its JSON file)."""

    def save(self, kind: str, path: str, doc: Any, what: str) -> bool: ...

    def load(self, kind: str, path: str, parse: Callable[[Any], T], what: str) -> T | None: ...


class FileKeeper:
    """Where a memory is kept: its own JSON file (``path``); the store's keeper
    (:class:`nodemanager.store.keeper.StoreKeeper`) keeps it as ``kind`` in the store instead."""

    def save(self, kind: str, path: str, doc: Any, what: str) -> bool:
        return save_json(path, doc, what)

    def load(self, kind: str, path: str, parse: Callable[[Any], T], what: str) -> T | None:
        return load_json(path, parse, what)


FILES = FileKeeper()
