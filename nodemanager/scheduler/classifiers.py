"""Which adapter classifies a worker record that did not come from a live adapter (a snapshot
file, a test or benchmark world): the record's scheduler kind's classifier
(:class:`~nodemanager.configuration.kinds.SchedulerKind`)."""

from __future__ import annotations

from dataclasses import replace

from nodemanager.model import Classified, Worker
from nodemanager.configuration.kinds import scheduler_kinds

__all__ = ["classified", "classify_record", "classify_by_fields"]


def classify_by_fields(worker: Worker) -> Classified:
    """A record of a scheduler without classifier rules of its own: HTCondor's ad rules when it
    has an ad, else SLURM's state words, a drain said only by ``draining`` (no drain states)."""
    if worker.ad:
        from nodemanager.scheduler.htcondor_classify import classify_htcondor_worker
        return classify_htcondor_worker(worker)
    from nodemanager.scheduler.slurm_classify import classify_slurm_worker
    return classify_slurm_worker(worker, drain_states=False)


def classify_record(worker: Worker) -> Classified:
    """The classification ``worker``'s scheduler kind gives its raw fields
    (:func:`classify_by_fields` for a name no kind is registered under)."""
    kind = scheduler_kinds().get(worker.scheduler)
    return (kind.classify if kind is not None else classify_by_fields)(worker)


def classified(worker: Worker) -> Worker:
    """``worker`` carrying its adapter's classification of its raw fields (see
    :func:`classify_record`); a record of a kind whose ads are machine ads carries ``native_ad``."""
    kind = scheduler_kinds().get(worker.scheduler)
    return replace(worker, classified=classify_record(worker),
                   native_ad=worker.native_ad or (kind is not None and kind.native_ad))
