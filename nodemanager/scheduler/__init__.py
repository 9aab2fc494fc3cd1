"""Scheduler side of the controller: the port every adapter implements, and the adapters.

The surface: the port (:class:`Scheduler`, :class:`SchedulerPoll`, :class:`SchedulerError`,
:class:`DrainRefused`, :class:`DrainTicket`, :class:`DrainSchedule`, :class:`Confirmation`,
``DRAIN_REASON_PREFIX``); drain statistics (:class:`DrainingStats`); problems with scheduler
records (:class:`RecordProblem`, ``KINDS``, ``REASONS``); the classification of a worker record
not read by a live adapter (:func:`classified`, :func:`classify_record`); and, loaded on first use so importing
this package starts no adapter, :class:`HTCondorScheduler` (with ``DEFAULT_CONSTRAINT`` and
:func:`worker_from_ad`) and :class:`SlurmScheduler`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodemanager.scheduler.classifiers import classified, classify_record
from nodemanager.scheduler.draining_stats import DrainingStats
from nodemanager.scheduler.port import (DRAIN_REASON_PREFIX, Confirmation, DrainRefused,
                                        DrainSchedule, DrainTicket, Scheduler, SchedulerError,
                                        SchedulerPoll)
from nodemanager.scheduler.records import KINDS, REASONS, RecordProblem

if TYPE_CHECKING:
    from nodemanager.scheduler.htcondor import (DEFAULT_CONSTRAINT, HTCondorScheduler,
                                                worker_from_ad)
    from nodemanager.scheduler.slurm import SlurmScheduler

__all__ = ["Scheduler", "SchedulerPoll", "SchedulerError", "DrainRefused", "DrainTicket",
           "DrainSchedule", "Confirmation", "DRAIN_REASON_PREFIX", "DrainingStats",
           "RecordProblem", "KINDS", "REASONS", "HTCondorScheduler", "DEFAULT_CONSTRAINT",
           "worker_from_ad", "SlurmScheduler", "classified", "classify_record"]


def __getattr__(name: str) -> Any:
    if name in ("HTCondorScheduler", "DEFAULT_CONSTRAINT", "worker_from_ad"):
        from nodemanager.scheduler import htcondor
        return getattr(htcondor, name)
    if name == "SlurmScheduler":
        from nodemanager.scheduler.slurm import SlurmScheduler
        return SlurmScheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
