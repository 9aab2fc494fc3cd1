"""The closed loop of tests/system/test_closed_loop.py (the real daemon process, libcloud's EC2
driver on moto_server, a real slurmctld) with a boot script that writes the wrong instance id: the
SLURM node a new VM joins as says ``instance-id=`` of another (gone) VM in its comment. The VM is
unpaired, and past its boot grace the matrix says START_SHUTDOWN while its job runs. Checked: the
VM is kept and the job finishes (its output, never cancelled), the status page names the conflict,
and once the comment names the right VM the idle node is drained and destroyed.
"""

from __future__ import annotations

import time

import pytest

from tests.fixtures.moto import free_port
from tests.system.test_closed_loop import (Hypervisor, daemon_config, harness, start_daemon, status,
                                           stop_daemon)

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

STALE = "i-0feedfacecafe0001"   # the previous VM of the name, long gone
JOB_SECONDS = 45                 # well past the boot grace below
DEADLINE = 240.0


class WrongIdHypervisor(Hypervisor):
    """Runs each new instance's slurmd, but its "boot script" writes :data:`STALE` in the comment
    (until ``fixed``: then the instance's own id)."""

    fixed = False

    def step(self) -> None:
        for iid, inst in self.instances().items():
            state = inst["State"]["Name"]
            if state == "running" and iid not in self.by_instance:
                name = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}.get("Name", "")
                free = [n for n in self.slurm.nodes if n not in self.by_instance.values()]
                node = name if name in free else free[0]
                self.by_instance[iid] = node
                self.seen.add(iid)
                self.slurm.start_slurmd(node)
            elif state in ("shutting-down", "terminated", "stopped") and iid in self.by_instance:
                self.slurm.stop_slurmd(self.by_instance.pop(iid))
        for iid, node in self.by_instance.items():
            want = f"instance-id={iid if self.fixed else STALE}"
            if want not in self.slurm.run("scontrol", "show", "node", node).stdout:
                self.slurm.run("scontrol", "update", f"NodeName={node}", f"Comment={want}")


@pytest.fixture
def parts(moto_server):
    # FUTURE lines: the VM takes a declared node's name
    yield from harness(moto_server, nodes=2, future=True, hypervisor=WrongIdHypervisor)


def test_a_busy_node_whose_comment_names_another_instance_keeps_its_vm_until_the_job_ends(
        parts, moto_server, tmp_path):
    cluster, slurm, hv = parts
    port = free_port()
    config = daemon_config(tmp_path, moto_server.port, cluster, port,
                           f"type = slurm\nslurm_conf = {slurm.conf}\ntimeout = 20s\n",
                           cores=slurm.cpus, ram_mb=slurm.memory_mb)
    config.write_text(config.read_text().replace("boot_grace = 120s", "boot_grace = 15s"))
    out = slurm.jobs_dir / "job.out"
    job = int(slurm.run("sbatch", "--parsable", "-o", str(out), "-e", str(out), "-n1", "--wrap",
                        f"sleep {JOB_SECONDS}; echo done on $SLURMD_NODENAME").stdout.split(";")[0])
    log = tmp_path / "daemon.log"
    proc = start_daemon(config, log)
    held: dict = {}
    start = time.monotonic()
    try:
        while time.monotonic() - start < DEADLINE:
            assert proc.poll() is None, log.read_text()[-3000:]
            for n in (status(port) or {}).get("nodes", []):
                if n.get("blocked_by") == "id_conflict":
                    held = n
            if job not in slurm.job_ids() and out.exists():
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the job never finished:\n{log.read_text()[-3000:]}")
        # the job ran to its end on a VM that was never destroyed under it
        assert "done on" in out.read_text() and "CANCELLED" not in out.read_text()
        [iid] = hv.seen
        assert hv.instances()[iid]["State"]["Name"] == "running"
        assert held and held["node_id"] == iid and STALE in held["why"], held
        assert "matrix says START_SHUTDOWN" in held["why"]
        text = log.read_text()
        assert f"outcome destroy {iid}" not in text and "Traceback" not in text
        # the boot script fixed: the node pairs, and idle it goes like any other
        hv.fixed = True
        deadline = time.monotonic() + 120
        while hv.instances()[iid]["State"]["Name"] in ("pending", "running"):
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
    finally:
        stop_daemon(proc)
