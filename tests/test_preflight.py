"""`nodemanager check`: the preflight checklist an operator runs before `run`, against the embedded
default and against the local EC2 endpoint (libcloud's real EC2 driver, EC2's own DryRun verdicts)."""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
from typing import Iterator

import pytest

from nodemanager.cli import main
from nodemanager.cloud.permissions import EC2_ACTIONS
from nodemanager.model import Size
from tests.conftest import REPO
from tests.fixtures.moto import EC2_IMAGE

POLICY = REPO / "deploy" / "ec2" / "iam-policy.json"


def _example(tmp_path: pathlib.Path, **options: str) -> pathlib.Path:
    text = (REPO / "config.example.ini").read_text()
    for option, value in {"port": "0", "state_dir": str(tmp_path / "state"), **options}.items():
        text, n = re.subn(rf"^{option} *=.*$", f"{option} = {value}", text, flags=re.M)
        assert n == 1, option
    path = tmp_path / "nodemanager.ini"
    path.write_text(text)
    return path


def _ec2_config(tmp_path: pathlib.Path, port: int) -> pathlib.Path:
    path = tmp_path / "ec2.ini"
    path.write_text(f"""\
[Cloud]
driver = ec2
cluster = preflight
key = AKIDNODEMANAGERTEST
secret = moto-secret-not-real
region = us-east-1
host = 127.0.0.1
port = {port}
secure = no
[Cloud Create]
image = {EC2_IMAGE}
[Scheduler]
type = htcondor
collector = 127.0.0.1:1
[Manage]
port = -1
state_dir = {tmp_path / "state"}
[Size t3.large]
cores = 2
ram_mb = 8192
price = 0.1
""")
    return path


@contextlib.contextmanager
def _running(config: pathlib.Path, log: pathlib.Path) -> Iterator[subprocess.Popen]:
    """`nodemanager run --config CONFIG` (output in ``log``), from its "started" line until the
    block ends; then SIGTERM."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "nodemanager", "run", "--config", str(config)],
                                stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while "nodemanager.daemon: started" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_example_config_passes(tmp_path, capsys):
    assert main(["check", "--config", str(_example(tmp_path))]) == 0
    out = capsys.readouterr().out
    for name in ("config", "matrix", "state dir", "status port", "cloud listing", "scheduler"):
        assert re.search(rf"^\[ok  \] {name}: ", out, re.M), (name, out)
    assert out.rstrip().endswith("checks passed")


def test_a_bad_config_fails_with_its_place_and_a_fix(tmp_path, capsys):
    config = _example(tmp_path, idle_grace="soon")
    assert main(["check", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert f"[FAIL] config: {config}:" in out and "idle_grace" in out
    assert "fix: correct the options named" in out


def test_a_taken_status_port_fails_naming_the_option(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["check", "--config", str(_example(tmp_path, port=str(port)))]) == 1
    out = capsys.readouterr().out
    assert f"[FAIL] status port: 127.0.0.1:{port}:" in out and "[Manage] port" in out


@pytest.mark.ec2
def test_ec2_permissions_come_from_ec2_dry_runs(ec2_proxy, ec2_cloud, tmp_path, capsys):
    config = _ec2_config(tmp_path, ec2_proxy.port)
    main(["check", "--config", str(config), "--format", "json"])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert checks["cloud listing"]["ok"] is True
    for action in ("RunInstances", "CreateTags", "DeleteTags", "TerminateInstances"):
        assert checks[f"cloud permission ec2:{action}"]["ok"] is True, checks
        # RunInstances twice: the permission, and the size's whole boot as the daemon sends it
        assert ec2_proxy.count(action) == (2 if action == "RunInstances" else 1)
    assert ec2_cloud("preflight").list_nodes() == []  # dry runs: nothing was launched


@pytest.mark.ec2
def test_a_refused_permission_fails_naming_it(ec2_proxy, tmp_path, capsys):
    ec2_proxy.fail("RunInstances", 403, "UnauthorizedOperation",
                   message="You are not authorized to perform this operation.")
    code = main(["check", "--config", str(_ec2_config(tmp_path, ec2_proxy.port))])
    out = capsys.readouterr().out
    assert code == 1
    assert re.search(r"^\[FAIL\] cloud permission ec2:RunInstances: refused: .*UnauthorizedOperation",
                     out, re.M), out
    assert "fix: grant ec2:RunInstances to these credentials" in out
    assert re.search(r"^\[ok  \] cloud permission ec2:TerminateInstances", out, re.M)


@pytest.mark.ec2
def test_the_shipped_policy_grants_exactly_what_the_adapter_calls(ec2_proxy, ec2_cloud):
    """Every EC2 action the adapter sends while listing, booting, tagging, untagging and
    destroying is in deploy/ec2/iam-policy.json, and the policy grants nothing else."""
    cloud = ec2_cloud()
    size = Size("t3.large", cores=2, ram_mb=8192)
    node = cloud.create_node(size, "pf-1", {})
    cloud.list_nodes()
    cloud.set_tags(node, {"nodemanager-drain": "1:x"})
    cloud.set_tags(node, {"nodemanager-drain": ""})
    cloud.destroy_node(node)
    sent = set(ec2_proxy.actions)
    policy = json.loads(POLICY.read_text())
    granted = {a.removeprefix("ec2:") for s in policy["Statement"] for a in s["Action"]}
    assert sent <= granted, sent - granted
    assert granted == sent == set(EC2_ACTIONS)


@pytest.mark.ec2
def test_run_logs_the_same_checks_before_its_actors_start(ec2_proxy, tmp_path):
    """`nodemanager run` asks EC2 the same DryRun questions at start: a refused permission is an
    ERROR line with the fix, and the daemon still starts (a cloud down at start must not keep it
    down)."""
    ec2_proxy.fail("RunInstances", 403, "UnauthorizedOperation",
                   message="You are not authorized to perform this operation.")
    log = tmp_path / "daemon.log"
    with _running(_ec2_config(tmp_path, ec2_proxy.port), log):
        pass
    text = log.read_text()
    assert re.search(r"ERROR nodemanager\.preflight: preflight cloud permission ec2:RunInstances: "
                     r"refused: .*UnauthorizedOperation.*; fix: grant ec2:RunInstances", text), text[-2000:]
    assert "INFO nodemanager.preflight: preflight cloud permission ec2:TerminateInstances: allowed" in text
    assert text.index("preflight cloud permission") < text.index("nodemanager.daemon: started")


def test_a_missing_state_dir_is_said_to_be_missing(tmp_path, capsys):
    """A state dir that does not exist is reported so (the daemon makes it at start), never
    "writable"; a state file in a directory nothing creates fails."""
    config = _example(tmp_path, state_file=str(tmp_path / "nowhere" / "admin.json"))
    assert main(["check", "--config", str(config), "--format", "json"]) == 1
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert checks["state dir"]["ok"] is True
    assert checks["state dir"]["detail"] == (f"{tmp_path / 'state'}: does not exist; the daemon creates "
                                             "it at start (its parent is writable)")
    assert checks["state file"]["ok"] is False
    assert checks["state file"]["detail"] == (f"{tmp_path / 'nowhere' / 'admin.json'}: its directory "
                                              f"{tmp_path / 'nowhere'} does not exist (and nothing creates it)")


@pytest.mark.ec2
def test_terminated_vms_are_not_counted_as_nodes(ec2_proxy, ec2_cloud, tmp_path, capsys):
    cloud = ec2_cloud("preflight-gone")
    cloud.destroy_node(cloud.create_node(Size("t3.large", cores=2, ram_mb=8192), "pf-gone-1", {}))
    config = _ec2_config(tmp_path, ec2_proxy.port)
    config.write_text(config.read_text().replace("cluster = preflight", "cluster = preflight-gone"))
    main(["check", "--config", str(config), "--format", "json"])
    listing = {c["name"]: c for c in json.loads(capsys.readouterr().out)}["cloud listing"]
    assert listing["detail"] == "ec2: 0 node(s) of cluster 'preflight-gone' (and 1 terminated, not counted)"


@pytest.mark.ec2
def test_beside_its_running_daemon_check_reads_healthz(ec2_proxy, tmp_path, capsys):
    """With the daemon of this configuration running here, its status port is taken by design:
    `check` asks it /healthz instead of failing on the bind."""
    from tests.fixtures.moto import free_port

    port = free_port()
    config = _ec2_config(tmp_path, ec2_proxy.port)
    config.write_text(config.read_text().replace("port = -1", f"address = 127.0.0.1\nport = {port}"))
    with _running(config, tmp_path / "daemon.log") as proc:
        main(["check", "--config", str(config), "--format", "json"])
    status = {c["name"]: c for c in json.loads(capsys.readouterr().out)}["status port"]
    assert status["ok"] is not False, status
    assert re.fullmatch(rf"127\.0\.0\.1:{port}: the daemon running here \(pid {proc.pid} .*\) answers "
                        r"/healthz: (200|503) .+", status["detail"]), status
