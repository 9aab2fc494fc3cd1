"""The ports a daemon talks to, built from its settings: the cloud, the scheduler and (the embedded
default only) the simulated world behind both; and each port's calls timed for the metrics."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable

from nodemanager.cloud import CloudDriver, CloudError
from nodemanager.configuration.config import ConfigError, Problem
from nodemanager.configuration.settings import Settings
from nodemanager.scheduler import Scheduler, SchedulerError
from nodemanager.configuration.kinds import cloud_kind, scheduler_kinds

__all__ = ["build_ports", "build_cloud", "Timed"]


def build_ports(settings: Settings, clock: Callable[[], float]) -> tuple[CloudDriver, Scheduler, Any]:
    """The cloud, the scheduler and (embedded default only) the simulated world."""
    cloud_of, scheduler_of = cloud_kind(settings.cloud.driver), scheduler_kinds().get(settings.scheduler.kind)
    # a kind with no adapter of its own is the simulated world's: its cloud and pool come together
    simulated = (cloud_of is not None and cloud_of.build is None and not settings.clouds,
                 scheduler_of is not None and scheduler_of.build is None)
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
    from nodemanager.scheduler.finished_window import MAX_FINISHED
    if cloud_of is None or cloud_of.build is None:
        raise ConfigError([Problem(source, None, "Cloud", "driver", f"unknown driver {settings.cloud.driver!r}")])
    cloud = build_cloud(settings, clock)
    # finished jobs are read only for runtime prediction
    finished = MAX_FINISHED if settings.core.prediction != "off" else 0
    if scheduler_of is None or scheduler_of.build is None:
        raise ConfigError([Problem(source, None, "Scheduler", "type", f"unknown type {settings.scheduler.kind!r}")])
    return cloud, scheduler_of.build(settings, source, settings.core.sizes, finished), None


def build_cloud(settings: Settings, clock: Callable[[], float]) -> CloudDriver:
    """The real cloud port, built by its driver's kind: the one ``[Cloud]``, or one instance per
    ``[Cloud NAME]`` (each with its own credentials, rate limit and sizes) behind
    :class:`~nodemanager.cloud.several.SeveralClouds`."""
    from nodemanager.cloud.several import SeveralClouds
    ports: dict[str, CloudDriver] = {}
    for c in settings.clouds or (settings.cloud,):
        kind = cloud_kind(c.driver)
        if kind is None or kind.build is None:
            raise ConfigError([Problem(settings.source or "config", None, f"Cloud {c.name}", "driver",
                                       f"unknown driver {c.driver!r}")])
        if not settings.clouds:
            return kind.build(settings)
        own = tuple(s for s in settings.core.sizes if s.cloud == c.name)
        ports[c.name] = kind.build(replace(settings, cloud=c, core=replace(settings.core, sizes=own)))
    return SeveralClouds(ports, clock=clock)


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
