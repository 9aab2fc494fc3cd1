"""Which calls of the actuator must wait, and why: retry backoff after failures (doubling from
:data:`INITIAL_BACKOFF`), refusals repeated within :data:`REFUSAL_REPEAT`, calls the scheduler
refused for lack of rights (probed every :data:`PERMISSION_PROBE`), and a cloud's rate limit.
Keys are ``kind:target`` (``drain:i-1``, ``boot:small``). Times are monotonic. Thread-safe."""

from __future__ import annotations

import math
import threading
from typing import Callable

from nodemanager.text import duration

__all__ = ["CallBackoff", "INITIAL_BACKOFF", "REFUSAL_REPEAT", "PERMISSION_PROBE"]

INITIAL_BACKOFF = 10.0          # seconds before the first retry of a failed call
# a refusal this soon after the last one of the same work is a repeated one: it backs off like a
# failure (a node that took a job since the look is refused once, and the next try goes through)
REFUSAL_REPEAT = 600.0
# a call refused for lack of rights is tried again only this often: a probe, not a retry storm
PERMISSION_PROBE = 900.0


class CallBackoff:
    """The waits of the calls of one actuator; ``mono`` its monotonic clock, ``max_backoff`` the
    longest retry backoff (``PollSettings.max_backoff``, read at each failure: a reload applies)."""

    def __init__(self, mono: Callable[[], float], max_backoff: Callable[[], float]) -> None:
        self._mono = mono
        self._max_backoff = max_backoff
        self._lock = threading.Lock()
        self._backoff: dict[str, tuple[int, float]] = {}      # key -> (failures, not before)
        self._refused: dict[str, float] = {}                  # key -> last refused at
        self._denied: dict[str, tuple[str, float]] = {}       # key -> (no permission: why, at)
        self._cloud_wait: dict[str, float] = {}               # cloud name -> rate limit: no call before

    def denials(self) -> dict[str, str]:
        """The scheduler calls (``kind:node id``: drain, cancel, escalate, destroy) whose latest
        try the scheduler refused for lack of rights or credentials, with its error. A denial is
        forgotten when a call of that kind next succeeds, or two probes after it was last seen
        (its node gone)."""
        now = self._mono()
        with self._lock:
            if any(now - at >= 2 * PERMISSION_PROBE for _, at in self._denied.values()):
                self._denied = {k: v for k, v in self._denied.items() if now - v[1] < 2 * PERMISSION_PROBE}
            return {key: why for key, (why, _) in sorted(self._denied.items())}

    def no_permission(self, key: str, why: str) -> str:
        """Record a call refused for lack of rights: no new try before :data:`PERMISSION_PROBE`;
        the words for its outcome."""
        now = self._mono()
        with self._lock:
            failures = self._backoff.get(key, (0, 0.0))[0] + 1
            self._backoff[key] = (failures, now + PERMISSION_PROBE)
            self._denied[key] = (why, now)
        return f"no permission ({why}); next probe in {duration(PERMISSION_PROBE)}"

    def denial_wait(self, key: str) -> str | None:
        """While ``key`` waits for its probe after a denial: the outcome's words."""
        now = self._mono()
        with self._lock:
            denied = self._denied.get(key)
            not_before = self._backoff.get(key, (0, 0.0))[1]
        if denied is None or not_before <= now:
            return None
        return f"no permission ({denied[0]}); next probe in {duration(not_before - now)}"

    def wait_reason(self, key: str, cloud: bool, which: str = "") -> str | None:
        """Why a call must wait now (None: it may go); ``which`` names the cloud of a cloud call."""
        now = self._mono()
        with self._lock:
            until = self._cloud_wait.get(which, -math.inf) if cloud else -math.inf
            if until > now:
                named = f" of cloud {which}" if which else ""
                return f"cloud rate limit{named}: waiting until {until - now:.0f}s from now"
            failures, not_before = self._backoff.get(key, (0, 0.0))
            if not_before > now:
                return f"retry backoff after {failures} failure(s): {not_before - now:.0f}s left"
        return None

    def failed(self, key: str) -> float:
        now = self._mono()
        with self._lock:
            failures = self._backoff.get(key, (0, 0.0))[0] + 1
            delay = min(INITIAL_BACKOFF * 2 ** (failures - 1), self._max_backoff())
            self._backoff[key] = (failures, now + delay)
            return delay

    def refusal(self, key: str) -> float | None:
        """Record a refusal of ``key``; the backoff (as :meth:`failed`) when it repeats one
        within :data:`REFUSAL_REPEAT`, else None (retried at the next cycle)."""
        now = self._mono()
        with self._lock:
            last, self._refused[key] = self._refused.get(key), now
            if len(self._refused) > 1024:                # nodes gone since: no repeat to notice
                self._refused = {k: at for k, at in self._refused.items() if now - at < REFUSAL_REPEAT}
        return self.failed(key) if last is not None and now - last < REFUSAL_REPEAT else None

    def succeeded(self, key: str) -> None:
        kind = key.split(":", 1)[0] + ":"
        with self._lock:
            self._backoff.pop(key, None)
            self._refused.pop(key, None)
            if self._denied:  # a call of this kind went through: the right is there now
                self._denied = {k: v for k, v in self._denied.items() if not k.startswith(kind)}

    def hold_cloud(self, name: str, until: float) -> None:
        """No call to cloud ``name`` before ``until`` (its rate limit)."""
        with self._lock:
            self._cloud_wait[name] = max(self._cloud_wait.get(name, -math.inf), until)
