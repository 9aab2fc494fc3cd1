"""`nodemanager check` against a real slurmctld and the local EC2 endpoint: the settings the node
manager needs in slurm.conf (read back from the running slurmctld with `scontrol show config`),
the packing settings that work against it, the node names and sizes SLURM declares, a missing
slurm.conf, and placeholders left in the boot script."""

from __future__ import annotations

import json
import pathlib
import tempfile
import time

import pytest

from nodemanager.cli import main
from tests.conftest import REPO
from tests.fixtures.moto import EC2_IMAGE
from tests.fixtures.slurm import SlurmCluster, started

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

NAMES = ("pf-small-1", "pf-small-2")
# what deploy/slurm/slurm.conf.merge asks a site to merge (the fixture's own lines come first)
MERGED = ("SlurmctldParameters=cloud_dns,enable_configless",
          "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny,NoAddrCache")
LACKING_AND_CONFLICTING = ("SuspendTime=600", "ReturnToService=0",
                           "SelectTypeParameters=CR_Core_Memory,CR_LLN",
                           "SchedulerParameters=batch_sched_delay=0,pack_serial_at_end")


class DeclaredOnly(SlurmCluster):
    """A slurmctld whose nodes are declared FUTURE and have no slurmd (no VM booted yet)."""

    def __init__(self, workdir: pathlib.Path, conf_extra: tuple[str, ...]) -> None:
        super().__init__(workdir, NAMES, node_extra={n: "State=FUTURE" for n in NAMES},
                         conf_extra=conf_extra)

    def start_slurmd(self, name: str) -> None:
        pass

    def wait_states(self, wanted, timeout: float = 15) -> None:
        pass


def _cluster(conf_extra: tuple[str, ...]):
    return started(DeclaredOnly(pathlib.Path(tempfile.mkdtemp(prefix="nmpf-", dir="/tmp")), conf_extra))


@pytest.fixture(scope="module")
def merged():
    yield from _cluster(MERGED)


@pytest.fixture(scope="module")
def lacking():
    yield from _cluster(LACKING_AND_CONFLICTING)


def _config(tmp_path: pathlib.Path, moto_port: int, slurm_conf: str, *, cluster: str = "pf",
            cores: int = 2, ram_mb: int = 1000, script: str = "slurmd -N @NODE_NAME@ --conf-server head0\n",
            state_dir: str | None = None) -> pathlib.Path:
    boot = tmp_path / "boot.sh"
    boot.write_text("#!/bin/sh\n# SLURMCTLD=head.example.org in a comment is no placeholder\n" + script)
    path = tmp_path / "nodemanager.ini"
    path.write_text(f"""\
[Daemon]
max_nodes = 2
[Cloud]
driver = ec2
cluster = {cluster}
key = AKIDPREFLIGHTSLURM
secret = preflight-slurm-not-real
region = us-east-1
host = 127.0.0.1
port = {moto_port}
secure = no
[Cloud Create]
image = {EC2_IMAGE}
user_data_file = {boot}
[Scheduler]
type = slurm
slurm_conf = {slurm_conf}
timeout = 20s
[Manage]
port = -1
state_dir = {state_dir or tmp_path / "state"}
[Size small]
cores = {cores}
ram_mb = {ram_mb}
price = 0.1
instance_type = t3.small
""")
    return path


def _check(config: pathlib.Path, capsys) -> tuple[int, dict[str, dict]]:
    code = main(["check", "--config", str(config), "--format", "json"])
    return code, {c["name"]: c for c in json.loads(capsys.readouterr().out)}


def test_a_slurm_conf_with_the_merged_lines_passes(merged, moto_server, tmp_path, capsys):
    code, checks = _check(_config(tmp_path, moto_server.port, str(merged.conf)), capsys)
    failed = {n: c["detail"] for n, c in checks.items() if c["ok"] is not True}
    assert code == 0 and not failed, failed
    assert "cloud_dns" in checks["slurm.conf SlurmctldParameters"]["detail"]
    assert checks["slurm nodes of size small"]["detail"] == ("SLURM declares all 2 names VMs of this size "
                                                             "get (pf-small-1 to pf-small-2)")
    assert checks["size small vs SLURM"]["detail"] == ("pf-small-1: CPUs=2, RealMemory=1000: the size's "
                                                       "2 cores and 950-1000 MB")


def test_a_slurm_conf_lacking_settings_fails_naming_each_and_reports_conflicts(lacking, moto_server,
                                                                               tmp_path, capsys):
    code, checks = _check(_config(tmp_path, moto_server.port, str(lacking.conf)), capsys)
    assert code == 1
    params = checks["slurm.conf SlurmctldParameters"]
    assert params["ok"] is False
    assert params["detail"].startswith("(none): lacks cloud_dns, enable_configless")
    assert params["fix"].startswith("add cloud_dns,enable_configless to your existing SlurmctldParameters")
    suspend = checks["slurm.conf SuspendTime"]
    assert suspend["ok"] is False and suspend["detail"].startswith("600 sec: SLURM powers idle nodes down itself")
    assert checks["slurm.conf ReturnToService"]["ok"] is False
    packing = checks["slurm.conf packing"]
    assert packing["ok"] is None
    assert "CR_LLN" in packing["detail"] and "pack_serial_at_end" in packing["detail"]
    assert checks["slurm.conf CommunicationParameters"]["ok"] is None


def test_node_names_slurm_does_not_declare_fail(merged, moto_server, tmp_path, capsys):
    code, checks = _check(_config(tmp_path, moto_server.port, str(merged.conf), cluster="pff"), capsys)
    assert code == 1
    names = checks["slurm nodes of size small"]
    assert names["ok"] is False
    assert names["detail"].startswith("SLURM declares 0 of the 2 names VMs of this size get; not "
                                      "pff-small-1, pff-small-2")


def test_a_size_larger_than_its_slurm_nodes_fails(merged, moto_server, tmp_path, capsys):
    code, checks = _check(_config(tmp_path, moto_server.port, str(merged.conf), cores=4, ram_mb=4000),
                          capsys)
    assert code == 1
    fit = checks["size small vs SLURM"]
    assert fit["ok"] is False
    assert "SLURM declares CPUs=2, the size has cores = 4" in fit["detail"]
    code, checks = _check(_config(tmp_path, moto_server.port, str(merged.conf), ram_mb=900), capsys)
    assert checks["size small vs SLURM"]["ok"] is False
    assert "RealMemory=1000 is over the size's ram_mb = 900" in checks["size small vs SLURM"]["detail"]


def test_a_missing_slurm_conf_fails_at_once_with_slurms_words(moto_server, tmp_path, capsys):
    missing = tmp_path / "etc" / "slurm.conf"
    start = time.monotonic()
    code, checks = _check(_config(tmp_path, moto_server.port, str(missing)), capsys)
    assert time.monotonic() - start < 10  # sinfo itself retries a missing file for 60 s
    assert code == 1
    poll = checks["scheduler"]
    assert poll["ok"] is False
    assert f"cannot stat file {missing} ([Scheduler] slurm_conf): No such file or directory" in poll["detail"]
    assert not [n for n in checks if n.startswith("slurm")]  # nothing more asked of a SLURM not reached


def test_placeholders_left_in_the_boot_script_fail(merged, moto_server, tmp_path, capsys):
    script = "SLURMCTLD=head.example.org\nslurmd -N @NODE_NAME@ --conf-server $SLURMCTLD # @SITE@\n"
    code, checks = _check(_config(tmp_path, moto_server.port, str(merged.conf), script=script), capsys)
    assert code == 1
    boot = checks["boot script"]
    assert boot["ok"] is False
    assert "line 3: 'SLURMCTLD=head.example.org' (head.example.org)" in boot["detail"]
    assert "(@SITE@)" in boot["detail"] and "@NODE_NAME@)" not in boot["detail"]


def test_the_shipped_slurm_include_overrides_no_setting():
    """deploy/slurm/nodemanager.conf holds node and partition lines only: included from a site's
    slurm.conf it adds nodes and overrides none of the site's settings."""
    lines = [line for line in (REPO / "deploy" / "slurm" / "nodemanager.conf").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert lines and all(line.startswith(("NodeName=", "PartitionName=")) for line in lines), lines
    merge = (REPO / "deploy" / "slurm" / "slurm.conf.merge").read_text().splitlines()
    assert all(line.startswith("#") for line in merge if line.strip())
