"""One JSON file of the state dir per memory: written whole and atomically (a temporary file, then
a rename), read back at start. A missing file is an empty memory; an unreadable or malformed one
is set aside (:mod:`nodemanager.store.state_files`) and the memory starts empty (the daemon never
stops for it)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Protocol, TypeVar

from nodemanager.store.state_files import may_write, read_state

__all__ = ["save_json", "load_json", "Keeper", "FileKeeper", "FILES"]

log = logging.getLogger("nodemanager.controller")

T = TypeVar("T")


def save_json(path: str, doc: Any, what: str) -> bool:
    """Write ``doc`` to ``path`` atomically; False (one warning naming ``what`` and the file) when
    it cannot be written."""
    if not may_write(path):
        return False
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
    """``parse`` of the JSON in ``path``; None when the file is missing, or when it cannot be read,
    is not JSON or ``parse`` rejects it (then it is set aside, naming it)."""
    return read_state(path, lambda text: parse(json.loads(text)), what)


class Keeper(Protocol):
    """Where the controller's memories are kept, each under its ``kind`` (``path``: its JSON file)."""

    def save(self, kind: str, path: str, doc: Any, what: str) -> bool: ...

    def load(self, kind: str, path: str, parse: Callable[[Any], T], what: str) -> T | None: ...


class FileKeeper:
    """Where a memory is kept: its own JSON file (``path``); the store's keeper
    (:class:`nodemanager.cycle.store_keeper.StoreKeeper`) keeps it as ``kind`` in the store instead."""

    def save(self, kind: str, path: str, doc: Any, what: str) -> bool:
        return save_json(path, doc, what)

    def load(self, kind: str, path: str, parse: Callable[[Any], T], what: str) -> T | None:
        return load_json(path, parse, what)


FILES = FileKeeper()
