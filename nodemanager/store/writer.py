"""The store's writer: one thread that writes what the controller hands it, off the decision path.

:meth:`StoreWriter.submit` never waits: it merges the changes into what is pending and wakes the
thread. The thread writes everything pending in one transaction; when the store fails (a full disk,
a lock held too long, a database down), what it could not write stays pending, up to
``bound`` records (past it the oldest events are dropped, and counted), and is written when the
store comes back. A write is acknowledged (``written``) only once committed. The same thread prunes
each kind past its retention, ``prune_batch`` records at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from nodemanager.store.port import Changes, StoreError

__all__ = ["StoreWriter", "StoreHealth", "BOUND"]

log = logging.getLogger("nodemanager.store")

BOUND = 200_000          # records kept pending while the store fails
RETRY = (1.0, 30.0)      # seconds between tries while it fails: first, longest
PRUNE_EVERY = 60.0       # seconds between pruning rounds


@dataclass(frozen=True)
class StoreHealth:
    """How the store is doing, for the page and the metrics."""

    name: str
    ok: bool                       # the last write (or the start) succeeded
    pending: int                   # records waiting to be written
    dropped: int                   # records dropped since start (the buffer was full)
    written: int                   # records written since start
    bound: int = BOUND             # records kept pending at most
    error: str = ""                # the last failure, in words
    failing_since: float | None = None
    note: str = ""                 # what happened at start (a store set aside, JSON files imported)


class StoreWriter:
    """Writes :class:`~nodemanager.store.port.Changes` to ``store`` on its own thread."""

    def __init__(self, store: Any, *, clock: Callable[[], float] = time.time, bound: int = BOUND,
                 retention: Mapping[str, float] | None = None, prune_batch: int = 500,
                 retry: tuple[float, float] = RETRY, note: str = "") -> None:
        self.store = store
        self.clock = clock
        self.bound = bound
        self.retention = dict(retention or {})
        self.prune_batch = prune_batch
        self.retry = retry
        self.note = note
        self._cond = threading.Condition()
        self._pending = Changes()
        self._busy = 0                  # records being written now
        self._dropped = self._written = 0
        self._error = ""
        self._failing_since: float | None = None
        self._stop = False
        self._pruned_at: float | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> StoreWriter:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)
            self._thread.start()
        return self

    def submit(self, changes: Changes) -> None:
        """Add ``changes`` to what is pending (never waits on the store)."""
        if not len(changes):
            return
        with self._cond:
            self._pending.merge(changes)
            self._bound()
            self._cond.notify()

    def flush(self, timeout: float) -> bool:
        """Wait until everything submitted so far is written (True) or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify()
            while len(self._pending) or self._busy:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def stop(self, timeout: float = 5.0) -> bool:
        """Write what is pending (up to ``timeout`` seconds), stop the thread and close the store;
        False when something was left unwritten (it is logged)."""
        done = self.flush(timeout)
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)
        if not done:
            log.error("store %s: %d record(s) not written at stop: %s", self.store.name, len(self._pending),
                      self._error or "time ran out")
        self.store.close()
        return done

    def health(self) -> StoreHealth:
        with self._cond:
            return StoreHealth(name=self.store.name, ok=not self._error, pending=len(self._pending) + self._busy,
                               dropped=self._dropped, written=self._written, bound=self.bound, error=self._error,
                               failing_since=self._failing_since, note=self.note)

    # -- the thread -------------------------------------------------------------------------------
    def _bound(self) -> None:
        over = len(self._pending) - self.bound
        if over > 0:
            cut = min(over, len(self._pending.events))
            del self._pending.events[:cut]
            self._dropped += cut
            if cut:
                log.error("store %s: %d event(s) dropped: %d records already wait for the store (%s)",
                          self.store.name, cut, self.bound, self._error or "it is slow")

    def _run(self) -> None:
        wait = self.retry[0]
        while True:
            with self._cond:
                while not self._stop and not len(self._pending) and not self._prune_due():
                    self._cond.wait(PRUNE_EVERY)
                if self._stop:
                    return
                batch, self._pending = self._pending, Changes()
                self._busy = len(batch)
            try:
                if len(batch):
                    self.store.ready()
                    self.store.apply(batch)
                self._prune()
            except StoreError as exc:
                with self._cond:
                    batch.merge(self._pending)
                    self._pending, self._busy = batch, 0
                    self._bound()
                    if not self._error:
                        self._failing_since = self.clock()
                        log.error("store %s: cannot write (%s): %d record(s) kept in memory until it can",
                                  self.store.name, exc, len(batch))
                    self._error = str(exc)
                    deadline = time.monotonic() + wait
                    while not self._stop and time.monotonic() < deadline:   # a stop ends the wait
                        self._cond.wait(deadline - time.monotonic())
                wait = min(wait * 2, self.retry[1])
                continue
            with self._cond:
                self._written += self._busy
                self._busy = 0
                if self._error:
                    log.warning("store %s: writing again (failing since %s)", self.store.name,
                                time.strftime("%H:%M:%S", time.gmtime(self._failing_since or 0)))
                self._error, self._failing_since, wait = "", None, self.retry[0]
                self._cond.notify_all()

    def _prune_due(self) -> bool:
        return bool(self.retention) and (self._pruned_at is None or self.clock() - self._pruned_at >= PRUNE_EVERY)

    def _prune(self) -> None:
        if not self._prune_due():
            return
        now = self.clock()
        self._pruned_at = now
        for kind, keep in self.retention.items():
            if keep > 0:
                for _ in range(20):    # at most 20 small transactions a round; the rest next round
                    if self.store.prune(kind, now - keep, self.prune_batch) < self.prune_batch:
                        break
