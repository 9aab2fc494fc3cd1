"""A startd someone else drains (``condor_drain -reason "admin: ..."``) is never touched: the
real Controller and Actuator over the simulated world, whose scheduler is the real
HTCondor adapter over the simulated startds (nodemanager/sim/startd.py)."""

from __future__ import annotations

import logging
import re

from nodemanager.sim.startd import Job
from nodemanager.console import render_html
from nodemanager.console.status_document import StatusView, status_document
from tests.fixtures.daemon import sim_settings
from tests.test_controller import Loop

ADMIN = "admin: bad dimm, do not touch"


def test_a_foreign_drain_is_left_alone_while_our_idle_nodes_go(caplog):
    caplog.set_level(logging.DEBUG, "nodemanager.decisions")
    loop = Loop(sim_settings())
    # startds with an hour's MaxJobRetirementTime: with HTCondor's default of 0 a graceful drain
    # evicts running jobs at once, as the real startd does
    loop.world.pool.max_retirement = 3600.0
    loop.run(60)                                   # 12 one-core jobs: three 4-core nodes run them
    nodes = sorted(loop.world.cloud.list_nodes(), key=lambda n: n.name)
    assert len(nodes) == 3
    theirs = nodes[0]
    startd = loop.world.pool.startd(theirs.id)
    assert startd is not None and startd.dslots                      # running jobs
    startd.drain(loop.time.now, reason=ADMIN)      # graceful: the jobs finish, then it is Drained
    since = len(loop.reports)
    loop.run(300)
    # the queue comes back: it is not resumed or given jobs; a new node is booted for them
    for i in range(4):
        loop.world.pool.submit(Job(f"late{i}", cpus=1, ram_mb=100, runtime=90.0))
    loop.run(900)

    assert [n.id for n in loop.world.cloud.list_nodes()] == [theirs.id]   # ours went, theirs stayed
    ad = startd.pslot_ad(loop.time.now)
    assert (ad["State"], ad["Activity"], ad["DrainReason"]) == ("Drained", "Idle", ADMIN)
    touched = [o for r in loop.reports[since:] for o in r.outcomes if o.node == theirs.id]
    assert touched == []
    why = next(e for e in loop.reports[-1].plan.nodes if e.node_id == theirs.id)
    assert why.tuple.worker_state == "idle" and _theirs(why.reason)
    # the INFO line names the block; the whole reason, the admin's words, follows at DEBUG
    assert any(r.levelno == logging.INFO and r.message.startswith(f"node {theirs.name} ")
               and "blocked by foreign_drain" in r.message for r in caplog.records)
    assert any(r.levelno == logging.DEBUG and r.message.startswith(f"node {theirs.name} ")
               and _theirs(r.message) for r in caplog.records)
    doc = status_document(StatusView(report=loop.reports[-1], last_cycle_at=loop.time.now), None,
                          loop.time.now)
    row = next(n for n in doc["nodes"] if n["node_id"] == theirs.id)
    assert row["blocked_by"] == "foreign_drain" and _theirs(row["why"])
    assert _theirs(render_html(doc))
    stats = loop.world.pool.stats
    assert stats.completed == 16 and stats.killed == 0


def _theirs(text: str) -> bool:
    """The words for the administrator's drain: whose, how long ago, their reason."""
    return re.search(rf"drained by someone else [^:]* ago: {re.escape(ADMIN)}", text) is not None
