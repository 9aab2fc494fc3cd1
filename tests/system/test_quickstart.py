"""docs/quickstart-ec2-slurm.md, as an operator would follow it: its configuration block, with only
the site's own values filled in (region, keys, AMI, the head node's paths), passes `nodemanager
check` against the local EC2 endpoint and a real slurmctld, and then runs jobs end to end: VMs boot
with the shipped boot script carrying their SLURM NodeName, join, run the jobs, and go away."""

from __future__ import annotations

import base64
import pathlib
import re
import subprocess
import sys

import pytest

from tests.fixtures.moto import EC2_IMAGE, free_port
from tests.system.test_closed_loop import (NODES, REPO, assert_closed_loop, loop_parts,  # noqa: F401
                                           run_loop)

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

DOC = REPO / "docs" / "quickstart-ec2-slurm.md"
BOOT_SCRIPT = REPO / "deploy" / "cloud-init" / "slurm-node.sh"


def quickstart_config() -> str:
    blocks = re.findall(r"```ini\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1, "the quickstart has one configuration block"
    return blocks[0]


def site_config(text: str, *, cluster: str, moto_port: int, slurm_conf: str, tmp, port: int,
                boot_script: pathlib.Path, cpus: int, memory_mb: int) -> str:
    """The quickstart's block with what a site fills in, and the local endpoints of this test."""
    site = {"<your-region>": "us-east-1", "<access-key-id>": "AKIDQUICKSTARTTEST",
            "<secret-access-key>": "quickstart-secret-not-real", "<your-ami>": EC2_IMAGE}
    for placeholder, value in site.items():
        assert placeholder in text, placeholder
        text = text.replace(placeholder, value)
    assert not re.search(r"<[a-z-]+>", text), "a placeholder the test does not fill"
    replacements = {  # the head node's paths and names in this test
        r"^cluster = hpc$": f"cluster = {cluster}",
        r"^user_data_file = .*$": f"user_data_file = {boot_script}",
        # the test cluster's NodeName lines: NODES names of its CPUs and memory
        r"^max_nodes = 20$": f"max_nodes = {NODES}",
        r"^cores = 4$": f"cores = {cpus}",
        r"^ram_mb = 16384$": f"ram_mb = {memory_mb}",
        r"^slurm_conf = .*$": f"slurm_conf = {slurm_conf}",
        r"^state_file = .*$": f"state_file = {tmp / 'admin.json'}",
        r"^state_dir = .*$": f"state_dir = {tmp / 'state'}",
        r"^port = 8989$": f"port = {port}",
        # test speed: seconds instead of minutes
        r"^boot_grace = .*$": "boot_grace = 120s",
        r"^idle_grace = .*$": "idle_grace = 10s",
        r"^min_charge = 60$": "min_charge = 15",
        r"^\[Cloud\]$": f"[Cloud]\nhost = 127.0.0.1\nport = {moto_port}\nsecure = no",
    }
    for pattern, value in replacements.items():
        text, n = re.subn(pattern, value, text, flags=re.M)
        assert n == 1, pattern
    return text + "\n[Polling]\ncloud_interval = 1s\nscheduler_interval = 1s\ncycle_interval = 1s\n"


def merge_into_slurm_conf(slurm) -> None:
    """§3: the settings the quickstart says to merge into slurm.conf, then ``scontrol reconfigure``."""
    section = DOC.read_text().split("## 3. SLURM", 1)[1].split("## 4.", 1)[0]
    lines = re.findall(r"`((?:SlurmctldParameters|ReturnToService)=[^`]+)`", section)
    assert len(lines) == 2, lines
    slurm.conf.write_text(slurm.conf.read_text() + "\n".join(lines) + "\n")
    slurm.run("scontrol", "reconfigure")


def test_the_slurm_quickstart_checks_and_runs_jobs(loop_parts, moto_server, tmp_path):
    cluster, slurm, hv = loop_parts
    port = free_port()
    merge_into_slurm_conf(slurm)
    boot_script = tmp_path / "slurm-node.sh"  # §4: the site's head node in the script
    boot_script.write_text(re.sub(r"^SLURMCTLD=\S+", "SLURMCTLD=127.0.0.1", BOOT_SCRIPT.read_text(),
                                  count=1, flags=re.M))
    config = tmp_path / "nodemanager.ini"
    config.write_text(site_config(quickstart_config(), cluster=cluster, moto_port=moto_server.port,
                                  slurm_conf=str(slurm.conf), tmp=tmp_path, port=port,
                                  boot_script=boot_script, cpus=slurm.cpus, memory_mb=slurm.memory_mb))
    config.chmod(0o600)
    check = subprocess.run([sys.executable, "-m", "nodemanager", "check", "--config", str(config)],
                           capture_output=True, text=True, cwd=REPO, env=slurm.env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "[FAIL]" not in check.stdout and "cloud permission ec2:RunInstances: allowed" in check.stdout
    assert "[ok  ] slurm.conf SlurmctldParameters: enable_configless,cloud_dns" in check.stdout

    submitted, seen, text, _ = run_loop(tmp_path, moto_server, cluster, slurm, hv, jobs=2,
                                        config=(config, port))
    assert_closed_loop(submitted, seen, text, hv, hv.instances)
    # each VM got the shipped boot script with its own SLURM NodeName filled in
    for iid in hv.seen:
        data = hv.ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")
        script = base64.b64decode(data["UserData"]["Value"]).decode()
        name = re.search(r"^NODE_NAME=(\S+)$", script, re.M)
        assert name and name.group(1).startswith(f"{cluster}-small-"), script[:300]
        assert "@NODE_NAME@" not in script
