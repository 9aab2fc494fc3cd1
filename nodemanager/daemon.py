"""The daemon: ports, matrix, actors and status server, wired from :class:`Settings`.

API note::

    d = Daemon(settings, config_path="nodemanager.ini", dry_run=False)   # clock: RealClock()
    d.start()        # actors + status server; returns at once
    d.reload()       # re-read config and matrix (SIGHUP); a bad file is rejected and logged
    d.stop()         # SIGTERM: clean stop (see below); returns the roles abandoned
    d.run()          # start, handle SIGHUP/SIGTERM/SIGINT until stopped; the exit code

Ports: ``[Cloud] driver = simulated`` with ``[Scheduler] type = simulated`` is the embedded
default (:class:`~nodemanager.sim.world.SimWorld`); otherwise the libcloud adapter and the SLURM
or HTCondor adapter. Threads: one timer, two pollers, one controller, :data:`POOL_SIZE`
actuators (plus the status server's), whatever the number of nodes.

Reload: the new config must load without error, else nothing changes. Options that need a new
process (cloud driver and its arguments, cluster, scheduler type and options, [Manage],
``dry_run``) keep their running values, with a warning; everything else (sizes, limits, graces,
poll intervals, drain settings, log level) applies from the next cycle. The matrix file is re-read too; a bad matrix keeps the
old one (shown as ``matrix_error`` in the next reports and on the status page).

Stop: no new cycle is planned and queued actions are skipped; calls under way get
``stop_timeout`` seconds to finish, then are abandoned. Nothing is left half-done: a destroy
writes ``TAG_DESTROY`` before its cloud call, and the next start finishes it.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
import time
from dataclasses import replace
from typing import Any, Callable

from nodemanager.actors.clock import Clock, RealClock
from nodemanager.actors.roles import (CLOUD_POLLER, CONTROLLER, SCHEDULER_POLLER, ActuatorActor,
                                      ControllerActor, PollerActor, actuator_role)
from nodemanager.actors.system import ActorSystem
from nodemanager.actuate import Actuator
from nodemanager.admin import AdminState
from nodemanager.cloud.port import CloudDriver, CloudError
from nodemanager.config import SECRET_OPTIONS, ConfigError, Problem
from nodemanager.controller import Controller
from nodemanager.model import CycleReport, Worker
from nodemanager.scheduler.port import Scheduler, SchedulerError
from nodemanager.settings import Settings

__all__ = ["Daemon", "POOL_SIZE", "EXIT_FATAL", "build_ports", "tune_gc"]

log = logging.getLogger("nodemanager.daemon")

POOL_SIZE = 4          # actuator actors: enough to overlap slow cloud calls, never one per node
EXIT_FATAL = 70        # EX_SOFTWARE: a fatal error stopped the daemon


def build_ports(settings: Settings, clock: Callable[[], float]) -> tuple[CloudDriver, Scheduler, Any]:
    """The cloud, the scheduler and (embedded default only) the simulated world."""
    simulated = (settings.cloud.driver == "simulated", settings.scheduler.kind == "simulated")
    source = settings.source or "config"
    if any(simulated):
        if not all(simulated):
            raise ConfigError([Problem(source, None, "Cloud" if not simulated[0] else "Scheduler",
                                       "driver" if not simulated[0] else "type",
                                       "the simulated cloud and the simulated scheduler only work "
                                       "together: set [Cloud] driver = simulated and [Scheduler] "
                                       "type = simulated, or neither")])
        from nodemanager.sim.world import SimWorld
        world = SimWorld(settings, clock)
        return world.cloud, world.scheduler, world
    from nodemanager.cloud.libcloud_driver import LibcloudCloud
    cloud = LibcloudCloud(settings.cloud)
    if settings.scheduler.kind == "slurm":
        from nodemanager.scheduler.slurm import SlurmScheduler
        return cloud, SlurmScheduler.from_settings(settings.scheduler, source=source), None
    from nodemanager.scheduler.htcondor import HTCondorScheduler
    return cloud, HTCondorScheduler.from_settings(settings.scheduler), None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("nodemanager")
    except PackageNotFoundError:
        return ""


class _Timed:
    """Times every call of a port for the metrics (``observe_call``), passing errors through."""

    def __init__(self, target: str, inner: Any, observe: Callable[..., None]) -> None:
        self._target, self._inner, self._observe = target, inner, observe
        self.name = getattr(inner, "name", target)

    def __getattr__(self, call: str) -> Any:
        fn = getattr(self._inner, call)
        if not callable(fn):
            return fn

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                result = fn(*args, **kwargs)
            except CloudError as exc:
                self._observe(self._target, call, time.monotonic() - start, exc.kind)
                raise
            except SchedulerError as exc:
                kind = "refused" if not exc.transient else "transient"
                self._observe(self._target, call, time.monotonic() - start, kind)
                raise
            self._observe(self._target, call, time.monotonic() - start, None)
            return result
        return timed


_RESTART_ONLY = (("cloud", "[Cloud]"), ("scheduler", "[Scheduler]"), ("manage", "[Manage]"),
                 ("dry_run", "[Daemon] dry_run"))



def tune_gc() -> None:
    """Set this process's garbage collector up for the daemon; call once, after start-up.

    What exists now (modules, settings, the matrix, a simulated world) lives as long as the process,
    so it is frozen out of every later collection; and since each cycle builds a new snapshot and
    plan (a few objects per node, freed by reference counting), young collections run every 10,000
    new objects instead of 700, so a full collection over 50,000 nodes' objects is rare.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


class Daemon:
    """The running node manager (see the module docstring)."""

    def __init__(self, settings: Settings, *, config_path: str | None = None, clock: Clock | None = None,
                 dry_run: bool = False, status: bool = True, stop_timeout: float = 30.0,
                 ports: tuple[CloudDriver, Scheduler, Any] | None = None) -> None:
        import policy_matrix
        from nodemanager.metrics import Metrics

        self.settings = settings
        self.config_path = config_path or settings.source or None
        self.clock: Clock = clock or RealClock()
        self.dry_run = dry_run or settings.dry_run
        self.stop_timeout = stop_timeout
        self.started_at = self.clock()
        self.metrics = Metrics(sizes=settings.core.sizes, clock=self.clock)
        self.matrix_source = policy_matrix.MatrixSource(settings.matrix_file or None)
        self.metrics.observe_matrix_reload(True, self.matrix_source.sha256)
        cloud, scheduler, self.world = ports or build_ports(settings, self.clock)
        self.cloud = _Timed("cloud", cloud, self.metrics.observe_call)
        self.scheduler = _Timed("scheduler", scheduler, self.metrics.observe_call)
        self._draining_stats = scheduler.draining_stats  # local bookkeeping: not a timed call
        self.admin = AdminState(clock=self.clock, path=settings.manage.state_file or None)
        self._latest_workers: dict[str, Worker] = {}
        self.actuator = Actuator(self.cloud, self.scheduler, settings, clock=self.clock,
                                 latest_worker=lambda name: self._latest_workers.get(name))
        self.controller = Controller(settings, self.matrix_source.current,
                                     None if self.dry_run else self.actuator, clock=self.clock,
                                     dry_run=self.dry_run, admin=self.admin)
        self.system = ActorSystem(self.clock, watchdog=settings.poll.watchdog, on_fatal=self._fatal,
                                  on_restart=self._restarted)
        self.counters: dict[str, float] = {"cycles": 0, "actor_restarts": 0, "reloads": 0,
                                           "reload_errors": 0}
        self.last_report: CycleReport | None = None
        self.last_cycle_at: float | None = None
        self.status_server: Any = None
        self._want_status = status and settings.manage.port >= 0
        self._requests: list[str] = []
        self._wake = threading.Event()
        self.fatal_error: str | None = None
        self._stopped = False

    # -- wiring ---------------------------------------------------------------------------------

    def _poll_cloud(self) -> list[Any]:
        return self.cloud.list_nodes()

    def _poll_scheduler(self) -> Any:
        poll = self.scheduler.poll()
        self._latest_workers = {w.name: w for w in poll.workers}  # swapped whole: readers never see half
        self.metrics.observe_draining(self._draining_stats())
        self.metrics.observe_record_problems(poll.problems)
        return poll

    def _on_report(self, report: CycleReport) -> None:
        self.last_report = report
        self.last_cycle_at = self.clock()
        self.counters["cycles"] += 1
        self.metrics.observe(report)

    def _restarted(self, role: str) -> None:
        self.counters["actor_restarts"] += 1
        if role.startswith("actuator-"):
            self.system.tell(CONTROLLER, "actuator_lost", role)

    def _fatal(self, message: str) -> None:
        self.fatal_error = message
        self.request("stop")

    def status_view(self) -> Any:
        from nodemanager.status import StatusView
        return StatusView(report=self.last_report, counters=dict(self.counters), started_at=self.started_at,
                          last_cycle_at=self.last_cycle_at, version=_version())

    def start(self) -> "Daemon":
        """Start the actors (and the status server unless disabled); return at once."""
        s = self.settings
        if isinstance(self.clock, RealClock):
            self.clock.start()
        pool = tuple(actuator_role(i) for i in range(POOL_SIZE))
        self.system.spawn(CONTROLLER, ControllerActor, self.controller,
                          lambda: self.settings.poll.cycle_interval, pool, self._on_report)
        for role in pool:
            self.system.spawn(role, ActuatorActor, self.actuator, self.controller)
        self.system.spawn(CLOUD_POLLER, PollerActor, self._poll_cloud, "cloud_listing",
                          lambda: self.settings.poll.cloud_interval, lambda: self.settings.poll.max_backoff)
        self.system.spawn(SCHEDULER_POLLER, PollerActor, self._poll_scheduler, "scheduler_poll",
                          lambda: self.settings.poll.scheduler_interval, lambda: self.settings.poll.max_backoff)
        self.system.start_watchdog()
        if self._want_status:
            from nodemanager.status import StatusServer
            secrets = [str(v) for k, v in s.cloud.driver_args.items() if k in SECRET_OPTIONS]
            self.status_server = StatusServer(s.manage, self.status_view, admin=self.admin,
                                              registry=self.metrics.registry, clock=self.clock,
                                              stale_after=max(3 * s.poll.cycle_interval, s.core.poll_stale_after),
                                              secrets=secrets).start()
            log.info("status page at %s", self.status_server.url)
        log.info("started: cloud %s, scheduler %s, matrix %s (sha256 %s)%s", s.cloud.driver,
                 s.scheduler.kind, self.matrix_source.path, self.matrix_source.sha256[:12],
                 ", DRY RUN: nothing will be drained, cancelled, booted or destroyed" if self.dry_run else "")
        return self

    # -- reload ---------------------------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read the config file and the matrix; True if both are now in force."""
        import policy_matrix
        from nodemanager import config

        self.counters["reloads"] += 1
        if not self.config_path:
            log.error("reload: no config file to re-read")
            return False
        try:
            new = config.load(self.config_path)
        except ConfigError as exc:
            self.counters["reload_errors"] += 1
            log.error("reload rejected, the running configuration stays:\n%s", exc)
            return False
        old = self.settings
        for attr, section in _RESTART_ONLY:
            if getattr(new, attr) != getattr(old, attr):
                log.warning("reload: changes in %s need a restart; the running values stay", section)
                new = replace(new, **{attr: getattr(old, attr)})
        ok = True
        if (new.matrix_file or None) != (old.matrix_file or None):
            try:
                self.matrix_source = policy_matrix.MatrixSource(new.matrix_file or None)
            except policy_matrix.MatrixError as exc:
                ok = False
                self.controller.set_matrix(self.matrix_source.current, error=str(exc))
                log.error("reload: new matrix file rejected, the running matrix stays: %s", exc)
                new = replace(new, matrix_file=old.matrix_file)
        else:
            self.matrix_source.refresh(force=True)
            if self.matrix_source.last_error is not None:
                ok = False
                log.error("reload: matrix rejected, the running matrix stays: %s",
                          self.matrix_source.last_error)
        error = str(self.matrix_source.last_error) if self.matrix_source.last_error else None
        if ok:
            self.controller.set_matrix(self.matrix_source.current, error=error)
        else:
            self.controller.matrix_error = error or self.controller.matrix_error
        self.metrics.observe_matrix_reload(ok, self.matrix_source.sha256 if ok else None)
        self.settings = new
        self.controller.update_settings(new)
        if new.log_level != old.log_level:
            logging.getLogger().setLevel(new.log_level.upper())
        self.metrics.set_sizes(new.core.sizes)
        if not ok:
            self.counters["reload_errors"] += 1
        log.info("reload: configuration %s applied; matrix %s (sha256 %s)", self.config_path,
                 "reloaded" if ok else "kept", self.matrix_source.sha256[:12])
        return ok

    # -- stop -----------------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Stop cleanly (see the module docstring); return the roles abandoned mid-call."""
        if self._stopped:
            return []
        self._stopped = True
        log.info("stopping: no new actions; waiting up to %.0fs for calls under way", self.stop_timeout)
        roles = [CONTROLLER, CLOUD_POLLER, SCHEDULER_POLLER] + [actuator_role(i) for i in range(POOL_SIZE)]
        abandoned = self.system.stop(roles, timeout=self.stop_timeout)
        if self.status_server is not None:
            self.status_server.stop()
        if isinstance(self.clock, RealClock):
            self.clock.stop()
        if abandoned:
            log.warning("stopped; abandoned calls in %s (a destroy under way is finished on the next "
                        "start)", ", ".join(abandoned))
        else:
            log.info("stopped cleanly")
        return abandoned

    # -- main loop ------------------------------------------------------------------------------

    def request(self, what: str) -> None:
        """Ask the main loop to ``reload`` or ``stop`` (signal-safe)."""
        self._requests.append(what)
        self._wake.set()

    def run(self) -> int:
        """Start, then serve SIGHUP (reload) and SIGTERM/SIGINT (stop) until stopped."""
        signal.signal(signal.SIGHUP, lambda *_: self.request("reload"))
        signal.signal(signal.SIGTERM, lambda *_: self.request("stop"))
        signal.signal(signal.SIGINT, lambda *_: self.request("stop"))
        self.start()
        while True:
            self._wake.wait()
            self._wake.clear()
            while self._requests:
                what = self._requests.pop(0)
                if what == "reload":
                    log.info("SIGHUP: reloading %s", self.config_path)
                    self.reload()
                elif what == "stop":
                    self.stop()
                    if self.fatal_error:
                        log.critical("nodemanager stopped by a fatal error: %s", self.fatal_error)
                        return EXIT_FATAL
                    return 0
