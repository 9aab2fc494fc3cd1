"""Security: what the real daemon exposes and prints.

Covered here (test_admin.py already covers 401/403/404 of the admin API on a StatusServer, and
test_config.py / test_deploy.py the credential warning function and the unit's basic keys):

* the real ``nodemanager run`` process listens on loopback only, by default and for metrics;
* the admin token is compared in constant time, never accepted from a query string, and a GET
  cannot act;
* no secret (cloud key and secret, admin token) appears in anything the daemon produced: its
  log, ``/status.json``, ``/``, ``/metrics``, ``/healthz``, admin error replies, reload errors,
  and the errors of a cloud that cannot be reached;
* a config holding credentials that others can read is warned about at start (file named, no
  secret printed);
* the systemd unit runs as an unprivileged user with no capabilities and the hardening options;
* HTCondor drains need ADMINISTRATOR and the docs say how to grant just that to the daemon.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.fixtures.moto import free_port

REPO = pathlib.Path(__file__).resolve().parent.parent
KEY = "AKIDSECURITYTESTKEY01"
SECRET = "sec-ret/VALUE+never-shown-0123"
TOKEN = "adm1n-T0KEN-never-shown-4567"
SECRETS = (KEY, SECRET, TOKEN)


def _config(tmp_path: pathlib.Path, port: int, cloud: str, mode: int = 0o644) -> pathlib.Path:
    path = tmp_path / "nm.ini"
    path.write_text(f"""
[Daemon]
log_level = debug

[Polling]
cloud_interval = 1s
scheduler_interval = 1s
cycle_interval = 1s
max_backoff = 2s

[Cloud]
{cloud}
key = {KEY}
secret = {SECRET}

[Scheduler]
type = simulated
boot_delay = 1s
join_delay = 1s
burst_every = 20s
burst_size = 4
job_runtime = 3s

[Manage]
port = {port}
token = {TOKEN}
state_dir = state

[Size small]
cores = 4
ram_mb = 16000
price = 0.17
""")
    path.chmod(mode)
    return path


def _get(url: str, **kw) -> tuple[int, str]:
    req = urllib.request.Request(url, **kw)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _wait_http(url: str, proc: subprocess.Popen, out: pathlib.Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"daemon exited {proc.returncode}: {out.read_text()[-2000:]}")
        try:
            _get(url)
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail("status server never answered")


def _wait_log(out: pathlib.Path, proc: subprocess.Popen, done, what: str, timeout: float = 30) -> None:
    """Poll the daemon's output until ``done(text)``; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not done(out.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no {what} (exit {proc.poll()}): {out.read_text()[-2000:]}")
        time.sleep(0.1)


def _listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket the process listens on, from /proc."""
    inodes = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    out = []
    for table, v6 in (("tcp", False), ("tcp6", True)):
        for line in pathlib.Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] != "0A" or f[9] not in inodes:       # 0A: LISTEN
                continue
            hexaddr, hexport = f[1].split(":")
            raw = bytes.fromhex(hexaddr)
            if v6:
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                addr = socket.inet_ntop(socket.AF_INET6, raw)
            else:
                addr = socket.inet_ntop(socket.AF_INET, raw[::-1])
            out.append((addr, int(hexport, 16)))
    return out


@pytest.fixture
def running_daemon(tmp_path):
    """The real daemon (embedded default) with secrets in its config; yields (url, proc, out, config)."""
    port = free_port()
    config = _config(tmp_path, port, "driver = simulated")
    out = tmp_path / "daemon.out"
    proc = subprocess.Popen([sys.executable, "-m", "nodemanager", "run", "--config", str(config)],
                            stdout=out.open("wb"), stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(url + "/healthz", proc, out)
        yield url, proc, out, config
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_the_daemon_listens_on_loopback_only(running_daemon):
    url, proc, out, _ = running_daemon
    sockets = _listening(proc.pid)
    assert sockets, "no listening socket found"
    assert all(addr in ("127.0.0.1", "::1") for addr, _ in sockets), sockets
    status, body = _get(url + "/metrics")
    assert status == 200 and "nodemanager_" in body       # metrics are on that same loopback port


def test_no_secret_in_anything_the_daemon_produced(running_daemon, tmp_path):
    url, proc, out, config = running_daemon
    # a few cycles: boots, decisions, outcomes
    _wait_log(out, proc, lambda text: "outcome boot" in text and text.count("cycle:") >= 4,
              "four cycles and a boot outcome")
    produced = []
    for path in ("/status.json", "/", "/metrics", "/healthz", "/admin/pause", "/nope"):
        produced.append(_get(url + path)[1])
    wrong = {"Authorization": f"Bearer {TOKEN[:-1]}"}
    produced.append(_get(url + "/admin/pause", method="POST", headers=wrong)[1])
    produced.append(_get(url + "/admin/hold/nonexistent", method="POST",
                         headers={"Authorization": f"Bearer {TOKEN}"})[1])
    status, body = _get(url + "/admin/pause", method="POST", data=b'{"reason": "sec test"}',
                        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert status == 200
    produced.append(body)
    # a reload with a bad config whose bad values are secrets: rejected, values not echoed
    good = config.read_text()
    config.write_text(good.replace("[Daemon]", f"[Daemon]\nmax_nodes = lots\nbogus = {TOKEN}")
                      .replace(f"token = {TOKEN}", f"token = {TOKEN}\ntoken = {TOKEN}x"))
    proc.send_signal(signal.SIGHUP)
    _wait_log(out, proc, lambda text: "reload" in text.lower(), "reload in the log")
    produced.append(_get(url + "/status.json")[1])
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    log = out.read_text()
    assert "reload" in log.lower() and "cycle:" in log
    for text in produced + [log]:
        for secret in SECRETS:
            assert secret not in text, f"secret {secret[:6]}... leaked in: {text[:200]}"
    # the credentials file is readable by others: warned at start, naming the file
    assert re.search(r"WARNING .*nm\.ini holds credentials .* readable by others", log)


def test_admin_token_is_compared_in_constant_time_and_only_from_the_header(running_daemon, monkeypatch):
    url, proc, out, _ = running_daemon
    # only the Authorization header counts: a token in the query string or a GET cannot act
    assert _get(url + f"/admin/pause?token={TOKEN}", method="POST")[0] == 401
    assert _get(url + "/admin/pause", headers={"Authorization": f"Bearer {TOKEN}"})[0] in (404, 405)
    doc = json.loads(_get(url + "/status.json")[1])
    assert doc["admin"]["enabled"] is True and not doc["admin"].get("paused")
    # constant-time: the status server compares with hmac.compare_digest (checked in-process)
    import hmac

    from nodemanager.console.admin import AdminState
    from nodemanager.configuration.settings import ManageSettings
    from nodemanager.console.status import StatusServer
    from nodemanager.console.status_document import StatusView
    calls = []
    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: calls.append(1) or real(a, b))
    server = StatusServer(ManageSettings(port=0, token=TOKEN), lambda: StatusView(report=None),
                          AdminState(clock=time.time)).start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        status, _ = _get(server.url + "/admin/pause", method="POST", headers={"Authorization": "Bearer x"})
        assert status == 403 and calls
    finally:
        server.stop()


def test_a_stray_secret_line_is_not_quoted_in_the_config_error(tmp_path):
    config = tmp_path / "nm.ini"
    config.write_text(f"[Cloud]\ndriver = ec2\nkey = {KEY}\nsecret =\n{SECRET}\n[Size a]\ncores = 1\nram_mb = 1\n")
    config.chmod(0o600)
    proc = subprocess.run([sys.executable, "-m", "nodemanager", "run", "--config", str(config)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2 and "nm.ini:5" in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout


def test_unreachable_cloud_errors_do_not_show_the_keys(tmp_path):
    """A connection error to the EC2 endpoint quotes the request URL; the daemon's log of the
    failing cloud polls never shows the keys."""
    closed = free_port()
    config = _config(tmp_path, free_port(), f"driver = ec2\nregion = us-east-1\nhost = 127.0.0.1\nport = {closed}\ncluster = sec-test",
                     mode=0o600)
    # a real scheduler type (its polls fail too: nothing listens) so the EC2 driver is taken
    text = re.sub(r"\[Scheduler\]\n(.+\n)+", f"[Scheduler]\ntype = htcondor\ncollector = 127.0.0.1:{free_port()}\n",
                  config.read_text())
    config.write_text(text + "\n[Cloud Create]\nimage = ami-12c6146b\n")
    out = tmp_path / "daemon.out"
    proc = subprocess.Popen([sys.executable, "-m", "nodemanager", "run", "--config", str(config)],
                            stdout=out.open("wb"), stderr=subprocess.STDOUT, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    try:   # failing polls until the backoff reached max_backoff
        _wait_log(out, proc, lambda text: text.count("cloud-poller: poll failed") >= 3 or "nodemanager run:" in text,
                  "three failed cloud polls")
        assert "nodemanager run:" not in out.read_text(), out.read_text()[-2000:]  # it ran and polled
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    log = out.read_text()
    assert log.count("cloud-poller: poll failed") >= 3 and f"port={closed}" in log, log[-2000:]
    assert "holds credentials" not in log                 # mode 600: no warning
    for secret in SECRETS:
        assert secret not in log, f"secret {secret[:6]}... leaked: {log[-1500:]}"


UNIT = REPO / "deploy" / "systemd" / "nodemanager.service"


def _unit_options() -> dict[str, str]:
    return dict(re.findall(r"^(\w+)=(.*)$", UNIT.read_text(), re.M))


def test_systemd_unit_runs_unprivileged_with_no_capabilities():
    o = _unit_options()
    assert o["User"] not in ("", "root", "0") and o["Group"] not in ("", "root", "0")
    assert o["NoNewPrivileges"] == "yes"
    assert o["CapabilityBoundingSet"] == "" and o.get("AmbientCapabilities", "") == ""
    for opt in ("PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups",
                "RestrictSUIDSGID", "RestrictNamespaces", "LockPersonality", "ProtectHome", "PrivateTmp"):
        assert o.get(opt) == "yes", opt
    assert o["ProtectSystem"] == "strict" and o["UMask"] == "0077"
    families = set(o["RestrictAddressFamilies"].split())
    assert families <= {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert "ReadWritePaths" not in o or "/etc" not in o["ReadWritePaths"]
    assert "--dry-run" not in o["ExecStart"] and "sudo" not in o["ExecStart"]


def test_systemd_security_exposure_is_low(tmp_path):
    """``systemd-analyze security --offline`` scores the unit (0 = locked down, 10 = exposed)."""
    import shutil
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze not installed")
    local = tmp_path / "nodemanager.service"
    local.write_text(UNIT.read_text().replace("/opt/nodemanager/bin/nodemanager", shutil.which("nodemanager") or sys.executable))
    proc = subprocess.run([analyze, "security", "--offline=yes", "--no-pager", str(local)],
                          capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", proc.stdout + proc.stderr)
    assert m, proc.stdout[-1000:] + proc.stderr[-1000:]
    assert float(m.group(1)) <= 3.0, proc.stdout[-3000:]


def test_htcondor_drains_need_administrator_and_the_docs_say_how():
    doc = (REPO / "docs" / "htcondor.md").read_text()
    assert "ADMINISTRATOR" in doc and "-authz ADMINISTRATOR" in doc
