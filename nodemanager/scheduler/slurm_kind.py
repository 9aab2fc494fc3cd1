"""``[Scheduler] type = slurm``: the SLURM adapter's :class:`~nodemanager.scheduler.kinds.SchedulerKind`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from nodemanager.model import Classified, Size, Worker
from nodemanager.scheduler.kinds import SchedulerKind

if TYPE_CHECKING:
    from nodemanager.configuration.settings import Settings
    from nodemanager.preflight.checklist import Check
    from nodemanager.scheduler.port import Scheduler

__all__ = ["KIND"]


def _build(settings: Settings, source: str, sizes: Sequence[Size], finished: int) -> Scheduler:
    from nodemanager.scheduler.slurm import SlurmScheduler
    return SlurmScheduler.from_settings(settings.scheduler, source=source, sizes=sizes, finished_limit=finished)


def _classify(worker: Worker) -> Classified:
    from nodemanager.scheduler.slurm_classify import classify_slurm_worker
    return classify_slurm_worker(worker, drain_states=True)


def _preflight(settings: Settings, polled: bool, scripts: Mapping[str, str]) -> Iterable[Check]:
    if not polled:
        return ()
    from nodemanager.preflight.boot import uses_conf_server
    from nodemanager.preflight.slurm import slurm_checks
    from nodemanager.scheduler.slurm_options import SlurmOptions

    # built (and so checked) with the scheduler port before the poll
    return slurm_checks(settings, SlurmOptions.from_mapping(settings.scheduler.options),
                        uses_conf_server(dict(scripts)))


KIND = SchedulerKind(
    name="slurm",
    options=frozenset({"slurm_conf", "bin_dir", "timeout", "partition", "mark_destroyed", "cloud_id_field"}),
    build=_build, classify=_classify, preflight=_preflight)
