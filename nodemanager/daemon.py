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
actuators (plus the status server's, and in :meth:`Daemon.run` a reloader), whatever the number of
nodes.

Reload: the new config must load without error, else nothing changes. Options that need a new
process (cloud driver and its arguments, cluster, scheduler type and options, [Manage],
``dry_run``) keep their running values, with a warning; everything else (sizes, limits, graces,
poll intervals, drain settings, log level) applies from the next cycle. The matrix file is re-read too; a bad matrix keeps the
old one (shown as ``matrix_error`` in the next reports and on the status page, every error logged).
Reloads run on their own thread, so SIGTERM is served whatever a reload waits on. The matrix file
is also checked after every cycle (:meth:`Daemon.check_matrix`: a stat; read and parsed only when
its mtime, size or inode changed) and swapped in when good, with no SIGHUP.

Stop: no new cycle is planned and queued actions are skipped; calls under way get
``stop_timeout`` seconds to finish, then are abandoned. Nothing is left half-done: a destroy
writes ``TAG_DESTROY`` before its cloud call, and the next start finishes it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import replace
from typing import Any

from nodemanager.actors.clock import Clock, RealClock
from nodemanager.actors.roles import (CLOUD_POLLER, CONTROLLER, SCHEDULER_POLLER, ActuatorActor,
                                      ControllerActor, PollerActor, actuator_role)
from nodemanager.actors.system import ActorSystem
from nodemanager.cycle.actuate import Actuator
from nodemanager.cloud import CloudDriver
from nodemanager.configuration.config import SECRET_OPTIONS, ConfigError, Problem
from nodemanager.cycle.controller import Controller
from nodemanager.cycle.memories import Memories
from nodemanager.console.paid_idle import paid_idle
from nodemanager.console.trend import PoolTrend
from nodemanager.cycle.store_wiring import DaemonStore
from nodemanager.cycle.journal import ReservationJournal
from nodemanager.cycle.matrix_keeper import MatrixKeeper
from nodemanager.store.state_files import set_aside_files
from nodemanager.model import CycleReport, Worker
from nodemanager.ports import Timed as _Timed
from nodemanager.ports import build_ports
from nodemanager.scheduler import Scheduler
from nodemanager.configuration.settings import Settings
from nodemanager import installed_version

__all__ = ["Daemon", "POOL_SIZE", "EXIT_FATAL", "build_ports"]

log = logging.getLogger("nodemanager.daemon")

POOL_SIZE = 4          # actuator actors: enough to overlap slow cloud calls, never one per node
EXIT_FATAL = 70        # EX_SOFTWARE: a fatal error stopped the daemon

_RESTART_ONLY = (("cloud", "[Cloud]"), ("clouds", "[Cloud NAME]"), ("scheduler", "[Scheduler]"), ("manage", "[Manage]"),
                 ("dry_run", "[Daemon] dry_run"), ("ha", "[HA]"), ("log", "[Daemon] log_format and log_file"),
                 ("store", "[Store]"))


class Daemon:
    """The running node manager (see the module docstring)."""

    def __init__(self, settings: Settings, *, config_path: str | None = None, clock: Clock | None = None,
                 dry_run: bool = False, status: bool = True, stop_timeout: float = 30.0,
                 ports: tuple[CloudDriver, Scheduler, Any] | None = None, ha: Any = None,
                 identity: Any = None) -> None:
        from nodemanager.console.metrics import Metrics

        self.settings = settings
        self.config_path = config_path or settings.source or None
        self.clock: Clock = clock or RealClock()
        self.dry_run = dry_run or settings.dry_run
        self.stop_timeout = stop_timeout
        self.started_at = self.clock()
        self.metrics = Metrics(sizes=settings.core.sizes, clock=self.clock)
        self.metrics.watch_state_dir(settings.manage.state_dir)
        self.matrix_keeper = MatrixKeeper(settings.matrix_file or None, self.metrics.observe_matrix_reload)
        self.ha = ha  # [HA]: nodemanager.ha.wiring.HighAvailability (tests pass their own)
        if self.ha is None and settings.ha is not None:
            from nodemanager.ha.wiring import HighAvailability
            self.ha = HighAvailability(settings.ha, state_dir=settings.manage.state_dir,
                                       cluster=settings.cloud.cluster, deployment_id=settings.cloud.deployment_id)
        # what the daemon remembers: one store, written by its own thread (never waited on by a cycle);
        # with [HA], holds, drains and the pause live in etcd, for whichever head leads
        self.remember = DaemonStore(settings, self.clock, self.metrics.registry, self.ha, self.dry_run)
        self.store, self.store_writer = self.remember.store, self.remember.writer
        self.admin = self.remember.admin_state(settings.manage.state_file)
        self.history, self.spend = self.remember.history_and_ledger(settings, self.metrics.registry)
        self.trend = PoolTrend()   # the last hours for the page's charts
        self.last_report: CycleReport | None = None
        self.last_cycle_at: float | None = None
        # monotonic times of the last cycle and of each input's last good poll (health)
        self._started_mono = self.clock.monotonic()
        self._done_at: dict[str, float] = {}
        self.counters: dict[str, float] = {"cycles": 0, "actor_restarts": 0, "reloads": 0,
                                           "reload_errors": 0}
        self.config_error: str | None = None  # the last reload's rejection, until a good reload
        # bound before the cloud and scheduler are built: a second instance stops here having called neither
        self.status_server: Any = self._bind_status() if status and settings.manage.port >= 0 else None
        try:
            self._build(settings, ports, identity)
        except BaseException:
            if self.status_server is not None:
                self.status_server.stop()
            raise
        self._stop_wanted = threading.Event()
        self._reload_wanted = threading.Event()
        self.fatal_error: str | None = None
        self._stopped = False

    def _bind_status(self) -> Any:
        """The status server, bound but not serving; a port that cannot be bound is a ConfigError."""
        import errno

        from nodemanager.console.status import StatusServer
        s = self.settings
        secrets = [str(v) for c in (s.cloud, *s.clouds) for k, v in c.driver_args.items() if k in SECRET_OPTIONS]
        server = StatusServer(s.manage, self.status_view, admin=self.admin, registry=self.metrics.registry,
                              clock=self.clock, stale_after=max(3 * s.poll.cycle_interval, s.core.poll_stale_after),
                              secrets=secrets)
        try:
            return server.bind()
        except OSError as exc:
            where = f"{s.manage.address}:{s.manage.port}"
            option, hint = "port", ""
            if exc.errno == errno.EADDRINUSE:
                hint = ("; another process listens there (a second nodemanager?): choose another port, "
                        "or -1 for no status server")
            elif exc.errno == errno.EADDRNOTAVAIL or not exc.errno or exc.errno < 0:  # < 0: a name lookup
                option = "address"
            reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else str(exc.strerror or exc)
            raise ConfigError([Problem(s.source or "config", None, "Manage", option,
                                       f"cannot listen on {where}: {reason}{hint}")]) from None

    def _build(self, settings: Settings, ports: tuple[CloudDriver, Scheduler, Any] | None,
               identity: Any = None) -> None:
        """The cloud and scheduler ports, the actuator, the controller and the actor system."""
        cloud, scheduler, self.world = ports or build_ports(settings, self.clock)
        if self.ha is not None:
            cloud, scheduler = self.ha.fence_ports(cloud, scheduler)
            self.metrics.registry.register(self.ha.collector())
        self.cloud = _Timed("cloud", cloud, self.metrics.observe_call)
        self.scheduler = _Timed("scheduler", scheduler, self.metrics.observe_call)
        self._draining_stats = scheduler.draining_stats  # local bookkeeping: not a timed call
        self._latest_workers: dict[str, Worker] = {}
        self.actuator = Actuator(self.cloud, self.scheduler, settings, clock=self.clock,
                                 latest_worker=lambda name: self._latest_workers.get(name),
                                 journal=None if self.dry_run else ReservationJournal.for_settings(settings))
        if not self.dry_run:
            self.remember.keep_actions(self.actuator)
        self.controller = Controller(settings, self.matrix_source.current,
                                     None if self.dry_run else self.actuator, clock=self.clock,
                                     dry_run=self.dry_run, admin=self.admin,
                                     clock_skew=lambda: getattr(cloud, "clock_skew", None))
        self.controller.history = self.history
        self.matrix_keeper.set_matrix = self.controller.set_matrix
        self.controller.memories = Memories.for_settings(settings, self.actuator.breakers, self.clock(),
                                                         self.remember.keeper())
        if identity is not None:  # nodemanager.core.identity.Identity: act on our deployment's VMs only
            self.controller.identity = identity
            self.actuator.controller = identity.controller
        if self.ha is not None:
            from nodemanager.ha.heads import config_parts
            self.ha.admin = self.admin
            self.controller.hold_back = self.ha.hold_back
            # the heads' clocks may differ by what the cloud's may: marks are dated by the head that made them
            self.controller.term = lambda: self.ha.term(max(self.settings.core.clock_tolerance,
                                                            self.settings.core.max_clock_skew))
            self.ha.fresh_start = self._fresh_leader
            self.ha.describe_config = lambda: config_parts(self.settings, self.matrix_source.sha256)
        self.system = ActorSystem(self.clock, watchdog=settings.poll.watchdog, on_fatal=self._fatal,
                                  on_restart=self._restarted)

    # -- wiring ---------------------------------------------------------------------------------

    def _poll_cloud(self) -> list[Any]:
        nodes = self.cloud.list_nodes()
        self._done_at["cloud poll"] = self.clock.monotonic()
        return nodes

    def _poll_scheduler(self) -> Any:
        poll = self.scheduler.poll()
        self._done_at["scheduler poll"] = self.clock.monotonic()
        self._latest_workers = {w.name: w for w in poll.workers}  # swapped whole: readers never see half
        self.metrics.observe_draining(self._draining_stats())
        self.metrics.observe_record_problems(poll.problems)
        return poll

    def _on_report(self, report: CycleReport) -> None:
        self.last_report = report
        self.last_cycle_at = self.clock()
        self._done_at["cycle finished"] = self.clock.monotonic()
        self.counters["cycles"] += 1
        self.metrics.observe(report)
        self.metrics.observe_identity(report)
        self.metrics.observe_paid_idle(paid_idle(report, self.settings.core))
        self.history.flush()
        self.spend.cycle(report, self.last_cycle_at)
        self.trend.observe(report, self.settings.core)
        self.check_matrix()

    def _fresh_leader(self) -> None:
        """This head became the HA leader: start from fresh inputs, as a restart does."""
        self.controller.forget_inputs()
        self.remember.new_leader(self.spend, self.controller.memories, self.actuator)

    def _restarted(self, role: str) -> None:
        self.counters["actor_restarts"] += 1
        if role.startswith("actuator-"):
            self.system.tell(CONTROLLER, "actuator_lost", role)

    def _fatal(self, message: str) -> None:
        self.fatal_error = message
        self.request("stop")

    def status_view(self) -> Any:
        from nodemanager.console.status_document import StatusView
        return StatusView(report=self.last_report, counters=dict(self.counters), started_at=self.started_at,
                          last_cycle_at=self.last_cycle_at, version=installed_version(""),
                          ha=self.ha.describe() if self.ha is not None else None,
                          ha_mismatch=self.ha.heads.differences() if self.ha is not None else (),
                          core=self.settings.core, history=self.history, ages=self._ages(), spend=self.spend,
                          config_error=self.config_error,
                          set_aside=tuple(set_aside_files(self.settings.manage.state_dir)),
                          trend=self.trend,
                          store=self.store_writer.health())

    def _ages(self) -> tuple[tuple[str, float, float], ...]:
        """Seconds since the last cycle and each input's last good poll (monotonic), with their
        limits: three of their intervals, and never below ``poll_stale_after``."""
        p, now = self.settings.poll, self.clock.monotonic()
        stale = self.settings.core.poll_stale_after
        return tuple((what, now - self._done_at.get(what, self._started_mono), max(3 * every, stale))
                     for what, every in (("cycle finished", p.cycle_interval),
                                         ("cloud poll", p.cloud_interval),
                                         ("scheduler poll", p.scheduler_interval)))

    def start(self) -> "Daemon":
        """Start the actors (and the status server unless disabled); return at once."""
        s = self.settings
        if isinstance(self.clock, RealClock):
            self.clock.start()
        self.store_writer.start()
        if self.ha is not None:
            self.ha.start()
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
        if self.status_server is not None:
            self.status_server.start()
            log.info("status page at %s", self.status_server.url)
        clouds = ", ".join(f"{c.name} ({c.driver})" for c in s.clouds) or s.cloud.driver
        log.info("started: cloud %s, scheduler %s, matrix %s (sha256 %s)%s", clouds,
                 s.scheduler.kind, self.matrix_source.path, self.matrix_source.sha256[:12],
                 ", DRY RUN: nothing will be drained, cancelled, booted or destroyed" if self.dry_run else "")
        return self

    # -- reload ---------------------------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read the config file and the matrix; True if both are now in force."""
        from nodemanager.configuration import config

        self.counters["reloads"] += 1
        if not self.config_path:
            log.error("reload: no config file to re-read")
            return False
        try:
            new = config.load(self.config_path, require_sizes=True)
        except ConfigError as exc:
            self.counters["reload_errors"] += 1
            for problem in exc.problems:  # one line each: a log line holds one record
                log.error("reload rejected, the running configuration stays: %s", problem)
            more = f" (and {len(exc.problems) - 1} more: see the log)" if len(exc.problems) > 1 else ""
            self.config_error = f"{exc.problems[0] if exc.problems else exc}{more}"
            self.metrics.observe_config_reload(False)
            return False
        self.config_error = None
        self.metrics.observe_config_reload(True)
        old = self.settings
        if not new.cloud.deployment_id:  # made at the first start, not read from the file
            new = replace(new, cloud=replace(new.cloud, deployment_id=old.cloud.deployment_id))
        for attr, section in _RESTART_ONLY:
            if getattr(new, attr) != getattr(old, attr):
                log.warning("reload: changes in %s need a restart; the running values stay", section)
                new = replace(new, **{attr: getattr(old, attr)})
        ok, matrix_file = self.matrix_keeper.reload(new.matrix_file, old.matrix_file)
        new = replace(new, matrix_file=matrix_file)
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

    def check_matrix(self) -> bool:
        """Swap in the matrix file if it changed and is good (after every cycle; see :class:`MatrixKeeper`)."""
        return self.matrix_keeper.check()

    @property
    def matrix_source(self) -> Any:
        """The matrix file in force (:class:`policy_matrix.MatrixSource`)."""
        return self.matrix_keeper.source

    # -- stop -----------------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Stop cleanly (see the module docstring); return the roles abandoned mid-call."""
        if self._stopped:
            return []
        self._stopped = True
        log.info("stopping: no new actions; waiting up to %.0fs for calls under way", self.stop_timeout)
        roles = [CONTROLLER, CLOUD_POLLER, SCHEDULER_POLLER] + [actuator_role(i) for i in range(POOL_SIZE)]
        abandoned = self.system.stop(roles, timeout=self.stop_timeout)
        if self.ha is not None:
            self.ha.stop()  # after the calls under way: releasing lets a standby act at once
        if self.status_server is not None:
            self.status_server.stop()
        self.history.flush()
        self.spend.save()
        self.controller.memories.save(self.clock(), force=True)
        self.store_writer.stop(self.stop_timeout)
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
        (self._stop_wanted if what == "stop" else self._reload_wanted).set()

    def _reloader(self) -> None:
        """Reloads off the main thread: whatever a reload waits on, SIGTERM is served at once."""
        while True:
            self._reload_wanted.wait()
            self._reload_wanted.clear()
            if self._stop_wanted.is_set():
                return
            log.info("SIGHUP: reloading %s", self.config_path)
            self.reload()

    def run(self) -> int:
        """Start, then serve SIGHUP (reload) and SIGTERM/SIGINT (stop) until stopped."""
        signal.signal(signal.SIGHUP, lambda *_: self.request("reload"))
        signal.signal(signal.SIGTERM, lambda *_: self.request("stop"))
        signal.signal(signal.SIGINT, lambda *_: self.request("stop"))
        self.start()
        threading.Thread(target=self._reloader, name="reloader", daemon=True).start()
        # a timed wait: a signal the kernel gives another thread is only seen when this one wakes
        while not self._stop_wanted.wait(0.5):
            pass
        self._reload_wanted.set()                     # lets the reloader see the stop and end
        self.stop()
        if self.fatal_error:
            log.critical("nodemanager stopped by a fatal error: %s", self.fatal_error)
            return EXIT_FATAL
        return 0
