"""The plan's part in repairing leftover drains (the real slurmctld side is in
tests/test_leftover_drains_slurm.py): which names are given back, which are not."""

from __future__ import annotations

import policy_matrix

from nodemanager.core import plan
from nodemanager.model import ItemKind
from tests.core_world import NOW, node, settings, snap, worker

MATRIX = policy_matrix.load_default()
OURS = "nodemanager: idle for 20m [req=c0ffee01]"


def _drained(name: str, **kw):
    return worker(name, state="drain", draining=True, drain_reason=OURS, drain_request_id="c0ffee01",
                  drain_since=NOW - 1200, **kw)


def test_a_name_we_drained_whose_vm_is_gone_is_given_back_once_nothing_runs_and_no_vm_could_be_it():
    p = plan(snap([node("other")], [_drained("gone"), worker("other", idle_for=10)]), settings(), MATRIX)
    assert [(i.kind, i.node_id, i.worker, i.cancellable) for i in p.items] == [
        (ItemKind.DESTROY, "no VM: gone", "gone", False)]
    assert "for a VM that no longer exists" in p.items[0].reason
    # a job still on it, or a listed VM that could be it (its full name), or paused: not given back
    busy = _drained("gone", running_jobs=1, cpus_busy=2)
    for s in (snap([], [busy]), snap([node("gone.example.org")], [_drained("gone")]),
              snap([], [_drained("gone")], paused="maintenance")):
        assert [i for i in plan(s, settings(), MATRIX).items if i.node_id.startswith("no VM")] == []


def test_a_vm_joining_a_drain_of_ours_older_than_itself_gets_the_drain_cancelled():
    vm = node("n1", age=600)
    p = plan(snap([vm], [_drained("n1", registered_at=NOW - 500)]), settings(), MATRIX)
    assert [(i.kind, i.node_id, i.request_id) for i in p.items] == [(ItemKind.CANCEL_DRAIN, "n1", "c0ffee01")]
    # a drain of ours begun after the launch is this VM's own: not cancelled
    p = plan(snap([node("n1", age=1800)], [_drained("n1", registered_at=NOW - 1700)]),
             settings(), MATRIX)
    assert all(i.kind is not ItemKind.CANCEL_DRAIN for i in p.items)


def test_an_htcondor_ad_of_a_gone_vm_is_left_to_expire():
    """HTCondor keeps no record per name: its ads go with the VM, so there is nothing to give back."""
    ad = _drained("gone", ad={"Machine": "gone", "Draining": True})
    assert [i for i in plan(snap([], [ad]), settings(), MATRIX).items if i.node_id.startswith("no VM")] == []
