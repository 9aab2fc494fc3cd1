"""The ports a daemon talks to, built from its settings: the cloud, the scheduler and (the embedded
default only) the simulated world behind both; and each port's calls timed for the metrics."""

from __future__ import annotations

import time
from typing import Any, Callable

from nodemanager.cloud import CloudDriver, CloudError
from nodemanager.configuration.config import ConfigError, Problem
from nodemanager.configuration.settings import Settings
from nodemanager.scheduler import Scheduler, SchedulerError

__all__ = ["build_ports", "Timed"]


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
    from nodemanager.cloud import LibcloudCloud
    from nodemanager.scheduler.finished_window import MAX_FINISHED
    cloud = LibcloudCloud(settings.cloud, sizes=settings.core.sizes)
    # finished jobs are read only for runtime prediction
    finished = MAX_FINISHED if settings.core.prediction != "off" else 0
    if settings.scheduler.kind == "slurm":
        from nodemanager.scheduler import SlurmScheduler
        return cloud, SlurmScheduler.from_settings(settings.scheduler, source=source, sizes=settings.core.sizes,
                                                   finished_limit=finished), None
    from nodemanager.scheduler import HTCondorScheduler
    return cloud, HTCondorScheduler.from_settings(settings.scheduler, sizes=settings.core.sizes,
                                                  finished_limit=finished), None


class Timed:
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
                kind = "denied" if exc.denied else "refused" if not exc.transient else "transient"
                self._observe(self._target, call, time.monotonic() - start, kind)
                raise
            self._observe(self._target, call, time.monotonic() - start, None)
            return result
        return timed
