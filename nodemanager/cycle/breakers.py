"""The actuator's capacity breakers: the :class:`~nodemanager.core.breaker.Breaker` of each size
between cycles, with one log line per change of state (open, half-open, closed). Transitions
are :mod:`nodemanager.core.breaker`'s; this holds them and the time. Thread-safe."""

from __future__ import annotations

import logging
import threading
from typing import Mapping

from nodemanager.core.breaker import HALF_OPEN, OPEN, Breaker, open_words, state, trip
from nodemanager.text import duration

__all__ = ["Breakers"]

log = logging.getLogger("nodemanager.actuate")


class Breakers:
    """Breakers per size (the actuator opens one only when ``[Cloud] capacity_cooldown`` is set)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, Breaker] = {}
        self._shown: dict[str, str] = {}   # the state last logged per size

    def capacity_error(self, size: str, now: float, error: str, cooldown: float, max_cooldown: float) -> str:
        """Open ``size``'s breaker after a capacity error; the words for the outcome."""
        with self._lock:
            b = self._records[size] = trip(self._records.get(size), now, error, cooldown, max_cooldown)
            self._shown[size] = OPEN
        words = f"size {size} not booted for {duration(b.until - now)} (capacity breaker open)"
        log.warning("size %s: capacity breaker open after %d capacity error(s) in a row: %s; "
                    "next probe boot in %s, demand goes to other sizes meanwhile",
                    size, b.failures, error, duration(b.until - now))
        return words

    def created(self, size: str) -> None:
        """A VM of ``size`` was created: its breaker closes."""
        with self._lock:
            b = self._records.pop(size, None)
            self._shown.pop(size, None)
        if b is not None:
            log.info("size %s: capacity breaker closed: a boot succeeded after %d capacity error(s)",
                     size, b.failures)

    def states(self, now: float) -> tuple[dict[str, str], frozenset[str]]:
        """Open sizes with why, and half-open sizes (one probe boot at a time); logs a breaker
        that turned half-open."""
        opened: dict[str, str] = {}
        probing: set[str] = set()
        turned: list[str] = []
        with self._lock:
            for size, b in self._records.items():
                st = state(b, now)
                if st == OPEN:
                    opened[size] = open_words(size, b, now)
                elif st == HALF_OPEN:
                    probing.add(size)
                    if self._shown.get(size) != HALF_OPEN:
                        self._shown[size] = HALF_OPEN
                        turned.append(size)
        for size in turned:
            log.info("size %s: capacity breaker half-open: one probe boot decides", size)
        return opened, frozenset(probing)

    def records(self) -> Mapping[str, Breaker]:
        with self._lock:
            return dict(self._records)

    def restore(self, records: Mapping[str, Breaker], now: float) -> None:
        """Take back the breakers a previous process left (one log line per breaker not closed)."""
        with self._lock:
            self._records.update(records)
            for size, b in records.items():
                self._shown[size] = state(b, now)
        for size, b in sorted(records.items()):
            if state(b, now) == OPEN:
                log.warning("size %s: capacity breaker still open from before the restart after %d capacity "
                            "error(s) in a row: %s; next probe boot in %s", size, b.failures, b.error,
                            duration(b.until - now))
            else:
                log.info("size %s: capacity breaker half-open from before the restart: one probe boot decides",
                         size)

