"""Names from the cloud or the scheduler cannot forge a log line or repaint a terminal: control
characters reach logs and text output escaped (JSON output escapes them itself)."""

from __future__ import annotations

import dataclasses
import io
import json
import logging

import policy_matrix
import pytest

from nodemanager.cycle.actuate import Actuator
from nodemanager.cli import main
from nodemanager.commands.run import setup_logging
from nodemanager.cycle.controller import Controller
from nodemanager.sim.world import SimWorld
from nodemanager.text import printable
from tests.fixtures.daemon import Time, sim_settings
from tests.test_core_snapshot import MINIMAL, with_

EVIL = "evil\r2026-01-01 INFO forged"
SHOWN = "evil\\x0d2026-01-01 INFO forged"


@pytest.mark.parametrize("raw, shown", [
    ("cn-small-1", "cn-small-1"),
    ("naïve-節点-é", "naïve-節点-é"),                   # printable Unicode stays as it is
    (EVIL, SHOWN),
    ("a\nb\tc\x00d\x1b[2Je\x7f", "a\\x0ab\\x09c\\x00d\\x1b[2Je\\x7f"),
    ("c1\x85\x9b", "c1\\x85\\x9b"),
    ("line\u2028para\u2029", "line\\u2028para\\u2029"),
    ("bidi\u202egnp.exe\u2066\u200f", "bidi\\u202egnp.exe\\u2066\\u200f"),
    ("tag\U000e0041", "tag\\U000e0041"),
])
def test_printable_escapes_what_a_terminal_would_obey(raw, shown):
    assert printable(raw) == shown


def test_a_node_name_from_the_cloud_cannot_forge_a_log_line():
    """The daemon's log handler, the simulated cloud naming VMs after a hostile cluster name, and
    the real controller logging its decisions about them."""
    stream = io.StringIO()
    handler = setup_logging("info", stream)
    try:
        time = Time()
        settings = sim_settings()
        settings = dataclasses.replace(settings, cloud=dataclasses.replace(settings.cloud, cluster=EVIL))
        world = SimWorld(settings, time)
        ctl = Controller(settings, policy_matrix.load_default(),
                         Actuator(world.cloud, world.scheduler, settings, clock=time), clock=time)
        for _ in range(40):
            ctl.cycle(world.cloud.list_nodes(), time.now, world.scheduler.poll())
            time.advance(5.0)
    finally:
        logging.getLogger().removeHandler(handler)
    out = stream.getvalue()
    assert f"node {SHOWN}-small-1" in out
    assert "\r" not in out


def test_plan_table_escapes_names_and_json_keeps_them(tmp_path, capsys):
    snap = with_(("cloud_nodes", 0, "name"), EVIL)
    snap["workers"][0]["name"] = EVIL
    f = tmp_path / "s.json"
    f.write_text(json.dumps(snap))
    assert main(["plan", "--snapshot", str(f)]) == 0
    out = capsys.readouterr().out
    assert SHOWN in out and "\r" not in out
    assert main(["plan", "--snapshot", str(f), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"][0]["name"] == EVIL


def test_plan_errors_escape_what_they_quote(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({**MINIMAL, "x\x1b[2J": 1}))
    assert main(["plan", "--snapshot", str(f)]) == 1
    err = capsys.readouterr().err
    assert "x\\x1b[2J: unknown field" in err and "\x1b" not in err


def test_status_text_escapes_names_from_the_daemon(status_server, monkeypatch, capsys):
    report = status_server.holder["view"].report
    first = report.plan.nodes[0]._replace(name=EVIL, reason="busy\n2026 INFO forged")
    plan = dataclasses.replace(report.plan, nodes=(first, *report.plan.nodes[1:]))
    status_server.holder["view"] = dataclasses.replace(status_server.holder["view"],
                                                       report=dataclasses.replace(report, plan=plan))
    monkeypatch.setenv("NODEMANAGER_URL", status_server.url)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert SHOWN in out and "busy\\x0a2026 INFO forged" in out
    assert "\r" not in out and "\n2026 INFO" not in out


def test_matrix_explain_escapes_the_value_it_quotes(capsys):
    assert main(["matrix", "explain", "idle\x1b]0;pwned\x07", "open", "boot exceeded",
                 "idle exceeded"]) == 2
    err = capsys.readouterr().err
    assert "'idle\\x1b]0;pwned\\x07'" in err and "\x1b" not in err
