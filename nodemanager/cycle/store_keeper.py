"""The controller's memories (runtimes, reclaim rates, breakers, consolidation back-off) and the
admin state, kept in the store: each a small document under its kind, written through the writer
when it changed and read back at start. A JSON file of an older release is read once when the
store has nothing under that kind yet, written to the store, and left in place."""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, TypeVar

from nodemanager.cycle.memory_file import load_json
from nodemanager.store.port import Changes, StoreError

__all__ = ["StoreKeeper", "AdminBacking"]

log = logging.getLogger("nodemanager.store")

T = TypeVar("T")


class StoreKeeper:
    """:class:`nodemanager.cycle.memory_file.FileKeeper`'s interface over the store."""

    def __init__(self, store: Any, submit: Callable[[Changes], None], clock: Callable[[], float]) -> None:
        self.store, self.submit, self.clock = store, submit, clock

    def save(self, kind: str, path: str, doc: Any, what: str) -> bool:
        try:
            text = json.dumps(doc, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            log.warning("cannot keep the %s: %s", what, exc)
            return False
        self.submit(Changes(memories={kind: (text, self.clock())}))
        return True

    def load(self, kind: str, path: str, parse: Callable[[Any], T], what: str) -> T | None:
        try:
            text = self.store.memory(kind)
        except StoreError as exc:
            log.warning("the %s cannot be read from the store (%s): it starts empty", what, exc)
            return None
        if text is None:
            found = load_json(path, parse, what) if path and os.path.exists(path) else None
            if found is not None:
                with open(path, encoding="utf-8") as f:   # read again as it is: the store keeps the same text
                    self.save(kind, path, json.load(f), what)
                log.info("%s: the %s imported into the store (the file stays, no longer read)", path, what)
            return found
        try:
            return parse(json.loads(text))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            log.warning("%s: the %s is unreadable (%s: %s); it starts empty", self.store.name, what,
                        type(exc).__name__, exc)
            return None


class AdminBacking:
    """The admin state's backing (``read()``, ``write(text)``, ``name``) in the store: a change an
    operator makes is committed before it is answered. ``path``: the older ``state_file``, imported
    once."""

    def __init__(self, store: Any, clock: Callable[[], float], path: str = "") -> None:
        self.store, self.clock, self.path = store, clock, path
        self.name = f"{store.name} (admin state)"

    def read(self) -> str | None:
        try:
            text = self.store.memory("admin")
        except StoreError as exc:
            raise OSError(str(exc)) from exc
        if text is None and self.path and os.path.exists(self.path):
            from nodemanager.console.admin import AdminState
            AdminState(path=self.path)   # AdminStateError naming the file: nothing bad is imported
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
            self.write(text)
            log.info("%s: the admin state imported into the store (the file stays, no longer read)", self.path)
        return text

    def write(self, text: str) -> None:
        try:
            self.store.ready()
            self.store.apply(Changes(memories={"admin": (text, self.clock())}))
        except StoreError as exc:
            raise OSError(str(exc)) from exc
