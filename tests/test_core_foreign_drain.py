"""Nodes drained by someone else: left alone by every path of the plan, unless
the site opts in to reclaiming them after ``[Drain] reclaim_foreign_after``."""

import json

import policy_matrix

from nodemanager.cli import main
from nodemanager.core import plan
from nodemanager.core.plan import RECLAIM_ENDS
from nodemanager.model import Action, ItemKind
from tests.core_world import NOW, Demand, InFlight, node, settings, snap, worker

MATRIX = policy_matrix.load_default()
ADMIN = "admin: bad dimm, do not touch"


def run(s, st=None, matrix=MATRIX, **kw):
    return plan(s, st or settings(), matrix, **kw)


def explained(p, node_id):
    return next(e for e in p.nodes if e.node_id == node_id)


def admin_drained(name="a", state="drain", **kw):
    kw.setdefault("drain_since", NOW - 600)
    return worker(name, state, draining=True, drain_reason=ADMIN, **kw)


def test_plan_command_leaves_a_node_an_admin_drained_alone(tmp_path, capsys):
    """The issue's reproduction: `nodemanager plan` said START_SHUTDOWN destroy for it."""
    snapshot = {"now": NOW, "polled_at": {"cloud": NOW - 20, "scheduler": NOW - 10},
                "cloud_nodes": [{"id": "i-1", "name": "cn-1", "size": "small", "launched_at": NOW - 7200}],
                "workers": [{"name": "cn-1", "scheduler": "slurm", "state": "drain",
                             "last_heard": NOW - 10, "registered_at": NOW - 7000, "cpus": 4,
                             "drain_reason": ADMIN}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snapshot))
    assert main(["plan", "--snapshot", str(path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("i-1 "))
    # idle, as it is: paid for and doing nothing, and left alone whatever the matrix says
    assert row.split()[3] == "idle" and row.split()[-2:] == ["-", "foreign_drain"]
    assert f"i-1: left alone (matrix says START_DRAIN): drained by someone else: {ADMIN}; no job runs" in out


def test_slurm_and_htcondor_foreign_drains_are_idle_or_busy_with_their_reason_and_age():
    condor_ad = {"State": "Drained", "Activity": "Idle", "Draining": True, "DrainReason": "Defrag pool",
                 "NumDynamicSlots": 0, "LastDrainStartTime": NOW - 900}
    nodes = [node("a"), node("b"), node("c"), node("ours")]
    workers = [admin_drained("a"), admin_drained("b", "drng", cpus_busy=1),
               worker("c", scheduler="htcondor", state=None, ad=condor_ad, draining=True,
                      drain_reason="Defrag pool"),
               worker("ours", "drain", draining=True, drain_reason="nodemanager: idle [req=1]")]
    p = run(snap(nodes, workers))
    for nid, reason, state, ago in (("a", ADMIN, "idle", " 10m 00s ago"), ("b", ADMIN, "busy", " 10m 00s ago"),
                                    ("c", "Defrag pool", "idle", "")):
        e = explained(p, nid)
        assert e.tuple.worker_state == state and e.action is None and e.blocked_by == "foreign_drain"
        assert f"drained by someone else{ago}: {reason}" in e.reason
    # idle since their drain began (when known): how long it has been paid for nothing
    assert explained(p, "a").idle_since == NOW - 600 and explained(p, "b").idle_since is None
    # a drain with our prefix is not someone else's: drained, down, destroyed as before
    assert {i.node_id: i.kind for i in p.items} == {"ours": ItemKind.DESTROY}


def test_no_path_acts_on_it_even_with_a_stale_drain_tag_of_ours():
    """Our drain tag is still there but an administrator re-drained the node with their reason:
    not finished as ours (destroy), not cancelled for demand, not escalated."""
    nodes = [node("a")]
    demand = (Demand(cpus=1, ram_mb=100, count=1),)
    flights = (InFlight(node="a", action="drain", since=NOW - 3600, request_id="7"),)
    calls = []

    def escalation(w, flight, now):
        calls.append(w.name)
        return "fast"

    for state in ("drain", "drng"):
        p = run(snap(nodes, [admin_drained("a", state, cpus_busy=0)], demand, flights),
                escalation=escalation)
        assert [i for i in p.items if i.node_id == "a"] == [], state
        assert calls == []
        assert "drained by someone else" in explained(p, "a").reason
        # the queued job is not placed on it: a new node is booted instead
        assert sum(b.count for b in p.boots) == 1


def test_no_matrix_and_no_operator_drain_act_on_it():
    kill_all = policy_matrix.parse("* | * | * | * -> START_SHUTDOWN\n", "kill.matrix")
    drain_all = policy_matrix.parse("* | * | * | * -> START_DRAIN\n", "drain.matrix")
    nodes, workers = [node("a")], [admin_drained("a", "drng", cpus_busy=1)]
    for m, action in ((kill_all, Action.START_SHUTDOWN), (drain_all, Action.START_DRAIN)):
        p = run(snap(nodes, workers), matrix=m)
        e = explained(p, "a")
        assert p.items == () and e.matrix_action is action
        assert e.blocked_by == "foreign_drain" and f"drained by someone else 10m 00s ago: {ADMIN}" in e.reason
    p = run(snap(nodes, workers, forced_drains=frozenset({"a"})))
    assert p.items == ()


def test_free_cores_of_a_foreign_draining_node_take_no_demand_and_it_is_not_up():
    nodes, workers = [node("a")], [admin_drained("a", "drng", cpus_busy=1)]
    p = run(snap(nodes, workers, demand=(Demand(cpus=1, ram_mb=100, count=2),)))
    assert sum(b.count for b in p.boots) == 1          # two 1-core jobs on one new 4-core node
    p = run(snap(nodes, workers), settings(min_nodes=1))
    assert sum(b.count for b in p.boots) == 1          # min_nodes: the drained node cannot run jobs


def test_reclaim_after_the_configured_delay():
    st = settings(reclaim_foreign_after=3600.0)
    nodes = [node("a")]
    young = run(snap(nodes, [admin_drained("a", drain_since=NOW - 600)]), st)
    e = explained(young, "a")
    assert young.items == () and e.tuple.worker_state == "idle"
    assert (e.next_change, e.next_change_what) == (NOW + 3000, RECLAIM_ENDS)
    old = run(snap(nodes, [admin_drained("a", drain_since=NOW - 4000)]), st)
    e = explained(old, "a")
    assert e.tuple.worker_state == "down" and e.action is ItemKind.DESTROY
    assert "drained by someone else for 4000s" in e.reason and ADMIN in e.reason
    # when their drain began is unknown, it is never reclaimed
    unknown = run(snap(nodes, [admin_drained("a", drain_since=0.0)]), st)
    assert unknown.items == () and explained(unknown, "a").tuple.worker_state == "idle"
    # off by default
    assert run(snap(nodes, [admin_drained("a", drain_since=NOW - 10 ** 6)])).items == ()
