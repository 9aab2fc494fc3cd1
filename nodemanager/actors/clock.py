"""Time for the actors: a clock that also runs timers, injected so tests never sleep.

Both clocks are callables returning epoch (wall) seconds, for what people read and for comparing
with cloud and scheduler timestamps; ``monotonic()`` is the clock every interval, wait, backoff
and age is measured on, so a step of the wall clock (NTP, a VM resume, an operator) neither
stalls nor hurries anything. They offer ``call_at(when, fn)`` (``when`` in wall seconds) /
``call_later(delay, fn)`` (returning a handle for ``cancel``); timers run on the monotonic clock.
Timer callbacks must be quick (they only send actor messages); they run on the clock's own
thread (:class:`RealClock`) or in the thread that calls :meth:`ManualClock.advance`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable, Protocol

from nodemanager.core.clocks import monotonic_of

__all__ = ["Clock", "ManualClock", "RealClock", "monotonic_of"]

log = logging.getLogger(__name__)


class Clock(Protocol):
    def __call__(self) -> float: ...

    def monotonic(self) -> float: ...

    def call_at(self, when: float, fn: Callable[[], object]) -> int: ...

    def call_later(self, delay: float, fn: Callable[[], object]) -> int: ...

    def cancel(self, handle: int) -> None: ...


class _Timers:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], object]]] = []
        self._cancelled: set[int] = set()
        self._seq = itertools.count(1)

    def __call__(self) -> float:
        raise NotImplementedError

    def monotonic(self) -> float:
        raise NotImplementedError

    def _push(self, at: float, fn: Callable[[], object]) -> int:
        """Run ``fn`` at monotonic time ``at``."""
        with self._lock:
            handle = next(self._seq)
            heapq.heappush(self._heap, (at, handle, fn))
            self._lock.notify()
            return handle

    def call_at(self, when: float, fn: Callable[[], object]) -> int:
        """Run ``fn`` at wall time ``when`` (converted once, now: a later step does not move it)."""
        return self._push(self.monotonic() + (when - self()), fn)

    def call_later(self, delay: float, fn: Callable[[], object]) -> int:
        return self._push(self.monotonic() + max(0.0, delay), fn)

    def cancel(self, handle: int) -> None:
        with self._lock:
            self._cancelled.add(handle)

    def _pop_due(self, now: float) -> tuple[float, Callable[[], object]] | None:
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                when, handle, fn = heapq.heappop(self._heap)
                if handle in self._cancelled:
                    self._cancelled.discard(handle)
                    continue
                return when, fn
            return None

    @staticmethod
    def _fire(fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception:  # a timer callback must never kill the clock
            log.exception("timer callback %r failed", fn)


class ManualClock(_Timers):
    """A clock that moves only when a test calls :meth:`advance` (due timers fire in time order);
    :meth:`step_wall` steps the wall time alone, as NTP or an operator would."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        super().__init__()
        self._now = start
        self._wall_offset = 0.0

    def __call__(self) -> float:
        return self._now + self._wall_offset

    def monotonic(self) -> float:
        return self._now

    def step_wall(self, seconds: float) -> float:
        """Step the wall time by ``seconds`` (back when negative); monotonic time and timers stay."""
        self._wall_offset += seconds
        return self()

    def advance(self, seconds: float = 0.0) -> float:
        """Move time forward by ``seconds``, firing every timer that falls due, at its own time."""
        end = self._now + seconds
        while True:
            due = self._pop_due(end)
            if due is None:
                break
            self._now = max(self._now, due[0])
            self._fire(due[1])
        self._now = end
        return self()

    def pending(self) -> int:
        """How many timers are scheduled (cancelled ones included until they fall due)."""
        with self._lock:
            return len(self._heap)


class RealClock(_Timers):
    """Wall-clock time with one timer thread (started by :meth:`start`, ended by :meth:`stop`).

    Timers run on the monotonic clock, so a wall-clock step (NTP, a VM resume) neither delays
    nor bunches them.
    """

    def __init__(self) -> None:
        super().__init__()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def __call__(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def start(self) -> "RealClock":
        self._thread = threading.Thread(target=self._run, name="nodemanager-timer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                wait = self._heap[0][0] - time.monotonic() if self._heap else 60.0
                if wait > 0:
                    self._lock.wait(timeout=min(wait, 60.0))
                    continue
            due = self._pop_due(time.monotonic())
            if due is not None:
                self._fire(due[1])
