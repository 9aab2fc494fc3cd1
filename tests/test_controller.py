"""The controller cycle with the real core, the default matrix and the embedded default world."""

import logging
import re

import policy_matrix

from nodemanager.cycle.actuate import Actuator
from nodemanager.console.admin import AdminState
from nodemanager.cloud.port import TAG_DESTROY, TAG_DRAIN
from nodemanager.cycle.controller import Controller
from nodemanager.cycle.controller_inputs import build_in_flight
from nodemanager.console.decision_log import DecisionLog, decision_details, decision_line
from nodemanager.console.history import NodeHistory
from nodemanager.model import ItemKind, Plan, Worker
from nodemanager.scheduler.port import DRAIN_REASON_PREFIX, SchedulerPoll
from nodemanager.sim.world import SimWorld
from tests.fixtures.daemon import Time, sim_settings

MATRIX = policy_matrix.load_default()


class Loop:
    """The world, an actuator and a controller, cycled every ``step`` seconds on a hand-set clock."""

    def __init__(self, settings, *, dry_run=False, admin=None, world=None, time=None):
        self.time = time or Time()
        self.settings = settings
        self.world = world or SimWorld(settings, self.time)
        self.actuator = None if dry_run else Actuator(self.world.cloud, self.world.scheduler, settings,
                                                      clock=self.time)
        self.ctl = Controller(settings, MATRIX, self.actuator, clock=self.time, dry_run=dry_run,
                              admin=admin)
        self.reports = []

    def cycle(self):
        nodes = self.world.cloud.list_nodes()
        poll = self.world.scheduler.poll()
        report = self.ctl.cycle(nodes, self.time.now, poll)
        self.reports.append(report)
        return report

    def run(self, seconds, step=5.0):
        end = self.time.now + seconds
        while self.time.now < end:
            self.cycle()
            self.time.advance(step)


def outcomes(loop, kind, result="ok"):
    return [o for r in loop.reports for o in r.outcomes if o.kind == kind and o.result == result]


def test_nodes_boot_work_drain_and_go_away(caplog):
    caplog.set_level(logging.INFO, "nodemanager.decisions")
    loop = Loop(sim_settings())
    loop.run(600)
    boots, drains, destroys = (outcomes(loop, k) for k in ("boot", "drain", "destroy"))
    assert len(boots) == 3                      # 12 one-core jobs on 4-core nodes
    assert {o.node for o in destroys} == {o.node for o in boots}
    assert len(drains) >= 3
    assert loop.world.sim_cloud.live_count() == 0
    stats = loop.world.pool.stats
    assert stats.completed == 12 and stats.killed == 0
    # operators see one line per decision: node, tuple, matched rule file:line, action
    drain_lines = [r.getMessage() for r in caplog.records if "-> drain" in r.getMessage()]
    assert drain_lines and "(idle, open, boot" in drain_lines[0] and "default.matrix:" in drain_lines[0]
    assert any(r.getMessage().startswith("outcome destroy") for r in caplog.records)


def test_dry_run_plans_and_logs_but_never_acts(caplog):
    caplog.set_level(logging.INFO, "nodemanager.decisions")
    loop = Loop(sim_settings(), dry_run=True)
    loop.run(120)
    assert loop.reports[0].plan.boots                           # it wanted to boot...
    assert set(loop.world.sim_cloud.calls) == {"list_nodes"}    # ...and called nothing else
    assert all(not r.outcomes for r in loop.reports)
    assert "boot dry-run: would 3 x small" in caplog.text


def test_steady_state_does_not_flood_the_log(caplog):
    settings = sim_settings(burst_size="0")
    loop = Loop(settings)
    for _ in range(200):
        loop.world.sim_cloud.create_node(settings.core.sizes[0], "n", {})
    loop.time.advance(30)
    loop.cycle()
    caplog.set_level(logging.DEBUG, "nodemanager.decisions")
    caplog.clear()
    loop.time.advance(1)
    loop.cycle()
    node_lines = [r for r in caplog.records if r.getMessage().startswith("node ")]
    assert node_lines == []                                     # nothing changed: only the summary
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["cycle"]
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []   # quiet at INFO


def test_stale_input_freezes_actions():
    loop = Loop(sim_settings())
    nodes = loop.world.cloud.list_nodes()
    poll = loop.world.scheduler.poll()
    report = loop.ctl.cycle(nodes, loop.time.now - 1000, poll)   # a cloud listing 1000s old
    assert report.plan.frozen and "stale" in report.plan.frozen
    assert report.plan.boots == () and report.outcomes == ()


def test_destroy_marked_in_tags_is_finished_even_if_the_plan_would_not(caplog):
    loop = Loop(sim_settings(burst_size="0"))
    node = loop.world.sim_cloud.create_node(loop.settings.core.sizes[0], "orphan", {})
    loop.world.sim_cloud.set_tags(node, {TAG_DESTROY: "999"})
    report = loop.cycle()
    [item] = [i for i in report.plan.items if i.kind == ItemKind.DESTROY]
    assert "finishing the destroy" in item.reason
    assert [o.result for o in report.outcomes if o.kind == "destroy"] == ["ok"]
    assert loop.world.sim_cloud.live_count() == 0


def test_in_flight_comes_from_tags_and_from_the_scheduler():
    loop = Loop(sim_settings(burst_size="0"))
    size = loop.settings.core.sizes[0]
    a = loop.world.sim_cloud.create_node(size, "a", {TAG_DRAIN: "100:7:50"})
    b = loop.world.sim_cloud.create_node(size, "b", {TAG_DESTROY: "200"})
    w = Worker(name="c-host", scheduler="x", cloud_id="cid", draining=True,
               drain_reason=f"{DRAIN_REASON_PREFIX}: matrix", drain_request_id="9", state_since=300.0)
    other = Worker(name="d-host", scheduler="x", cloud_id="did", draining=True, drain_reason="admin")
    flights = build_in_flight(loop.world.cloud.list_nodes(), SchedulerPoll((w, other), (), 0.0))
    assert {(f.node, f.action, f.since, f.request_id) for f in flights} == {
        (a.id, "drain", 100.0, "7"), (b.id, "destroy", 200.0, None), ("cid", "drain", 300.0, "9")}


def test_operator_hold_and_cancel(caplog):
    admin = AdminState(clock=Time())
    loop = Loop(sim_settings(), admin=admin)
    loop.run(40)                                  # nodes boot, jobs run
    nodes = loop.world.cloud.list_nodes()
    held = nodes[0].id
    admin.hold(held)
    loop.run(300)
    assert held not in {o.node for o in outcomes(loop, "drain")}
    assert loop.world.sim_cloud.node(held).state == "running"
    assert loop.world.sim_cloud.live_count() == 1
    # released, the idle node is drained (by the matrix or the operator); the operator cancels it
    admin.release(held)
    admin.drain(held)
    loop.cycle()
    assert TAG_DRAIN in loop.world.sim_cloud.node(held).tags
    admin.cancel(held)
    loop.time.advance(5)
    report = loop.cycle()
    assert [(o.kind, o.result) for o in report.outcomes if o.node == held] == [("cancel_drain", "ok")]
    assert TAG_DRAIN not in loop.world.sim_cloud.node(held).tags


def test_create_raised_but_listed_is_not_booted_twice():
    loop = Loop(sim_settings())
    loop.world.sim_cloud.create_fails_but_creates(3)
    loop.cycle()
    assert [o.result for o in loop.reports[0].outcomes] == ["failed"]   # stops at the first error
    loop.time.advance(5)
    loop.cycle()
    settled = [o for o in loop.reports[1].outcomes if o.kind == "boot"]
    assert settled[0].result == "ok" and "raised but the node is listed" in settled[0].detail
    loop.run(60)
    assert loop.world.sim_cloud.calls["create_node"] == 3
    assert loop.world.sim_cloud.live_count() == 3


def test_quota_error_is_learned_and_reported():
    loop = Loop(sim_settings())
    loop.world.sim_cloud.quotas["small"] = 2
    loop.cycle()
    results = [(o.result, "quota learned: 2 nodes" in o.detail) for o in loop.reports[0].outcomes]
    assert results[-1] == ("failed", True)
    loop.time.advance(5)
    report = loop.cycle()
    assert report.snapshot.quota == 2 and report.snapshot.blocked_sizes == frozenset({"small"})


def test_decision_lines_read_whole_with_details_at_debug(caplog):
    """An INFO decision line starts with the node, the action and its whole reason (never cut),
    then the matrix's tuple and the rule as file:line with what it says; the node id, size, raw
    state and the rule's full path follow at DEBUG; the history keeps the same words. No INFO
    line carries an epoch number (a create's request id is shown without its request time)."""
    caplog.set_level(logging.DEBUG)
    loop = Loop(sim_settings())
    loop.run(600)
    info = [r.getMessage() for r in caplog.records
            if r.levelno == logging.INFO and r.getMessage().startswith("node ") and " -> " in r.getMessage()]
    shape = re.compile(r"node \S+( drained)? -> [a-z_]+(: .+)?; \(([\w ]+, ){3}[\w ]+\)[^;]*, "
                       r"rule default\.matrix:\d+ says (None|START_DRAIN|START_SHUTDOWN)")
    assert info and all(shape.fullmatch(m) for m in info), [m for m in info if not shape.fullmatch(m)]
    assert not [m for m in info if "…" in m]
    e = next(e for r in loop.reports for e in r.plan.nodes if e.action is None and not e.blocked_by)
    long = e._replace(reason="the scheduler says " + "wordy " * 30 + "end")
    assert decision_line(long).startswith(f"node {e.name} -> none: the scheduler says wordy")
    assert f"{long.reason}; {long.tuple}" in decision_line(long)        # whole, never cut
    assert decision_details(long).endswith(" wordy end")
    history = NodeHistory()
    DecisionLog().decisions(Plan(now=loop.time.now, nodes=(long,)), False, history, None)
    assert str(history.events(long.node_id)[-1][2]).startswith("-> none: the scheduler says")
    details = [r.getMessage() for r in caplog.records
               if r.levelno == logging.DEBUG and " rule /" in r.getMessage()]
    assert details and all("default.matrix:" in m and " worker " in m for m in details)
    # no epoch seconds in what operators read: times are spans ("for 3m 20s")
    everything = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert any("(request " in m for m in everything)
    assert not [m for m in everything if re.search(r"\b1[6-9]\d{8}\b", m)]
