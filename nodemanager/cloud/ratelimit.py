"""A token bucket that spaces cloud API calls to at most ``rate`` per second.

The clock and the sleep are injected so tests run without waiting.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """Allow ``rate`` calls per second on average, with bursts of up to ``burst`` calls.

    ``rate`` 0 (or less) means no limit. :meth:`acquire` blocks (through ``sleep``) until a token is
    free; it is safe to call from several threads.
    """

    def __init__(self, rate: float, burst: float | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = float(rate)
        self.burst = max(1.0, float(burst if burst is not None else max(rate, 1.0)))
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._stamp = clock()
        self._lock = threading.Lock()

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def acquire(self) -> float:
        """Take one token, sleeping until one is free; returns the seconds waited."""
        if self.rate <= 0:
            return 0.0
        with self._lock:
            self._refill(self._clock())
            self._tokens -= 1.0
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait
