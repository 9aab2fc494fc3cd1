"""The docs run as written: every shell block of README.md and of both quickstarts, in order, as
root on a head node in a folder (the site's paths under one root, a fresh checkout of this tree,
a real ``nodemanager`` system user), with only the site's values filled in; ``runuser -u
nodemanager`` where the docs say so; the systemd unit's ExecStart under its User with its
Environment where systemd cannot run. What the operator reads back (check, status, plan --live,
cost, man) is asserted."""

from __future__ import annotations

import pathlib
import pwd
import re
import shlex
import shutil
import stat
import subprocess
import time

import pytest
import requests

from tests.docs_run import REPO, SYSTEMCTL, HeadNode, ini_block, shell_blocks
from tests.fixtures.condor_pool import CondorPool, require_condor
from tests.fixtures.moto import EC2_IMAGE
from tests.fixtures.slurm import SlurmCluster, _terminate, started

pytestmark = [pytest.mark.slow, pytest.mark.ec2]

SITE = {"<your-region>": "us-east-1", "<access-key-id>": "AKIDDOCSRUNTEST",
        "<secret-access-key>": "docs-run-secret-not-real", "<your-ami>": EC2_IMAGE}


@pytest.fixture(scope="module")
def head():
    node = HeadNode.make()
    yield node
    subprocess.run(["rm", "-rf", str(node.root)], check=False)


@pytest.fixture(scope="module")
def site_slurm():
    """The site's slurmctld, in a folder the service user may read (its slurm.conf), with the
    quickstart's §3 lines: its FUTURE nodes and partition, and the settings to merge."""
    import tempfile
    work = pathlib.Path(tempfile.mkdtemp(prefix="docs-slurm-", dir="/tmp"))
    work.chmod(0o755)
    section = (REPO / "docs" / "quickstart-ec2-slurm.md").read_text().split("## 3. SLURM", 1)[1].split("## 4.", 1)[0]
    (include,) = re.findall(r"```\n(.*?)```", section, re.S)
    merged = re.findall(r"`((?:SlurmctldParameters|ReturnToService)=[^`]+)`", section)
    yield from started(SlurmCluster(work, 1, conf_extra=[*include.splitlines(), *merged]))
    subprocess.run(["rm", "-rf", str(work)], check=False)


def _site_ini(doc: pathlib.Path, moto_server, **extra: str) -> str:
    """The doc's configuration block with the site's values: keys, region, AMI, and this test's
    EC2 endpoint (and ``extra`` option lines replaced)."""
    text = ini_block(doc)
    for placeholder, value in SITE.items():
        text = text.replace(placeholder, value)
    assert not re.search(r"<[a-z-]+>", text)
    text = text.replace("[Cloud]\n", f"[Cloud]\nhost = {moto_server.host}\nport = {moto_server.port}\nsecure = no\n")
    for option, value in extra.items():
        text, n = re.subn(rf"^{option} = .*$", f"{option} = {value}", text, flags=re.M)
        assert n == 1, option
    return text


def _site_boot_script(head: HeadNode, name: str, variable: str) -> None:
    """§4: the site's head node (or central manager) in the boot script of the checkout."""
    script = head.checkout / "deploy" / "cloud-init" / name
    text, n = re.subn(rf"^{variable}=\S+", f"{variable}=127.0.0.1", script.read_text(), count=1, flags=re.M)
    assert n == 1
    script.write_text(text)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _checked(result: subprocess.CompletedProcess[str]) -> str:
    """A block ending in ``nodemanager check`` run as the service user: every line about the
    configuration, the files and the state folders passed (the scheduler is not reachable
    from this test: its lines may fail)."""
    out = result.stdout + result.stderr
    assert "Traceback" not in out and "Permission denied" not in out, out[-3000:]
    failed = [line for line in out.splitlines() if line.startswith("[FAIL]")]
    assert all(re.search(r"slurm|scontrol|sinfo|collector|htcondor|condor|SlurmUser|sacctmgr", line, re.I)
               for line in failed), failed
    assert re.search(r"^\[ok  \] config", out, re.M), out[-3000:]
    assert re.search(r"^\[ok  \] state dir: .*writable", out, re.M), out[-3000:]
    return out


def _wait_for_status(url: str, proc: subprocess.Popen[bytes], log: pathlib.Path, timeout: float = 90,
                     cycle: bool = True) -> dict:
    """/status.json once the daemon answers (``cycle``: and has finished a cycle)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            doc = requests.get(url + "/status.json", timeout=2).json()
            if doc.get("last_cycle_at") or not cycle:
                return doc
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the daemon never answered at {url}: {log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as systemd stops the unit (TimeoutStopSec), then SIGKILL."""
    _terminate(proc, grace=90)


def _owned_by_service_user(path: pathlib.Path, mode: int) -> None:
    st = path.stat()
    assert pwd.getpwuid(st.st_uid).pw_name == "nodemanager", path
    assert stat.S_IMODE(st.st_mode) == mode, (path, oct(st.st_mode))


def test_the_slurm_quickstart_runs_as_written(head, moto_server, site_slurm, tmp_path):
    doc = REPO / "docs" / "quickstart-ec2-slurm.md"
    install, unit, first_checks = shell_blocks(doc)
    (head.checkout / "nodemanager.ini").write_text(head.site(_site_ini(doc, moto_server,
                                                                      slurm_conf=str(site_slurm.conf))))
    _site_boot_script(head, "slurm-node.sh", "SLURMCTLD")
    out = _checked(head.run(install))
    etc = head.root / "etc/nodemanager"
    _owned_by_service_user(etc / "nodemanager.ini", 0o600)
    _owned_by_service_user(head.root / "var/lib/nodemanager", 0o700)
    assert "config" in out
    # the unit: installed as written, then its ExecStart as its User with its Environment
    assert SYSTEMCTL.search(unit)
    _ok(head.run(SYSTEMCTL.sub("", unit)))
    head.localize("etc/systemd/system")
    assert head.unit()["User"] == ["nodemanager"]
    log = tmp_path / "unit.log"
    proc = head.start_unit(log)
    try:
        status = _wait_for_status("http://127.0.0.1:8989", proc, log)
        assert status["nodes"] == [] and "started" in log.read_text()
        out = _ok(head.run(first_checks, env={"MANWIDTH": "100"}))
    finally:
        _stop(proc)
    assert "no node and no boot would change" in out           # plan --live: no token needed
    assert re.search(r"(?m)^(no spend|USER|user)", out), out        # cost: the ledger is kept
    assert "nodemanager plan" in out and "--live" in out            # man nodemanager


# the site's central manager: HTCondor's recommended security (v9_0 is this HTCondor 23's
# version of the quickstart's recommended_v24_0), every read authenticated too (the strictest
# site); CLAIMTOBE is left for the fixture's own waits, and the head node's user cannot use it
# (not among a client's default methods), nor FS (it does not reach into the chroot): a token only
TOKEN_SITE = ("use security:recommended_v9_0\n"
              "SEC_DEFAULT_AUTHENTICATION_METHODS = FS, IDTOKENS, CLAIMTOBE\n"
              "SEC_READ_AUTHENTICATION = REQUIRED\n"
              "SEC_USE_FAMILY_SESSION = False\n"
              "SEC_PASSWORD_DIRECTORY = $(LOCAL_DIR)/passwords.d\n"      # this pool's own signing key
              "SEC_TOKEN_SYSTEM_DIRECTORY = $(LOCAL_DIR)/tokens.d\n")


@pytest.fixture
def central_manager():
    """A real central manager (collector, negotiator, schedd) with token authentication."""
    pool = CondorPool(require_condor())
    try:
        with pool.client():                         # the fixture's own waits claim an identity
            yield pool.start(TOKEN_SITE)
    finally:
        pool.stop()


def _central_manager_tools(head: HeadNode, pool: CondorPool) -> None:
    """The central manager's own ``condor_config_val`` and ``condor_token_create``, as the doc runs
    them there: these wrappers only reach the real binaries (in the chroot, with the pool's
    configuration as the central manager's /etc/condor); every answer is the real tool's."""
    for tool in ("condor_config_val", "condor_token_create"):
        path = head.root / "usr/local/bin" / tool
        path.write_text(f"#!/bin/sh\nexec {shlex.join(pool.tool(tool))} \"$@\"\n")
        path.chmod(0o755)


def _start_execute_point(pool: CondorPool, name: str) -> None:
    """A VM of the quickstart's image: the site's security, the ADMINISTRATOR line of
    50-nodemanager-execute.conf (its NODEMANAGER_HOST this head node), this cluster's attribute,
    and the pool's signing key as §1 asks (copied once its folders exist: the daemons read keys
    when a token arrives)."""
    execute = (REPO / "deploy/htcondor/50-nodemanager-execute.conf").read_text()
    (allow,) = re.findall(r"^ALLOW_ADMINISTRATOR = .*$", execute, re.M)
    pool.start_vm(name, extra=TOKEN_SITE.replace("SEC_READ_AUTHENTICATION = REQUIRED\n", "")
                  + f"NODEMANAGER_HOST = 127.0.0.1\n{allow}\n"
                  + 'NodeManagerCluster = "htc"\nSTARTD_ATTRS = $(STARTD_ATTRS) NodeManagerCluster\n')
    keys = pool.dir / f"vm-{name}" / "passwords.d"
    keys.mkdir(mode=0o700, exist_ok=True)
    shutil.copy(pool.dir / "cm" / "passwords.d" / "POOL", keys / "POOL")
    (keys / "POOL").chmod(0o600)
    pool.wait_vm(name)


def _as_service_user(head: HeadNode, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Python of the installed venv as the unit's User with the unit's CONDOR_CONFIG."""
    etc = head.root / "etc/nodemanager"
    return subprocess.run(["runuser", "-u", "nodemanager", "--", "env", f"CONDOR_CONFIG={etc}/condor_config",
                           *(f"{k}={v}" for k, v in env.items()),
                           str(head.root / "opt/nodemanager/bin/python"), "-c", code],
                          capture_output=True, text=True, timeout=60)


def test_the_htcondor_quickstart_runs_as_written(head, moto_server, central_manager, tmp_path):
    doc = REPO / "docs" / "quickstart-ec2-htcondor.md"
    install, unit, first_checks = shell_blocks(doc)
    pool = central_manager
    (head.checkout / "nodemanager.ini").write_text(head.site(_site_ini(doc, moto_server, collector=pool.collector)))
    _central_manager_tools(head, pool)
    _site_boot_script(head, "htcondor-node.sh", "CENTRAL_MANAGER")
    head.localize("src/nodemanager/deploy/htcondor")   # its token folder: the site's path, under the root
    with pool.client():
        _start_execute_point(pool, "htc-c8-1")            # check asks a VM of ours for the drain right
    try:
        out = _checked(head.run(install))
    finally:
        pool.stop_vm("htc-c8-1")                          # the daemon's first cycle: an empty pool
    # check passes as a fresh site's: the token the real condor_token_create made reads the pool
    assert "[FAIL]" not in out, out[-3000:]
    for line in ("htcondor collector", "htcondor READ at the collector", "htcondor READ at the schedds",
                 "htcondor DRAIN_JOBS at the startds"):
        assert re.search(rf"^\[ok  \] {line}: ", out, re.M), out[-3000:]
    identity = f"condor@{pool.run('condor_config_val', 'UID_DOMAIN').strip()}"
    assert f"READ granted to {identity}" in out, out[-3000:]
    etc = head.root / "etc/nodemanager"
    _owned_by_service_user(etc / "nodemanager.ini", 0o600)
    _owned_by_service_user(etc / "tokens.d", 0o700)
    _owned_by_service_user(etc / "tokens.d" / "nodemanager", 0o600)
    _ok(head.run(SYSTEMCTL.sub("", unit)))
    head.localize("etc/systemd/system")
    environment = " ".join(head.unit()["Environment"])
    assert f"CONDOR_CONFIG={etc}/condor_config" in environment
    # the service user's HTCondor client reads the pool and holds ADMINISTRATOR (drains) with the
    # token, and neither without it
    probe = (f"import htcondor2; print(htcondor2.param['SEC_TOKEN_DIRECTORY']); "
             f"print(len(htcondor2.Collector('{pool.collector}').query(htcondor2.AdType.Schedd))); "
             f"print(htcondor2.ping('<127.0.0.1:{pool.port}>', 'ADMINISTRATOR')['MyRemoteUserName'])")
    seen = _as_service_user(head, probe)
    assert seen.stdout.split() == [str(etc / "tokens.d"), "1", identity], seen.stderr
    unseen = _as_service_user(head, probe, _CONDOR_SEC_TOKEN_DIRECTORY=str(tmp_path))
    assert unseen.returncode != 0 and "Failed communication with collector" in unseen.stderr, unseen
    log = tmp_path / "unit.log"
    proc = head.start_unit(log)
    try:
        status = _wait_for_status("http://127.0.0.1:8989", proc, log)      # a cycle on the real pool
        assert status["nodes"] == [] and "started" in log.read_text()
        out = _ok(head.run(first_checks, env={"MANWIDTH": "100"}))
    finally:
        _stop(proc)
    assert re.search(r"(?m)^ok: last cycle finished", out), out     # status
    assert "no node and no boot would change" in out           # plan --live: no token needed
    assert re.search(r"(?m)^(no spend|USER|user)", out), out        # cost: the ledger is kept
    assert "nodemanager plan" in out and "--live" in out            # man nodemanager


def test_the_readme_runs_as_written(head, tmp_path):
    """The demo from an activated virtual environment in the checkout: it boots nodes; the
    matrix commands run on a site's matrix files, ``plan --live`` against the running demo with
    no token. ``./scripts/test`` installs and runs this very suite: not run from here."""
    demo, suite, matrix = shell_blocks(REPO / "README.md")
    assert suite.strip() == "./scripts/test"
    venv = head.root / "venv"
    _ok(head.run(f"/usr/bin/python3 -m venv {venv}"))
    env = {"PATH": f"{venv}/bin:{head.env['PATH']}", "VIRTUAL_ENV": str(venv)}
    for name in ("my.matrix", "old.matrix", "new.matrix"):     # the site's matrix files
        (head.checkout / name).write_text((REPO / "policy_matrix" / "default.matrix").read_text())
    log = tmp_path / "demo.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", head.site(demo)], cwd=head.checkout,
                                env={**head.env, **env}, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while "outcome boot" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(1)
        assert "outcome boot" in log.read_text(), log.read_text()[-3000:]
        # the README's plan --live names the head node's configuration: the demo's, here
        (head.root / "etc/nodemanager").mkdir(parents=True, exist_ok=True)
        (head.root / "etc/nodemanager/nodemanager.ini").write_text((head.checkout / "config.example.ini").read_text())
        result = head.run(matrix, env=env)
    finally:
        _stop(proc)
    out = _ok(result)
    assert "(idle, open, boot exceeded, idle exceeded) -> START_DRAIN" in out
    assert "no node and no boot would change" in out
