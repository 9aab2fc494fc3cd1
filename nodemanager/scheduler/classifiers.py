"""Which adapter classifies a worker record that did not come from a live adapter (a snapshot
file, a test or benchmark world): the one place that picks a classifier by scheduler name."""

from __future__ import annotations

from dataclasses import replace

from nodemanager.model import Classified, Worker

__all__ = ["classified", "classify_record"]


def classify_record(worker: Worker) -> Classified:
    """The classification ``worker``'s scheduler adapter gives its raw fields: SLURM's state table
    for ``slurm`` (and for other schedulers without an ad), HTCondor's ad rules otherwise."""
    if worker.scheduler == "htcondor" or (worker.ad and worker.scheduler != "slurm"):
        from nodemanager.scheduler.htcondor_classify import classify_htcondor_worker
        return classify_htcondor_worker(worker)
    from nodemanager.scheduler.slurm_classify import classify_slurm_worker
    # only SLURM names a drain by its state; other schedulers say so with "draining"
    return classify_slurm_worker(worker, drain_states=worker.scheduler == "slurm")


def classified(worker: Worker) -> Worker:
    """``worker`` carrying its adapter's classification of its raw fields (see
    :func:`classify_record`); an HTCondor record's ad is its machine ad (``native_ad``)."""
    return replace(worker, classified=classify_record(worker),
                   native_ad=worker.native_ad or worker.scheduler == "htcondor")
