"""The status server: /status.json, the HTML page, /metrics and /healthz, over real HTTP."""

from __future__ import annotations

import dataclasses
import logging
import socket

import pytest
import requests

from nodemanager.console.admin import AdminState
from nodemanager.console.metrics import Metrics
from nodemanager.model import Outcome
from nodemanager.configuration.settings import CloudSettings, ManageSettings, Settings
from nodemanager.console import render_html
from nodemanager.console.status import StatusServer, settings_secrets
from nodemanager.console.status_document import StatusView, status_document, when_text
from tests.fixtures.observability import SIZES, T0, Clock, sample_report


def test_status_json_explains_every_node(status_server) -> None:
    doc = requests.get(status_server.url + "/status.json", timeout=5).json()
    nodes = {n["node_id"]: n for n in doc["nodes"]}
    assert set(nodes) == {e.node_id for e in status_server.holder["view"].report.plan.nodes}
    for node in nodes.values():
        assert node["tuple_text"].startswith("(") and node["rule"].startswith("default.matrix:")
        assert node["why"]
    idle = nodes["i-idle"]
    assert idle["tuple"] == {"worker_state": "idle", "window": "open",
                             "boot_grace": "boot exceeded", "idle_grace": "idle exceeded"}
    assert (idle["rule"], idle["matrix_action"], idle["planned_action"]) == \
        ("default.matrix:30", "START_DRAIN", "drain")
    assert idle["last_outcome"] == "drain ok: drain started (request 8)"
    blocked = nodes["i-min"]
    assert blocked["planned_action"] is None and blocked["blocked_by"] == "min_nodes"
    assert "fewer than min_nodes" in blocked["why"]
    assert nodes["i-grace"]["next_change_text"] == "idle grace ends 14:16:40 UTC (in 3m 20s)"
    assert nodes["i-held"]["held"] is True
    assert nodes["i-drain"]["in_flight"] == {"action": "drain", "since": T0 - 1800,
                                             "for_seconds": 1800.0}
    assert doc["counters"] == {"cycles": 1, "cloud_errors": 0}
    assert doc["summary"]["blocked"] == {"held": 1, "min_nodes": 1}
    assert doc["summary"]["demand"] == {"jobs": 7, "cpus": 37}
    assert [w["name"] for w in doc["unpaired_workers"]] == ["w9"]
    assert doc["polls"]["cloud"]["age_seconds"] == 20
    assert doc["notes"] == ["5 one-core jobs fit on running nodes: no boot"]


def test_next_change_says_the_date_when_not_today() -> None:
    assert when_text(T0 + 86400 + 60, "boot grace ends", T0) == \
        "boot grace ends 2026-09-22 14:14:20 UTC (in 24h 01m)"
    assert when_text(T0 - 5, None, T0) == "changes 14:13:15 UTC (5s ago)"
    assert when_text(None, "x", T0) is None


def test_html_page_has_one_row_per_node_and_escapes_text() -> None:
    report = sample_report()
    nasty = report.plan.nodes[0]._replace(reason="<script>alert(1)</script>")
    plan = dataclasses.replace(report.plan, nodes=(nasty,) + report.plan.nodes[1:])
    view = StatusView(report=dataclasses.replace(report, plan=plan), last_cycle_at=T0)
    page = render_html(status_document(view, None, T0))
    assert page.count("<tr class='node") == 8
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "idle grace ends 14:16:40 UTC" in page


def test_a_standby_page_names_the_leader() -> None:
    view = StatusView(report=sample_report(), last_cycle_at=T0,
                      ha="standby; leader is head1:4242 since 2026-11-23 23:22:31Z")
    doc = status_document(view, None, T0)
    assert doc["ha"] == view.ha
    assert "<span id='ha'>standby; leader is head1:4242 since 2026-11-23 23:22:31Z</span>" in render_html(doc)
    assert "id='ha'" not in render_html(status_document(StatusView(report=sample_report()), None, T0))


def test_html_page_over_http(status_server) -> None:
    resp = requests.get(status_server.url + "/", timeout=5)
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
    assert "<table id='nodes'>" in resp.text and "nm-small-5" in resp.text
    assert "<li>5 one-core jobs fit on running nodes: no boot</li>" in resp.text
    assert "<td class='rule' title='default.matrix:30'>default.matrix:30</td>" in resp.text


def test_metrics_endpoint_serves_the_private_registry(status_server) -> None:
    resp = requests.get(status_server.url + "/metrics", timeout=5)
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("text/plain")
    assert 'nodemanager_nodes_held 1.0' in resp.text
    assert "python_gc_objects_collected_total" not in resp.text  # not the global registry


def test_healthz_follows_the_age_of_the_last_cycle(status_server, clock: Clock) -> None:
    resp = requests.get(status_server.url + "/healthz", timeout=5)
    assert resp.status_code == 200 and resp.text.startswith("ok")
    clock.now += 91
    resp = requests.get(status_server.url + "/healthz", timeout=5)
    assert resp.status_code == 503
    assert resp.text.strip() == ("last cycle finished 1m 31s ago (limit 1m 30s): "
                                 "the controller is stuck or stopped")


def test_before_the_first_cycle(clock: Clock) -> None:
    server = StatusServer(ManageSettings(port=0), lambda: StatusView(started_at=T0 - 12),
                          clock=clock).start()
    try:
        resp = requests.get(server.url + "/healthz", timeout=5)
        assert resp.status_code == 503 and "no cycle has finished yet (up 12s)" in resp.text
        doc = requests.get(server.url + "/status.json", timeout=5).json()
        assert doc["nodes"] == [] and doc["healthy"] is False
        assert requests.get(server.url + "/", timeout=5).status_code == 200
        assert requests.get(server.url + "/metrics", timeout=5).status_code == 404
    finally:
        server.stop()


def test_unknown_paths_and_methods(status_server) -> None:
    assert requests.get(status_server.url + "/nope", timeout=5).status_code == 404
    assert requests.get(status_server.url + "/admin/pause", timeout=5).status_code == 405
    assert requests.post(status_server.url + "/status.json", timeout=5).status_code == 404


def test_listens_on_loopback_by_default() -> None:
    settings = ManageSettings()
    assert settings.address == "127.0.0.1"
    server = StatusServer(dataclasses.replace(settings, port=0), lambda: StatusView()).start()
    try:
        host, port = server.address
        assert host == "127.0.0.1"
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        server.stop()


def test_disabled_port_and_busy_port_give_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"\[Manage\] port = -1"):
        StatusServer(ManageSettings(port=-1), lambda: StatusView()).start()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=rf"cannot listen on 127.0.0.1:{port} "
                                          r"\(\[Manage\] address/port\)"):
            StatusServer(ManageSettings(port=port), lambda: StatusView()).start()


def test_no_secret_in_responses_or_logs(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    token, cloud_key = "tok-0123456789", "AKIASECRETKEY99"
    report = sample_report()
    leaky = Outcome("boot", "nm-large-4", "failed", f"AuthFailure for key {cloud_key}", T0,
                    size="large")
    report = dataclasses.replace(report, outcomes=(leaky,),
                                 matrix_error=f"cannot read s3://{cloud_key}/m.matrix")
    metrics = Metrics(sizes=SIZES, clock=clock)
    metrics.observe(report)
    caplog.set_level(logging.DEBUG)
    settings = Settings(manage=ManageSettings(port=0, token=token),
                        cloud=CloudSettings(driver="ec2", driver_args={"key": cloud_key,
                                                                       "region": "us-east-1"}))
    assert settings_secrets(settings) == (token, cloud_key)
    server = StatusServer(settings.manage, lambda: StatusView(report=report, last_cycle_at=T0),
                          AdminState(clock=clock), metrics.registry, clock=clock,
                          secrets=settings_secrets(settings)).start()
    try:
        bodies = [requests.get(server.url + p, timeout=5).text
                  for p in ("/", "/status.json", "/metrics", "/healthz")]
        auth = {"Authorization": f"Bearer {token}"}
        bodies += [requests.post(server.url + p, headers=h, timeout=5).text
                   for p, h in (("/admin/pause", auth), ("/admin/hold/i-idle", auth),
                                ("/admin/hold/i-idle", {"Authorization": f"Bearer {token}x"}),
                                ("/admin/hold/i-idle", {}))]
    finally:
        server.stop()
    assert "***" in bodies[1] and "AuthFailure for key ***" in bodies[1]
    for text in bodies + [caplog.text]:
        assert token not in text and cloud_key not in text
