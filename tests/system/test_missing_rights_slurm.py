"""The daemon run as a user SLURM does not let drain nodes, against the real parts: a real
slurmctld with no slurmdbd, libcloud's EC2 driver on moto_server, the real daemon process started
as an unprivileged system user (as the systemd unit's ``User=nodemanager`` would), and a real
Prometheus loaded with the shipped alert rules.

``nodemanager check`` fails naming the missing right; once a drain is refused for lack of rights
the status page turns red within a cycle and names the refusal on the node's line, the metric is
1, the shipped alert fires, and the refused drain is not retried at the short backoff."""

from __future__ import annotations

import grp
import os
import pathlib
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
import requests

from tests.fixtures.moto import free_port
from tests.system.test_closed_loop import REPO, daemon_config, harness, status, stop_daemon
from tests.test_deploy_prometheus import _prometheus

pytestmark = [pytest.mark.slurm, pytest.mark.ec2, pytest.mark.prometheus]

USER = "nmrights"          # a system user made for this test: neither root nor SlurmUser


@pytest.fixture(scope="module")
def service_user() -> tuple[int, int]:
    """(uid, gid) of an unprivileged system user, made with useradd when missing."""
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                       check=True)
        entry = pwd.getpwnam(USER)
    return entry.pw_uid, entry.pw_gid


@pytest.fixture
def parts(moto_server):
    yield from harness(moto_server, nodes=2)


def as_user(uid: int, gid: int, argv: list[str]) -> list[str]:
    """``argv`` run as the user. It may read any file (this machine's Python lives under root's
    0700 home), nothing more: SLURM sees its uid through munge, as it would the unit's user."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
            "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", *argv]


def user_env(home: pathlib.Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(home), "LANG": "C.UTF-8"}


def test_a_user_without_slurm_rights_fails_check_and_turns_the_page_red(parts, moto_server, service_user,
                                                                        tmp_path):
    cluster, slurm, hv = parts
    uid, gid = service_user
    os.chmod(slurm.workdir, 0o755)                  # the service user reads slurm.conf, as on a site
    home = pathlib.Path(tempfile.mkdtemp(prefix="nmrights-", dir="/tmp"))
    try:
        os.chown(home, uid, gid)
        status_port = free_port()
        config = daemon_config(home, moto_server.port, cluster, status_port,
                               f"type = slurm\nslurm_conf = {slurm.conf}\ntimeout = 20s\n",
                               cores=slurm.cpus, ram_mb=slurm.memory_mb)
        os.chown(config, uid, gid)
        env = user_env(home)

        check = subprocess.run(as_user(uid, gid, [sys.executable, "-m", "nodemanager", "check", "--config",
                                                  str(config)]),
                               env=env, cwd=home, capture_output=True, text=True, timeout=120)
        assert check.returncode == 1, check.stdout + check.stderr
        line = next(l for l in check.stdout.splitlines() if "slurm rights to drain and resume" in l)
        assert line.startswith("[FAIL]") and USER in line and "SlurmUser" in line, check.stdout
        assert "AdminLevel=Operator" in check.stdout, check.stdout

        log = home / "daemon.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(as_user(uid, gid, [sys.executable, "-m", "nodemanager", "run", "--config",
                                                       str(config)]),
                                    stdout=out, stderr=subprocess.STDOUT, env=env, cwd=home,
                                    start_new_session=True)
        try:
            with _prometheus(status_port, tmp_path) as prom:
                slurm.run("sbatch", "--parsable", "-n1", "--wrap", "sleep 3")
                refused_at = None
                deadline = time.monotonic() + 180
                doc: dict | None = None
                while time.monotonic() < deadline:
                    assert proc.poll() is None, log.read_text()[-3000:]
                    text = log.read_text()
                    if refused_at is None and re.search(r"outcome drain \S+, small: refused: no permission", text):
                        refused_at = time.monotonic()
                    doc = status(status_port)
                    if refused_at is not None and doc and doc.get("no_permission"):
                        break
                    time.sleep(0.2)
                assert refused_at is not None, log.read_text()[-4000:]
                # the page follows within a cycle (1 s here) of the refusal, plus a poll of ours
                assert doc and doc.get("no_permission"), (doc, log.read_text()[-3000:])
                assert time.monotonic() - refused_at < 3.0
                assert "Invalid user id" in doc["no_permission"]
                node = next(n for n in doc["nodes"] if n["last_outcome"])
                assert node["last_outcome"].startswith("drain refused: no permission (")
                html = requests.get(f"http://127.0.0.1:{status_port}/", timeout=5).text
                assert "<span class='bad' id='health'>" in html and "id='no-permission'" in html
                metrics = requests.get(f"http://127.0.0.1:{status_port}/metrics", timeout=5).text
                assert 'nodemanager_permission_denied{action="drain"} 1.0' in metrics
                assert re.search(r'nodemanager_call_errors_total\{call="drain",kind="denied",target="scheduler"\}',
                                 metrics)

                firing = None
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not firing:
                    alerts = requests.get(prom + "/api/v1/alerts", timeout=5).json()["data"]["alerts"]
                    firing = [a for a in alerts if a["labels"]["alertname"] == "NodeManagerNoPermission"
                              and a["state"] == "firing"]
                    time.sleep(0.5)
                assert firing and firing[0]["labels"]["action"] == "drain", alerts
            # a slow probe, not the 5 s max_backoff of a transient error: one try in all this time
            tries = re.findall(r"outcome drain \S+, small: refused: no permission", log.read_text())
            assert len(tries) == 1, log.read_text()[-3000:]
            assert "Traceback" not in log.read_text()
        finally:
            stop_daemon(proc)
    finally:
        shutil.rmtree(home, ignore_errors=True)
