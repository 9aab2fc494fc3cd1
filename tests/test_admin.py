"""The admin state, the admin API over HTTP (tokens!) and the CLI wrappers against a real server."""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading

import pytest
import requests

from nodemanager import cli
from nodemanager.console.admin import AdminState, AdminStateError
from nodemanager.configuration.settings import ManageSettings
from nodemanager.console.status import StatusServer
from nodemanager.console.status_document import StatusView
from tests.fixtures.observability import T0, Clock, sample_report

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


# -- the state the controller reads ----------------------------------------------------------------

def test_admin_state_feeds_the_snapshot(clock: Clock) -> None:
    admin = AdminState(clock=clock)
    assert admin.hold("i-1").changed and not admin.hold("i-1").changed
    admin.drain("i-2")
    admin.pause("kernel upgrade")
    snap = dataclasses.replace(sample_report().snapshot, **admin.snapshot_fields())
    assert snap.held == {"i-1"} and snap.forced_drains == {"i-2"}
    assert snap.paused == "kernel upgrade"
    assert admin.release("i-1").changed and not admin.release("i-1").changed
    assert admin.resume().detail == "actions resumed (pause was 'kernel upgrade')"
    assert admin.snapshot_fields() == {"held": frozenset(), "forced_drains": frozenset({"i-2"}),
                                       "paused": None}


def test_cancel_withdraws_a_forced_drain_and_is_pending_until_done(clock: Clock) -> None:
    admin = AdminState(clock=clock)
    admin.drain("i-2")
    change = admin.cancel("i-2")
    assert change.detail.startswith("forced drain withdrawn")
    assert admin.forced_drains == frozenset()
    assert admin.pending_cancels() == {"i-2"}
    assert admin.pending_cancels() == {"i-2"}       # until no drain of ours is left on the node
    admin.cancels_done({"i-2"})
    assert admin.pending_cancels() == frozenset()


def test_forget_drops_destroyed_nodes(clock: Clock) -> None:
    admin = AdminState(clock=clock)
    admin.hold("i-1")
    admin.drain("i-2")
    admin.cancel("i-3")
    admin.forget(["i-1", "i-2", "i-3"])
    assert admin.snapshot_fields()["held"] == frozenset()
    assert admin.forced_drains == frozenset() and admin.pending_cancels() == frozenset()


def test_admin_state_is_safe_under_concurrent_requests(clock: Clock) -> None:
    admin = AdminState(clock=clock)

    def work(i: int) -> None:
        for j in range(200):
            admin.hold(f"n{i}-{j}")
            admin.snapshot_fields()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admin.held) == 1600 and len(admin.history()) == 100


# -- the API --------------------------------------------------------------------------------------


# -- the state file -----------------------------------------------------------------------------

def test_holds_drains_and_the_pause_survive_a_restart(clock: Clock, tmp_path) -> None:
    path = str(tmp_path / "admin.json")
    admin = AdminState(clock=clock, path=path)
    admin.hold("i-1")
    admin.hold("i-9")
    admin.drain("i-2")
    admin.pause("kernel upgrade")
    admin.cancel("i-3")                       # a pending cancel is kept until carried out
    admin.forget(["i-9"])                     # destroyed: its hold goes with it
    again = AdminState(clock=clock, path=path)
    assert again.snapshot_fields() == {"held": frozenset({"i-1"}), "forced_drains": frozenset({"i-2"}),
                                       "paused": "kernel upgrade"}
    assert again.pending_cancels() == {"i-3"}
    again.resume()
    again.release("i-1")
    assert AdminState(clock=clock, path=path).snapshot_fields()["paused"] is None
    assert AdminState(clock=clock, path=path).held == frozenset()


@pytest.mark.parametrize("text, message", [
    ('{"held": {"i-1": 5}', "admin.json:1:20: the admin state is not JSON"),
    ('{\n  "held": ["i-1"]\n}', 'admin.json: "held" must map node ids to times'),
    ('{"paused": 3}', 'admin.json: "paused" must be a reason (text) or null'),
    ('[]', "admin.json: the admin state must be a JSON object"),
])
def test_an_unreadable_state_file_is_named_and_refused(clock: Clock, tmp_path, text: str,
                                                       message: str) -> None:
    path = tmp_path / "admin.json"
    path.write_text(text)
    with pytest.raises(AdminStateError) as info:
        AdminState(clock=clock, path=str(path))
    assert str(info.value).startswith(str(path)) and message in str(info.value)


def test_a_change_that_cannot_be_saved_still_applies_and_says_so(clock: Clock, tmp_path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "gone" / "admin.json"      # its directory does not exist
    admin = AdminState(clock=clock, path=str(path))
    change = admin.hold("i-1")
    assert admin.held == {"i-1"}
    assert "NOT SAVED, lost at restart" in change.detail and str(path) in change.detail
    assert "admin state not saved" in caplog.text


def test_refuses_without_token_and_with_a_wrong_one(status_server) -> None:
    url = status_server.url + "/admin/hold/i-idle"
    resp = requests.post(url, timeout=5)
    assert resp.status_code == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert requests.post(url, headers={"Authorization": TOKEN}, timeout=5).status_code == 401
    assert requests.post(url, headers={"Authorization": "Bearer wrong"}, timeout=5).status_code == 403
    assert requests.post(url, headers={"Authorization": f"Bearer {TOKEN}0"},
                         timeout=5).status_code == 403
    assert status_server.admin.held == frozenset()


def test_disabled_without_a_configured_token(clock: Clock) -> None:
    admin = AdminState(clock=clock)
    server = StatusServer(ManageSettings(port=0, token=""),
                          lambda: StatusView(report=sample_report(), last_cycle_at=T0),
                          admin, clock=clock).start()
    try:
        for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer anything"}):
            resp = requests.post(server.url + "/admin/pause", headers=headers, timeout=5)
            assert resp.status_code == 404 and "disabled" in resp.json()["error"]
        assert requests.get(server.url + "/status.json", timeout=5).json()["admin"]["enabled"] is False
    finally:
        server.stop()
    assert admin.paused is None


def test_hold_by_name_resolves_to_the_node_and_shows_on_the_status_page(
        status_server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodemanager.status")
    resp = requests.post(status_server.url + "/admin/hold/nm-small-2", headers=AUTH, timeout=5)
    assert resp.status_code == 200
    assert resp.json()["node"] == "i-idle" and resp.json()["changed"] is True
    assert status_server.admin.held == {"i-idle"}
    doc = requests.get(status_server.url + "/status.json", timeout=5).json()
    assert next(n for n in doc["nodes"] if n["node_id"] == "i-idle")["held"] is True
    assert "admin hold node=i-idle by 127.0.0.1: held: no action will be taken on it" in caplog.text
    resp = requests.post(status_server.url + "/admin/hold/w2", headers=AUTH, timeout=5)
    assert resp.json()["changed"] is False
    assert "(nothing changed)" in caplog.text


def test_every_admin_action(status_server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodemanager.status")
    post = lambda path, **kw: requests.post(status_server.url + path, headers=AUTH, timeout=5, **kw)  # noqa: E731
    assert post("/admin/drain/i-min").json()["detail"] == "drain requested: planned next cycle"
    assert post("/admin/cancel/i-drain").status_code == 200
    assert post("/admin/pause", json={"reason": "cloud maintenance"}).json()["changed"]
    admin = status_server.admin
    assert admin.forced_drains == {"i-min"} and admin.pending_cancels() == {"i-drain"}
    assert admin.paused == "cloud maintenance"
    doc = requests.get(status_server.url + "/status.json", timeout=5).json()
    assert doc["admin"]["paused"] == "cloud maintenance"
    assert post("/admin/resume").json()["detail"] == "actions resumed (pause was 'cloud maintenance')"
    assert post("/admin/release/i-held").json()["detail"] == "was not held"
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("admin ")]
    assert len(lines) == 5 and all(" by 127.0.0.1: " in line for line in lines)


@pytest.mark.parametrize("path, code", [
    ("/admin/hold/no-such-node", 404), ("/admin/hold/", 400), ("/admin/hold/a%20b", 400),
    ("/admin/hold/i-idle/extra", 400), ("/admin/explode", 404), ("/admin/pause/i-idle", 404),
])
def test_bad_admin_requests(status_server, path: str, code: int) -> None:
    resp = requests.post(status_server.url + path, headers=AUTH, timeout=5)
    assert resp.status_code == code and resp.json()["error"]


def test_pause_reason_must_be_json(status_server) -> None:
    resp = requests.post(status_server.url + "/admin/pause", headers=AUTH, data=b"{nope",
                         timeout=5)
    assert resp.status_code == 400 and "not JSON" in resp.json()["error"]
    assert status_server.admin.paused is None


# -- the CLI --------------------------------------------------------------------------------------

def test_cli_hold_status_pause_resume(status_server, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NODEMANAGER_URL", status_server.url)
    monkeypatch.setenv("NODEMANAGER_TOKEN", TOKEN)
    assert cli.main(["hold", "nm-small-5"]) == 0
    assert capsys.readouterr().out.strip() == "hold i-min: held: no action will be taken on it"
    assert cli.main(["pause", "--reason", "upgrade"]) == 0
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "PAUSED: upgrade" in out
    assert "note: 5 one-core jobs fit on running nodes: no boot" in out
    line = next(l for l in out.splitlines() if l.startswith("nm-small-5"))
    assert "(held)" in line and "default.matrix:30" in line and "min_nodes" in line
    assert cli.main(["resume"]) == 0 and status_server.admin.paused is None
    assert cli.main(["status", "--json"]) == 0
    assert '"node_id": "i-grace"' in capsys.readouterr().out


def test_hold_and_drain_take_a_reason_shown_on_the_page_in_status_and_the_audit_line(
        status_server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nodemanager.status")
    monkeypatch.setenv("NODEMANAGER_URL", status_server.url)
    monkeypatch.setenv("NODEMANAGER_TOKEN", TOKEN)
    assert cli.main(["hold", "nm-small-5", "--reason", "bad disk, ticket 4411"]) == 0
    assert capsys.readouterr().out.strip() == ("hold i-min: held: no action will be taken on it "
                                               "(reason: bad disk, ticket 4411)")
    assert cli.main(["drain", "nm-small-2", "--reason", "kernel update"]) == 0
    assert "admin hold node=i-min by 127.0.0.1: held: no action will be taken on it " \
           "(reason: bad disk, ticket 4411)" in caplog.text
    assert "admin drain node=i-idle by 127.0.0.1: drain requested: planned next cycle " \
           "(reason: kernel update)" in caplog.text
    doc = requests.get(status_server.url + "/status.json", timeout=5).json()
    rows = {n["node_id"]: n for n in doc["nodes"]}
    assert rows["i-min"]["operator_reason"] == "bad disk, ticket 4411"
    assert rows["i-idle"]["operator_reason"] == "kernel update"
    page = requests.get(status_server.url + "/", timeout=5).text
    assert "(operator&#x27;s reason: bad disk, ticket 4411)" in page
    assert cli.main(["status"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("nm-small-5"))
    assert "(held)" in line and "(operator's reason: bad disk, ticket 4411)" in line
    assert cli.main(["status", "nm-small-2"]) == 0
    assert "operator's reason: kernel update" in capsys.readouterr().out.splitlines()
    assert cli.main(["release", "nm-small-5"]) == 0
    doc = requests.get(status_server.url + "/status.json", timeout=5).json()
    assert next(n for n in doc["nodes"] if n["node_id"] == "i-min")["operator_reason"] is None


def test_an_operators_reason_survives_a_restart(clock: Clock, tmp_path) -> None:
    path = str(tmp_path / "admin.json")
    admin = AdminState(clock=clock, path=path)
    admin.hold("i-1", reason="bad disk")
    admin.drain("i-2", reason="retire")
    admin.hold("i-3")
    again = AdminState(clock=clock, path=path)
    assert (again.reason("i-1"), again.reason("i-2"), again.reason("i-3")) == ("bad disk", "retire", None)
    again.forget(["i-1"])
    assert AdminState(clock=clock, path=path).reason("i-1") is None


def test_cli_errors_are_one_clear_line(status_server, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("NODEMANAGER_TOKEN", raising=False)
    monkeypatch.delenv("NODEMANAGER_URL", raising=False)
    assert cli.main(["drain", "i-idle", "--url", status_server.url]) == 1
    assert "no admin token" in capsys.readouterr().err
    assert cli.main(["drain", "i-idle", "--url", status_server.url, "--token", "bad"]) == 1
    err = capsys.readouterr().err
    assert "HTTP 403: wrong token" in err and "bad" not in err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert cli.main(["status", "--url", dead]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"nodemanager: cannot reach the status server at {dead}")
    assert "Traceback" not in err


def test_cli_reads_url_and_token_from_the_config(status_server, tmp_path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("NODEMANAGER_TOKEN", raising=False)
    monkeypatch.delenv("NODEMANAGER_URL", raising=False)
    port = status_server.address[1]
    config = tmp_path / "nodemanager.ini"
    config.write_text(f"[Manage]\naddress = 127.0.0.1\nport = {port}\ntoken = {TOKEN}\n")
    config.chmod(0o600)
    assert cli.main(["cancel", "i-drain", "--config", str(config)]) == 0
    assert status_server.admin.pending_cancels() == {"i-drain"}
