"""``[Scheduler] type = htcondor``: the HTCondor adapter's :class:`~nodemanager.configuration.kinds.SchedulerKind`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from nodemanager.configuration.kinds import SchedulerKind
from nodemanager.scheduler.htcondor_options import NUMBERS
from nodemanager.model import Classified, Size, Worker

if TYPE_CHECKING:
    from nodemanager.configuration.settings import Settings
    from nodemanager.scheduler.port import Scheduler

__all__ = ["KIND"]


def _build(settings: Settings, source: str, sizes: Sequence[Size], finished: int) -> Scheduler:
    from nodemanager.scheduler.htcondor import HTCondorScheduler
    return HTCondorScheduler.from_settings(settings.scheduler, sizes=sizes, finished_limit=finished)


def _classify(worker: Worker) -> Classified:
    from nodemanager.scheduler.htcondor_classify import classify_htcondor_worker
    return classify_htcondor_worker(worker)


KIND = SchedulerKind(
    name="htcondor",
    options=frozenset({"collector", "schedd", "cloud_id_attribute", "constraint", "query_timeout",
                       "drain_check", "machine_start", "walltime_attribute"}),
    numbers=NUMBERS,
    build=_build, classify=_classify, native_ad=True, gpus_by_requirements=True,
    preflight="nodemanager.preflight.htcondor:kind_checks")
