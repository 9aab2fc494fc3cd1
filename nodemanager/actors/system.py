"""A small supervisor over Pykka ThreadingActors: named roles, restarts, a watchdog, fatal errors.

Every actor has a *role* (``cloud-poller``, ``controller``, ``actuator-0``...). Messages go to a
role, not to an actor, so a restarted actor receives them: ``system.tell(role, method, *args)``
runs ``method(*args)`` on the role's actor, in its thread. Timers carry the actor's
*incarnation* so a timer set by a crashed actor does nothing to its replacement.

- An actor that raises is logged with its traceback and replaced by a fresh one built by the
  same factory (``actor restarts`` counter); its queued messages are lost, which every role is
  built to tolerate (pollers re-poll on start, the controller re-plans, the controller forgets
  the tasks of a lost actuator).
- A fatal error (``MemoryError``, a thread that cannot start, ``OSError(ENOMEM)``) is never
  retried: ``on_fatal(message)`` is called (the daemon stops the process with that message).
- The watchdog (a timer, every ``watchdog/4`` seconds) replaces any actor that has been inside
  one message for longer than ``watchdog`` seconds (a stuck call); the stuck thread is abandoned
  (daemon thread) and exits when its call returns.
- :meth:`settle` waits until no message is queued or running (tests use it after
  ``ManualClock.advance`` instead of sleeping).
"""

from __future__ import annotations

import errno
import logging
import threading
import time
import traceback
from typing import Any, Callable

import pykka

from nodemanager.actors.clock import Clock

__all__ = ["ActorSystem", "BaseActor", "Health", "is_fatal"]

log = logging.getLogger("nodemanager.actors")


def is_fatal(exc: BaseException) -> bool:
    """True for errors a restart cannot fix: out of memory, no more threads."""
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return True
    return isinstance(exc, RuntimeError) and "can't start new thread" in str(exc)


class Health:
    """What the watchdog and the status page read about one actor (plain attributes; times on the
    clock's monotonic scale).
    ``restarts`` counts the role's restarts (carried over to each new incarnation)."""

    __slots__ = ("busy_since", "busy_with", "last_progress", "restarts", "handled")

    def __init__(self, restarts: int = 0) -> None:
        self.busy_since: float | None = None
        self.busy_with: str | None = None
        self.last_progress: float | None = None
        self.restarts = restarts
        self.handled = 0


class BaseActor(pykka.ThreadingActor):
    """An actor whose messages are ``(method name, args, incarnation)`` tuples from the system."""

    use_daemon_thread = True

    def __init__(self, system: "ActorSystem", role: str, incarnation: int) -> None:
        super().__init__()
        self.system = system
        self.role = role
        self.incarnation = incarnation
        self.health = system._new_health(role, incarnation)

    @property
    def clock(self) -> Clock:
        return self.system.clock

    def later(self, delay: float, method: str, *args: Any) -> int:
        """Send ``method(*args)`` to this actor (this incarnation only) after ``delay`` seconds."""
        return self.clock.call_later(delay, lambda: self.system.tell(self.role, method, *args,
                                                                     incarnation=self.incarnation))

    def send_self(self, method: str, *args: Any) -> None:
        """Queue ``method(*args)`` on this actor now (safe in ``on_start``, before the role is
        registered)."""
        self.system._count()
        self.actor_ref.tell((method, args, self.incarnation, True))

    def on_receive(self, message: Any) -> Any:
        method, args, incarnation, counted = message
        if method == "_retire":  # sent by restart() to an actor already replaced
            self.stop()
            return None
        failed = False
        try:
            if incarnation is not None and incarnation != self.incarnation:
                return None
            self.health.busy_since = self.clock.monotonic()
            self.health.busy_with = method
            result = getattr(self, method)(*args)
            self.health.handled += 1
            return result
        except BaseException:
            failed = counted  # on_failure settles the count after the restart
            raise
        finally:
            self.health.busy_since = None
            self.health.busy_with = None
            self.health.last_progress = self.clock.monotonic()
            if counted and not failed:
                self.system._done()

    def on_failure(self, exc_type: Any, exc_value: BaseException | None, tb: Any) -> None:
        lost = self.actor_inbox.qsize()  # type: ignore[attr-defined]  # pykka types the inbox as a protocol; a ThreadingActor's is a queue.Queue
        try:
            self.system._crashed(self.role, self.incarnation, exc_value)
        finally:
            for _ in range(lost + 1):
                self.system._done()


class ActorSystem:
    """Roles, their factories and their health; see the module docstring."""

    def __init__(self, clock: Clock, *, watchdog: float = 600.0,
                 on_fatal: Callable[[str], None] | None = None,
                 on_restart: Callable[[str], None] | None = None) -> None:
        self.clock = clock
        self.watchdog = watchdog
        self.on_fatal = on_fatal
        self.on_restart = on_restart
        self.fatal_error: str | None = None
        self.stopping = False
        self._lock = threading.Condition()
        self._pending = 0
        self._refs: dict[str, pykka.ActorRef[Any]] = {}
        self._factories: dict[str, Callable[["ActorSystem", str, int], pykka.ActorRef[Any]]] = {}
        self._incarnations: dict[str, int] = {}
        self._health: dict[str, Health] = {}
        self._restarts: dict[str, int] = {}
        self._abandoned: dict[str, list[tuple[pykka.ActorRef[Any], Health]]] = {}
        self._watchdog_handle: int | None = None

    # -- roles ----------------------------------------------------------------------------------

    def health(self, role: str) -> Health:
        """The health of the role's current actor."""
        with self._lock:
            return self._health.setdefault(role, Health())

    def _new_health(self, role: str, incarnation: int) -> Health:
        with self._lock:
            health = Health(self._restarts.get(role, 0))
            if self._incarnations.get(role) == incarnation:
                self._health[role] = health
            return health

    def roles(self) -> list[str]:
        with self._lock:
            return list(self._refs)

    def spawn(self, role: str, actor_class: type[BaseActor], *args: Any, **kwargs: Any) -> None:
        """Start ``actor_class(system, role, incarnation, *args, **kwargs)`` as ``role``; the same
        call builds its replacement after a crash or a stuck call."""
        def factory(system: ActorSystem, role: str, incarnation: int) -> pykka.ActorRef[Any]:
            return actor_class.start(system, role, incarnation, *args, **kwargs)

        with self._lock:
            self._factories[role] = factory
        self._start(role)

    def _start(self, role: str) -> None:
        with self._lock:
            incarnation = self._incarnations.get(role, 0) + 1
            self._incarnations[role] = incarnation
            factory = self._factories[role]
        try:
            ref = factory(self, role, incarnation)
        except Exception as exc:  # noqa: BLE001 - a thread that cannot start is fatal
            if is_fatal(exc):
                self.fatal(f"cannot start actor {role}: {exc}")
                return
            raise
        with self._lock:
            self._refs[role] = ref

    def restart(self, role: str, why: str) -> None:
        """Replace the role's actor with a fresh one (the old one is told to stop when it can)."""
        if self.stopping or self.fatal_error:
            return
        with self._lock:
            old = self._refs.pop(role, None)
            self._restarts[role] = self._restarts.get(role, 0) + 1
            health = self._health.get(role)
            if old is not None and health is not None and health.busy_since is not None:
                self._abandoned.setdefault(role, []).append((old, health))
        log.error("actor %s restarted: %s", role, why)
        if old is not None:
            try:
                old.tell(("_retire", (), None, False))
            except pykka.ActorDeadError:
                pass
        self._start(role)
        if self.on_restart is not None:
            self.on_restart(role)

    # -- messages -------------------------------------------------------------------------------

    def tell(self, role: str, method: str, *args: Any, incarnation: int | None = None) -> bool:
        """Send ``method(*args)`` to the role's actor; False if there is none (stopped)."""
        with self._lock:
            ref = self._refs.get(role)
            if ref is None:
                return False
            self._pending += 1
        try:
            ref.tell((method, args, incarnation, True))
            return True
        except pykka.ActorDeadError:
            self._done()
            return False

    def ask(self, role: str, method: str, *args: Any, timeout: float = 10.0) -> Any:
        """Run ``method(*args)`` on the role's actor and return its result (tests, status)."""
        with self._lock:
            ref = self._refs[role]
        return ref.ask((method, args, None, False), timeout=timeout)

    def _count(self) -> None:
        with self._lock:
            self._pending += 1

    def _done(self) -> None:
        with self._lock:
            self._pending = max(0, self._pending - 1)
            if self._pending == 0:
                self._lock.notify_all()

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until no message is queued or being handled; False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._pending == 0, timeout=timeout)

    # -- failures -------------------------------------------------------------------------------

    def _crashed(self, role: str, incarnation: int, exc: BaseException | None) -> None:
        if exc is not None and is_fatal(exc):
            self.fatal(f"actor {role} hit a fatal error: {type(exc).__name__}: {exc}")
            return
        with self._lock:
            current = self._incarnations.get(role) == incarnation
        if current:
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip() if exc else "?"
            self.restart(role, f"crashed with {text}")

    def fatal(self, message: str) -> None:
        """Stop everything: a restart cannot fix this. The daemon exits with ``message``."""
        if self.fatal_error is not None:
            return
        self.fatal_error = message
        log.critical("fatal: %s; stopping", message)
        if self.on_fatal is not None:
            self.on_fatal(message)

    def start_watchdog(self) -> None:
        """Check every ``watchdog/4`` seconds for actors stuck in one message or dead."""
        self._watchdog_handle = self.clock.call_later(self.watchdog / 4, self._watchdog_tick)

    def _watchdog_tick(self) -> None:
        if self.stopping:
            return
        self.check_stuck()
        self._watchdog_handle = self.clock.call_later(self.watchdog / 4, self._watchdog_tick)

    def check_stuck(self) -> list[str]:
        """Restart every actor stuck in one message for more than ``watchdog`` seconds, and every
        role whose actor died without being restarted; return those roles."""
        now = self.clock.monotonic()
        replaced = []
        with self._lock:
            items = [(role, self._refs.get(role), self._health.get(role)) for role in self._factories]
        for role, ref, health in items:
            if health is not None and health.busy_since is not None and now - health.busy_since > self.watchdog:
                if self._still_abandoned(role):
                    log.error("actor %s stuck in %s for %.0fs; an earlier %s is still stuck too: not "
                              "restarted again until a call returns", role, health.busy_with,
                              now - health.busy_since, role)
                    continue
                replaced.append(role)
                self.restart(role, f"stuck in {health.busy_with} for {now - health.busy_since:.0f}s "
                                   f"(watchdog {self.watchdog:.0f}s)")
            elif ref is not None and not ref.is_alive() and not self.stopping:
                replaced.append(role)
                self.restart(role, "found dead")
        return replaced

    def _still_abandoned(self, role: str) -> bool:
        """True while an actor replaced for being stuck is still inside its call (it bounds the
        threads a hanging API can cost: one abandoned thread per role)."""
        with self._lock:
            alive = [(ref, h) for ref, h in self._abandoned.get(role, ())
                     if h.busy_since is not None and ref.is_alive()]
            self._abandoned[role] = alive
            return bool(alive)

    # -- stopping -------------------------------------------------------------------------------

    def stop(self, roles: list[str] | None = None, timeout: float = 30.0) -> list[str]:
        """Stop the given roles (default: all): each finishes the message it is handling (queued
        ones are dropped or skipped by the role), all within one ``timeout`` in seconds. Return
        the roles abandoned because their actor was still inside a call at the deadline."""
        self.stopping = True
        if self._watchdog_handle is not None:
            self.clock.cancel(self._watchdog_handle)
        futures = []
        for role in roles if roles is not None else self.roles():
            with self._lock:
                ref = self._refs.pop(role, None)
            if ref is None:
                continue
            try:
                futures.append((role, ref.stop(block=False)))
            except pykka.ActorDeadError:
                pass
        deadline = time.monotonic() + timeout
        abandoned = []
        for role, future in futures:
            try:
                future.get(timeout=max(0.0, deadline - time.monotonic()))
            except pykka.Timeout:
                abandoned.append(role)
                log.warning("actor %s still inside %s after %.0fs; abandoned", role,
                            self.health(role).busy_with or "a call", timeout)
            except pykka.ActorDeadError:
                pass
        return abandoned
