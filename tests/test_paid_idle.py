"""Paid idle nodes, whatever keeps them: an operator's hold, someone else's drain, a drain the
scheduler refuses us for lack of rights; never the nodes kept on purpose (min_nodes)."""

import policy_matrix

from nodemanager.commands.admin import _status_text
from nodemanager.console.paid_idle import paid_idle
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.core import plan
from nodemanager.model import CycleReport
from tests.core_world import NOW, node, settings, snap, worker

MATRIX = policy_matrix.load_default()
HOUR = 3600.0


def report(s, st, denied=None):
    return CycleReport(snapshot=s, plan=plan(s, st, MATRIX), denied=denied or {})


def test_each_node_paid_idle_past_the_bound_is_listed_with_what_keeps_it_and_its_cost():
    st = settings(idle_grace=300.0, paid_idle_after=3 * HOUR)
    nodes = [node(n) for n in ("held", "theirs", "refused", "fresh")]
    workers = [worker("held", idle_for=4 * HOUR),
               worker("theirs", "drain", draining=True, drain_reason="admin: bad disk", drain_since=NOW - 5 * HOUR),
               worker("refused", idle_for=4 * HOUR),
               worker("fresh", idle_for=2 * HOUR)]            # within the bound: not flagged yet
    r = report(snap(nodes, workers, held=frozenset({"held"})), st,
               denied={"drain:refused": "scontrol update: failed (exit 1): slurm_update error: Invalid user id"})
    found = {p.name: p for p in paid_idle(r, st)}
    assert set(found) == {"held", "theirs", "refused"}
    assert found["held"].label == "held" and found["held"].kept.startswith("held: ")
    assert found["theirs"].label == "foreign_drain" and "admin: bad disk" in found["theirs"].kept
    assert found["refused"].label == "no_permission"
    assert found["refused"].kept.startswith("drain refused: no permission (") and "Invalid user id" in found["refused"].kept
    price = st.sizes[0].price
    assert abs(found["theirs"].cost - price * 5) < 1e-6 and abs(found["held"].cost - price * 4) < 1e-6
    # dearest first, and the page says each in words
    assert [p.name for p in paid_idle(r, st)][0] == "theirs"
    doc = status_document(StatusView(report=r, last_cycle_at=NOW, core=st), None, NOW)
    assert [p["name"] for p in doc["paid_idle"]] == [p.name for p in paid_idle(r, st)]
    assert "theirs: paid idle for 5h 00m" in doc["paid_idle"][0]["text"]
    assert "paid idle: theirs: paid idle for 5h 00m" in _status_text(doc)      # nodemanager status
    assert "NO PERMISSION: drain refused: no permission on 1 node(s)" in _status_text(doc)


def test_nodes_kept_on_purpose_are_not_flagged():
    st = settings(idle_grace=300.0, paid_idle_after=HOUR, min_nodes=1)
    r = report(snap([node("a")], [worker("a", idle_for=10 * HOUR)]), st)
    assert next(e for e in r.plan.nodes if e.node_id == "a").blocked_by == "min_nodes"
    assert paid_idle(r, st) == ()
