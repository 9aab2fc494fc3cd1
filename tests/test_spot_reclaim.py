"""Spot reclaim notices as an input: a node with a notice is drained within the cycle
that sees it, its capacity no longer counts (demand and min_nodes boot a replacement), and the
status page shows the notice and its deadline."""

from __future__ import annotations

import policy_matrix
from nodemanager.console import render_html
from nodemanager.core import plan
from nodemanager.model import CycleReport, ItemKind, Worker
from nodemanager.scheduler import classified
from nodemanager.console.status_document import StatusView, status_document
from tests.core_world import NOW, Demand, InFlight, node, settings, snap, worker

MATRIX = policy_matrix.load_default()
DEADLINE = NOW + 100


def startd(name: str, *, notice: float | None = None, jobs: int = 1) -> Worker:
    """An HTCondor partitionable slot running ``jobs`` one-core jobs, with the spot notice relay's
    attribute when ``notice`` is given."""
    ad: dict[str, object] = {"State": "Unclaimed", "Activity": "Idle", "NumDynamicSlots": jobs,
                             "Cpus": 4 - jobs, "TotalSlotCpus": 4}
    if notice is not None:
        ad["ReclaimNoticeDeadline"] = int(notice)
    return classified(Worker(name, "htcondor", state="Unclaimed/Idle", cpus=4, cpus_busy=jobs,
                             running_jobs=jobs, ram_mb=15200, last_heard=NOW - 5,
                             registered_at=NOW - 7000, ad=ad))


def test_a_notice_relayed_by_the_startd_drains_the_node_and_boots_a_replacement():
    """min_nodes 1 and one busy spot node: the notice makes it ``reclaimed``: drained at once
    (min_nodes does not hold back the drain of a node that is going anyway), not counted up, so a
    replacement boots in the same plan; without the notice nothing happens."""
    calm = plan(snap([node("spot-1")], [startd("spot-1")]), settings(min_nodes=1), MATRIX)
    assert calm.items == () and calm.boots == ()

    p = plan(snap([node("spot-1")], [startd("spot-1", notice=DEADLINE)]), settings(min_nodes=1), MATRIX)
    [e] = p.nodes
    assert e.tuple.worker_state == "reclaimed" and e.matrix_action.value == "START_DRAIN"
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DRAIN, "spot-1")]
    assert "spot reclaim notice" in e.reason and "UTC" in e.reason
    assert [(b.size, b.count) for b in p.boots] == [("small", 1)]


def test_queued_jobs_that_fitted_on_the_reclaimed_node_boot_a_replacement():
    demand = [Demand(cpus=3, count=1)]
    kept = plan(snap([node("spot-1")], [startd("spot-1")], demand), settings(), MATRIX)
    assert kept.boots == ()  # three free cores take the job
    p = plan(snap([node("spot-1")], [startd("spot-1", notice=DEADLINE)], demand), settings(), MATRIX)
    assert [i.kind for i in p.items] == [ItemKind.DRAIN]
    assert [(b.size, b.count) for b in p.boots] == [("small", 1)]


def test_a_drained_reclaimed_startd_is_destroyed():
    drained = classified(Worker("spot-1", "htcondor", state="Drained/Idle", cpus=4, last_heard=NOW - 5,
                                registered_at=NOW - 7000, draining=True,
                                drain_reason="nodemanager:spot-1",
                                ad={"State": "Drained", "Activity": "Idle", "NumDynamicSlots": 0,
                                    "ReclaimNoticeDeadline": int(DEADLINE)}))
    ours = InFlight("spot-1", "drain", NOW - 60, size="small")
    p = plan(snap([node("spot-1")], [drained], in_flight=[ours]), settings(min_nodes=1), MATRIX)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DESTROY, "spot-1")]
    assert "our drain" in p.nodes[0].reason and "spot reclaim notice" in p.nodes[0].reason


def test_a_slurm_node_drained_by_the_relay_is_reclaimed_not_someone_elses_drain():
    """The SLURM relay drains the node itself with reason ``spot-reclaim EPOCH``: that is no
    administrator's drain to leave alone; once drained (no jobs) the node is destroyed."""
    reason = f"spot-reclaim {int(DEADLINE)}"
    running = worker("spot-1", "drng", drain_reason=reason, draining=True)
    assert running.classified.state == "reclaimed" and running.classified.foreign_drain is None
    p = plan(snap([node("spot-1")], [running]), settings(min_nodes=1), MATRIX)
    assert p.items == () and "already draining" in p.nodes[0].reason
    assert [(b.size, b.count) for b in p.boots] == [("small", 1)]
    done = worker("spot-1", "drain", drain_reason=reason, draining=True)
    p = plan(snap([node("spot-1")], [done]), settings(min_nodes=1), MATRIX)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DESTROY, "spot-1")]


def test_a_notice_in_the_cloud_listing_drains_and_a_stopped_preempted_vm_is_destroyed():
    running = node("spot-1", reclaim_at=DEADLINE)
    stopped = node("spot-2", state="stopped", reclaim_at=NOW - 60)
    p = plan(snap([running, stopped], [worker("spot-1", "idle", idle_for=10), worker("spot-2", "idle")]),
             settings(min_nodes=2), MATRIX)
    assert sorted((i.kind.value, i.node_id) for i in p.items) == [("destroy", "spot-2"), ("drain", "spot-1")]
    assert [(b.size, b.count) for b in p.boots] == [("small", 2)]
    assert "from the cloud listing" in p.nodes[0].reason


def test_the_status_page_shows_the_notice_and_its_deadline():
    s = snap([node("spot-1")], [startd("spot-1", notice=DEADLINE)])
    report = CycleReport(snapshot=s, plan=plan(s, settings(), MATRIX))
    doc = status_document(StatusView(report=report, last_cycle_at=NOW), None, NOW)
    [n] = doc["nodes"]
    assert n["tuple"]["worker_state"] == "reclaimed" and n["planned_action"] == "drain"
    assert "1970-01-12 13:48:20 UTC" in n["why"]  # DEADLINE, in UTC
    page = render_html(doc)
    assert "reclaimed" in page and "spot reclaim notice: the cloud takes it back at 1970-01-12 13:48:20 UTC" in page


def test_a_snapshot_file_carries_the_listing_notice_and_the_walltime():
    """``nodemanager plan --snapshot`` sees what the daemon saw: a notice from the cloud listing
    and the jobs' walltime survive the snapshot JSON."""
    from nodemanager import snapshot as sj
    s = snap([node("spot-1", reclaim_at=DEADLINE)], [worker("spot-1", "idle", idle_for=10)],
             [Demand(cpus=1, count=2, walltime=7200.0)])
    doc = sj.to_json(s)
    assert doc["cloud_nodes"][0]["reclaim_at"] == DEADLINE and doc["demand"][0]["walltime"] == 7200.0
    again = sj.loads(sj.dumps(s))
    assert again.cloud_nodes == s.cloud_nodes and again.demand == s.demand
    assert plan(again, settings(), MATRIX).items[0].kind is ItemKind.DRAIN


def test_a_drained_reclaimed_node_is_never_taken_back_for_queued_jobs():
    """Queued jobs may cancel a drain of ours to reuse a drained node, but not one the cloud is
    taking back: it is destroyed and the jobs get a new node."""
    drained = classified(Worker("spot-1", "htcondor", state="Drained/Idle", cpus=4, ram_mb=15200,
                                last_heard=NOW - 5, registered_at=NOW - 7000, draining=True,
                                drain_reason="nodemanager:spot-1", drain_request_id="7",
                                ad={"State": "Drained", "Activity": "Idle", "NumDynamicSlots": 0,
                                    "Cpus": 4, "ReclaimNoticeDeadline": int(DEADLINE)}))
    ours = InFlight("spot-1", "drain", NOW - 60, size="small", request_id="7")
    demand = [Demand(cpus=2, count=1)]
    p = plan(snap([node("spot-1")], [drained], demand, [ours]), settings(), MATRIX)
    assert [(i.kind, i.node_id) for i in p.items] == [(ItemKind.DESTROY, "spot-1")]
    assert [(b.size, b.count) for b in p.boots] == [("small", 1)]
