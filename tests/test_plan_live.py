"""``GET /snapshot.json`` and ``nodemanager plan --live``: preview a matrix or config edit on the
running daemon's last cycle. The daemon is the real one (embedded default world, injected clock,
status server on a free loopback port); the CLI is called as ``nodemanager`` would be."""

from __future__ import annotations

import dataclasses
import http.server
import json
import re
import pathlib
import socket
import threading

import pytest
import requests

from nodemanager.cli import main
from nodemanager.model import ItemKind
from nodemanager.snapshot import loads
from nodemanager.console.status_document import StatusView
from tests.test_daemon import REPO, daemons, write_config  # noqa: F401 (daemons: a fixture)

TOKEN = "s3cret-token"


# -- the endpoint ---------------------------------------------------------------------------------

def test_snapshot_endpoint_serves_the_last_cycles_snapshot_to_the_token_holder(status_server):
    url = status_server.url + "/snapshot.json"
    resp = requests.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert resp.status_code == 200 and resp.headers["Content-Type"] == "application/json"
    assert loads(resp.text) == status_server.holder["view"].report.snapshot
    # through a proxy on this host (or to a name other than loopback): the token is needed
    assert requests.get(url, timeout=10, headers={"X-Forwarded-For": "192.0.2.7"}).status_code == 401
    wrong = requests.get(url, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.status_code == 403 and wrong.json() == {"error": "wrong token"}


def test_snapshot_endpoint_redacts_secrets_and_waits_for_a_first_cycle(status_server):
    report = status_server.holder["view"].report
    snap = report.snapshot
    leaky = dataclasses.replace(snap.cloud_nodes[0], tags={"note": f"token={TOKEN}"})
    status_server.holder["view"] = StatusView(report=dataclasses.replace(
        report, snapshot=dataclasses.replace(snap, cloud_nodes=(leaky, *snap.cloud_nodes[1:]))))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = requests.get(status_server.url + "/snapshot.json", headers=headers, timeout=10).text
    assert TOKEN not in body and loads(body).cloud_nodes[0].tags == {"note": "token=***"}
    status_server.holder["view"] = StatusView()
    resp = requests.get(status_server.url + "/snapshot.json", headers=headers, timeout=10)
    assert resp.status_code == 503 and "no cycle has finished yet" in resp.json()["error"]


# -- plan --live against a running daemon -----------------------------------------------------------

@pytest.fixture
def live(tmp_path, daemons):
    """A running daemon (matrix file and admin token configured) whose last cycle planned a drain
    of an idle node; returns (daemon, its config file, its matrix file)."""
    matrix = tmp_path / "running.matrix"
    matrix.write_text((REPO / "policy_matrix" / "default.matrix").read_text())
    cfg = pathlib.Path(write_config(tmp_path / "nm.ini", port="0", matrix=str(matrix)))
    cfg.write_text(cfg.read_text().replace("\ntoken =\n", f"\ntoken = {TOKEN}\n"))
    d = daemons(str(cfg)).start()
    for _ in range(400):
        d.clock.advance(5.0)
        assert d.system.settle(10.0)
        if _drained_idle(d):
            return d, cfg, matrix
    raise AssertionError("the embedded default never planned a drain of an idle node")


def _drained_idle(d) -> set[str]:
    """The nodes the daemon's last cycle drains because they are idle (computed from its report)."""
    return {e.node_id for e in d.last_report.plan.nodes
            if e.action == ItemKind.DRAIN and e.tuple.worker_state == "idle"}


def _plan_live(capsys, d, *args: str) -> tuple[int, str, str]:
    code = main(["plan", "--live", "--url", d.status_server.url, *args])
    out, err = capsys.readouterr()
    return code, out, err


def _changed_nodes(out: str) -> set[str]:
    """The node ids of the change table (the lines between the header row and the blank line)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("NODE "))
    return {line.split()[0] for line in lines[start + 1:lines.index("", start)]}


def test_the_running_files_change_nothing(live, capsys):
    d, cfg, _ = live
    code, out, err = _plan_live(capsys, d, "--config", str(cfg))
    assert (code, err) == (0, "")
    assert "no node and no boot would change" in out and "the running matrix" in out


def test_a_matrix_that_never_drains_idle_nodes_names_exactly_the_nodes_drained_now(live, capsys, tmp_path):
    d, cfg, matrix = live
    expected = _drained_idle(d)
    new = tmp_path / "new.matrix"
    new.write_text(matrix.read_text().replace("idle exceeded -> START_DRAIN", "idle exceeded -> None"))
    code, out, err = _plan_live(capsys, d, "--config", str(cfg), "--matrix", str(new))
    assert (code, err) == (1, "")
    assert _changed_nodes(out) == expected
    header = out.splitlines()[0]
    assert f"{d.last_report.snapshot.now:.0f}" not in header  # a clock time, not epoch seconds
    assert re.search(r": cycle at (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d \(.+ago\), ", header), header
    for node in expected:
        row = next(line for line in out.splitlines() if line.startswith(node + " "))
        assert "running.matrix:" in row and "new.matrix:" in row and row.endswith("drain -> -")
    code, out, _ = _plan_live(capsys, d, "--config", str(cfg), "--matrix", str(new), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and {n["id"] for n in doc["nodes"]} == expected
    assert all(n["action"] == {"old": "drain", "new": None} for n in doc["nodes"])
    assert doc["cycle_at"] == d.last_report.snapshot.now


def test_the_docs_sample_is_what_plan_live_prints(live, capsys, tmp_path):
    """docs/plan.md's ``plan --live`` sample, the same edit on the embedded demo: the same rows,
    reasons and count; the header differs only in the URL, times, paths and hashes. A joined
    node's tuple is the matrix's (the page shows it as "joined"): unchanged, shown once."""
    d, cfg, matrix = live
    new = tmp_path / "new.matrix"
    new.write_text(matrix.read_text().replace("idle exceeded -> START_DRAIN", "idle exceeded -> None"))
    _, out, _ = _plan_live(capsys, d, "--config", str(cfg), "--matrix", str(new))
    doc = (REPO / "docs" / "plan.md").read_text().split("$ nodemanager plan --live --config", 1)[1]
    sample = doc.split("```", 1)[0].splitlines()[1:]
    header = r"^http://\S+: cycle at .+ \(.+ ago\), \d+ nodes; planned with \S+ and matrix [0-9a-f]{12} \(running [0-9a-f]{12}\)$"
    got = out.splitlines()
    assert re.match(header, sample[0]) and re.match(header, got[0]), (sample[0], got[0])

    def cells(lines: list[str]) -> list[list[str]]:
        return [re.split(r"\s{2,}", line.replace("running.matrix", "default.matrix").strip()) for line in lines]
    assert cells(got[1:]) == cells(sample[1:])


def test_a_longer_idle_grace_in_an_edited_config_keeps_the_idle_nodes(live, capsys, tmp_path):
    d, cfg, _ = live
    expected = _drained_idle(d)
    edited = tmp_path / "edited.ini"
    edited.write_text(cfg.read_text().replace("idle_grace = 60s", "idle_grace = 24h"))
    code, out, err = _plan_live(capsys, d, "--config", str(edited))
    assert (code, err) == (1, "")
    assert _changed_nodes(out) == expected
    header = out.splitlines()[0]
    assert f"{d.last_report.snapshot.now:.0f}" not in header  # a clock time, not epoch seconds
    assert re.search(r": cycle at (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d \(.+ago\), ", header), header
    for node in expected:
        row = next(line for line in out.splitlines() if line.startswith(node + " "))
        assert "idle exceeded) -> (" in row and "idle wait)" in row and row.endswith("drain -> -")
        assert f"  {node}: matrix says no action:" in out


def test_a_wrong_token_is_one_clear_line(live, capsys):
    d, cfg, _ = live
    code, out, err = _plan_live(capsys, d, "--config", str(cfg), "--token", "nope")
    assert (code, out) == (2, "")
    assert err == (f"nodemanager plan: error: {d.status_server.url}/snapshot.json: HTTP 403: "
                   "wrong token (check NODEMANAGER_TOKEN or --token)\n")


def test_plan_live_on_the_head_node_needs_no_token(tmp_path, daemons, capsys, monkeypatch):
    """A quickstart install sets no admin token: on the head node (loopback) plan --live reads the
    snapshot without one and previews the edit; a proxy's forwarded request, or the option
    turned off, is refused with one line naming what to do."""
    monkeypatch.delenv("NODEMANAGER_TOKEN", raising=False)
    cfg = tmp_path / "nm.ini"
    d = daemons(write_config(cfg, port="0")).start()
    for _ in range(3):
        d.clock.advance(5.0)
        assert d.system.settle(10.0)
    code, out, err = _plan_live(capsys, d, "--config", str(cfg))
    assert (code, err) == (0, "") and "no node and no boot would change" in out
    resp = requests.get(d.status_server.url + "/snapshot.json", headers={"Forwarded": "for=192.0.2.7"},
                        timeout=10)
    assert resp.status_code == 404 and "admin API disabled" in resp.json()["error"]
    d.stop()
    off = tmp_path / "off.ini"
    write_config(off, port="0", extra="")
    off.write_text(off.read_text().replace("loopback_snapshot = yes", "loopback_snapshot = no"))
    d = daemons(str(off)).start()
    d.clock.advance(5.0)
    assert d.system.settle(10.0)
    code, out, err = _plan_live(capsys, d, "--config", str(off))
    assert (code, out) == (2, "")
    assert "HTTP 404: admin API disabled" in err and "set NODEMANAGER_TOKEN" in err
    assert len(err.splitlines()) == 1


def test_an_unreachable_daemon_is_one_clear_line(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]        # closed again: nothing listens there
    cfg = write_config(tmp_path / "nm.ini", port=str(port))
    code = main(["plan", "--live", "--config", cfg, "--token", TOKEN])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (f"nodemanager plan: error: cannot reach the status server at "
                   f"http://127.0.0.1:{port}/snapshot.json: ConnectionError\n")


class _NotNodemanager(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the stdlib's name)
        body = b'{"now": 1767225600, "cloud_nodes": [}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_snapshot_the_cli_cannot_parse_is_one_clear_line(tmp_path, capsys):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotNodemanager)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code = main(["plan", "--live", "--url", url, "--token", TOKEN,
                     "--config", write_config(tmp_path / "nm.ini")])
    finally:
        server.shutdown()
        server.server_close()
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (f"nodemanager plan: error: {url}/snapshot.json: line 1 column 37: not valid "
                   "JSON: Expecting value\n")


def test_live_needs_a_config(capsys):
    assert main(["plan", "--live", "--token", TOKEN]) == 2
    assert "--live needs --config" in capsys.readouterr().err
