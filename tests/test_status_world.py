"""The status page and metrics over a run of the embedded default (simulated cloud and pool, the
real core, the default matrix and the controller): every node is explained in every cycle, paid
time adds up, and an operator's hold through the HTTP API keeps a node from being drained."""

from __future__ import annotations

import re

import policy_matrix
import requests

from nodemanager.cycle.actuate import Actuator
from nodemanager.console.admin import AdminState
from nodemanager.cycle.controller import Controller
from nodemanager.console.metrics import Metrics
from nodemanager.configuration.settings import ManageSettings
from nodemanager.sim.world import SimWorld
from nodemanager.console import render_html
from nodemanager.console.status import StatusServer
from nodemanager.console.status_document import StatusView, status_document
from tests.fixtures.daemon import Time, sim_settings


class Run:
    def __init__(self) -> None:
        self.time = Time()
        self.settings = sim_settings()
        self.world = SimWorld(self.settings, self.time)
        self.admin = AdminState(clock=self.time)
        actuator = Actuator(self.world.cloud, self.world.scheduler, self.settings, clock=self.time)
        self.ctl = Controller(self.settings, policy_matrix.load_default(), actuator,
                              clock=self.time, admin=self.admin)
        self.metrics = Metrics(sizes=self.settings.core.sizes, clock=self.time)
        self.view = StatusView(started_at=self.time.now)

    def cycle(self):
        report = self.ctl.cycle(self.world.cloud.list_nodes(), self.time.now,
                                self.world.scheduler.poll())
        self.metrics.observe(report)
        self.view = StatusView(report=report, last_cycle_at=self.time.now,
                               started_at=self.view.started_at)
        return report


def test_every_node_is_explained_in_every_cycle_of_the_embedded_default() -> None:
    run = Run()
    seen_tuples, paid_expected, last = set(), 0.0, None
    for _ in range(120):
        report = run.cycle()
        doc = status_document(run.view, run.admin, run.time.now)
        rows = {n["node_id"]: n for n in doc["nodes"]}
        assert set(rows) == {c.id for c in report.snapshot.cloud_nodes}
        for row in rows.values():
            assert re.search(r"default\.matrix:\d+$", row["rule"]) and row["why"], row
            seen_tuples.add(row["tuple_text"])
        assert render_html(doc).count("<tr class='node") == len(rows)
        if last is not None:
            paid_expected += len(last.snapshot.cloud_nodes) * (report.snapshot.now - last.snapshot.now)
        last = report
        run.time.advance(5.0)
    paid = sum(s.value for f in run.metrics.registry.collect()
               if f.name == "nodemanager_paid_node_seconds" for s in f.samples
               if s.name.endswith("_total"))
    assert paid_expected > 0 and paid == paid_expected
    assert run.metrics.registry.get_sample_value("nodemanager_actions_total",
                                                 {"action": "destroy", "result": "ok"}) >= 1
    # nodes were seen booting, busy and idle along the way, each with its rule and reason
    assert {t.split(",")[0] for t in seen_tuples} >= {"(unpaired", "(busy", "(idle"}


def test_a_node_held_through_the_api_is_never_drained() -> None:
    run = Run()
    server = StatusServer(ManageSettings(port=0, token="t0ken-for-test"), lambda: run.view,
                          run.admin, run.metrics.registry, clock=run.time).start()
    try:
        held, after = None, []
        for _ in range(200):
            report = run.cycle()
            if held is not None:
                after.append(report)
            busy = [e for e in report.plan.nodes if e.tuple.worker_state == "busy"]
            if held is None and busy:
                held = busy[0]
                resp = requests.post(f"{server.url}/admin/hold/{held.name}", timeout=5,
                                     headers={"Authorization": "Bearer t0ken-for-test"})
                assert resp.status_code == 200 and resp.json()["node"] == held.node_id
            run.time.advance(5.0)
        assert held is not None
        acted = {o.node for r in after for o in r.outcomes if o.kind in ("drain", "destroy")}
        assert acted and not acted & {held.node_id, held.name}  # others went, it stayed
        doc = requests.get(server.url + "/status.json", timeout=5).json()
        row = next(n for n in doc["nodes"] if n["node_id"] == held.node_id)
        assert row["held"] is True and row["planned_action"] is None
        assert row["matrix_action"] == "START_DRAIN" and row["blocked_by"] == "held"
    finally:
        server.stop()
