"""Scheduler states to worker_state: every SLURM and HTCondor mapping (the adapters' classifiers),
and the core's staleness."""

import pytest

from nodemanager.core import classify_worker
from nodemanager.model import Worker
from nodemanager.scheduler import classified
from nodemanager.scheduler.htcondor_classify import classify_htcondor
from nodemanager.scheduler.slurm_classify import classify_slurm

NOW = 1_000_000.0


@pytest.mark.parametrize("raw, expected", [
    # the Arvados policy matrix page, exactly
    ("idle", "idle"),
    ("drng", "busy"), ("alloc", "busy"), ("maint", "busy"), ("mix", "busy"), ("comp", "busy"),
    ("drain", "down"), ("down", "down"), ("error", "down"), ("fail", "down"), ("unknown", "down"),
    ("unk", "down"),
    # any state with a trailing * is down
    ("idle*", "down"), ("alloc*", "down"), ("mix*", "down"), ("drng*", "down"), ("down*", "down"),
    # the other suffix flags
    ("idle~", "down"), ("idle%", "down"), ("idle!", "down"), ("alloc%", "down"),
    ("idle#", "unpaired"), ("idle^", "unpaired"), ("down#", "unpaired"), ("idle#*", "unpaired"),
    ("idle$", "busy"), ("idle-", "busy"), ("mix-", "busy"),
    ("idle@", "idle"), ("alloc@", "busy"), ("drain@", "down"),
    # other base states and long names
    ("allocated", "busy"), ("mixed", "busy"), ("completing", "busy"), ("draining", "busy"),
    ("drained", "down"), ("err", "down"), ("inval", "down"), ("pow_dn", "down"),
    ("failg", "busy"), ("resv", "busy"), ("plnd", "busy"), ("npc", "busy"), ("blocked", "busy"),
    ("boot", "unpaired"), ("futr", "unpaired"), ("pow_up", "unpaired"),
    ("IDLE", "idle"), (" idle ", "idle"),
    # not recognised
    ("weird", "down"), ("", "down"), (None, "down"),
])
def test_slurm_state_mapping(raw, expected):
    assert classify_slurm(raw).state == expected


def test_unrecognised_slurm_state_with_jobs_is_busy():
    assert classify_slurm("newstate", running_jobs=2).state == "busy"
    assert classify_slurm("down", running_jobs=2).state == "down"  # known states follow the seed


def test_slurm_reason_names_the_raw_state():
    c = classify_slurm("alloc*")
    assert "alloc*" in c.why and "not responding" in c.why


def pslot(state, activity, **extra):
    ad = {"State": state, "Activity": activity, "PartitionableSlot": True, "NumDynamicSlots": 0}
    ad.update(extra)
    return ad


@pytest.mark.parametrize("ad, expected", [
    (pslot("Unclaimed", "Idle"), "idle"),
    (pslot("Unclaimed", "Idle", NumDynamicSlots=2), "busy"),
    (pslot("Unclaimed", "Idle", ChildState=["Claimed"]), "busy"),
    (pslot("Unclaimed", "Idle", Draining=True), "busy"),               # drain started, not done
    (pslot("Unclaimed", "Idle", Draining=True, NumDynamicSlots=1), "busy"),
    (pslot("Drained", "Retiring"), "busy"),
    (pslot("Drained", "Retiring", NumDynamicSlots=3), "busy"),
    (pslot("Drained", "Idle"), "down"),
    (pslot("Drained", "Idle", Draining=True), "down"),
    (pslot("Owner", "Idle"), "idle"),
    (pslot("Backfill", "Idle"), "idle"),
    (pslot("Claimed", "Busy"), "busy"),                                 # static slot
    (pslot("Claimed", "Retiring"), "busy"),
    (pslot("Preempting", "Vacating"), "busy"),
    (pslot("Matched", "Idle"), "busy"),
    (pslot("Delete", "Idle"), "busy"),                                  # unknown: left alone
    ({}, "unpaired"),                                                   # no State yet: starting
])
def test_htcondor_pslot_mapping(ad, expected):
    assert classify_htcondor(ad, NOW).state == expected


def test_htcondor_state_from_worker_state_when_ad_lacks_it():
    assert classify_htcondor({}, NOW, state="Drained/Idle").state == "down"
    assert classify_htcondor({}, NOW, state="Unclaimed/Idle").state == "idle"
    assert classify_htcondor({}, NOW, state="Unclaimed/Idle", running_jobs=1).state == "busy"


def test_htcondor_idle_since_uses_frozen_draining_completion():
    # The p-slot has been Unclaimed for a day while d-slots came and went; the last claim ended
    # 100 s ago, which the startd froze into ExpectedMachineGracefulDrainingCompletion.
    ad = pslot("Unclaimed", "Idle", EnteredCurrentState=NOW - 86400,
               ExpectedMachineGracefulDrainingCompletion=NOW - 100)
    assert classify_htcondor(ad, NOW).idle_since == NOW - 100
    # without it, EnteredCurrentState; a later worker state_since wins
    ad = pslot("Unclaimed", "Idle", EnteredCurrentState=NOW - 500)
    assert classify_htcondor(ad, NOW).idle_since == NOW - 500
    assert classify_htcondor(ad, NOW, state_since=NOW - 50).idle_since == NOW - 50
    # never in the future
    ad = pslot("Unclaimed", "Idle", ExpectedMachineGracefulDrainingCompletion=NOW + 999)
    assert classify_htcondor(ad, NOW).idle_since == NOW


@pytest.mark.parametrize("heard_ago, expected", [(599, "idle"), (600, "idle"), (601, "down")])
def test_stale_worker_is_down(heard_ago, expected):
    w = classified(Worker(name="n1", scheduler="slurm", state="idle", last_heard=NOW - heard_ago))
    assert classify_worker(w, NOW, 600).state == expected


def test_unreported_last_heard_is_not_stale():
    w = classified(Worker(name="n1", scheduler="slurm", state="alloc", last_heard=0.0))
    assert classify_worker(w, NOW, 600).state == "busy"


def test_no_worker_is_unpaired():
    assert classify_worker(None, NOW, 600).state == "unpaired"


def test_slurm_idle_since_is_the_scheduler_state_since():
    w = classified(Worker(name="n1", scheduler="slurm", state="idle", last_heard=NOW, state_since=NOW - 42))
    assert classify_worker(w, NOW, 600).idle_since == NOW - 42


def test_the_core_takes_any_schedulers_classification_as_its_adapter_gave_it():
    from nodemanager.model import Classified
    w = Worker(name="n1", scheduler="pbs", state="free", last_heard=NOW,
               classified=Classified("idle", "pbs: free", NOW - 50))
    assert classify_worker(w, NOW, 600)[:3] == ("idle", "pbs: free", NOW - 50)
    ahead = Worker(name="n1", scheduler="pbs", classified=Classified("idle", "pbs: free", NOW + 99))
    assert classify_worker(ahead, NOW, 600).idle_since == NOW   # never idle since the future
    stale = Worker(name="n1", scheduler="pbs", last_heard=NOW - 601, classified=Classified("idle", ""))
    assert classify_worker(stale, NOW, 600).state == "down"


def test_a_worker_no_adapter_classified_is_left_alone():
    c = classify_worker(Worker(name="n1", scheduler="pbs", state="free", last_heard=NOW), NOW, 600)
    assert c.state == "busy" and "not classified" in c.why
