"""``[Scheduler] type = slurm``: the SLURM adapter's :class:`~nodemanager.configuration.kinds.SchedulerKind`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from nodemanager.configuration.kinds import SchedulerKind
from nodemanager.scheduler.slurm_options import NUMBERS
from nodemanager.model import Classified, Size, Worker

if TYPE_CHECKING:
    from nodemanager.configuration.settings import Settings
    from nodemanager.scheduler.port import Scheduler

__all__ = ["KIND"]


def _build(settings: Settings, source: str, sizes: Sequence[Size], finished: int) -> Scheduler:
    from nodemanager.scheduler.slurm import SlurmScheduler
    return SlurmScheduler.from_settings(settings.scheduler, source=source, sizes=sizes, finished_limit=finished)


def _classify(worker: Worker) -> Classified:
    from nodemanager.scheduler.slurm_classify import classify_slurm_worker
    return classify_slurm_worker(worker, drain_states=True)


KIND = SchedulerKind(
    name="slurm",
    options=frozenset({"slurm_conf", "bin_dir", "timeout", "partition", "mark_destroyed", "cloud_id_field"}),
    numbers=NUMBERS,
    build=_build, classify=_classify, preflight="nodemanager.preflight.slurm:kind_checks")
