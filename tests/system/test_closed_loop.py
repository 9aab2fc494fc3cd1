"""The closed loop with real parts: the real daemon process (``python -m nodemanager run``),
libcloud's EC2 driver against moto_server, a real slurmctld, and a harness thread that plays the
hypervisor — for every running instance it starts a real slurmd for the matching SLURM node, and
stops it when the instance is terminated.

Real jobs go in with ``sbatch``; the manager boots instances, SLURM runs the jobs on them, the
nodes go idle, the manager drains and destroys them. Checked: every job completed (its output
file), no job was killed, no instance is left running, and the status page explained each node
(tuple, matched rule, planned action or why not). A second run SIGKILLs the daemon mid-way and
starts a new one, which finishes the work.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

import pytest

from tests.fixtures.moto import EC2_IMAGE, free_port
from tests.fixtures.slurm import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

REPO = pathlib.Path(__file__).resolve().parents[2]
NODES = 6                 # SLURM node names <cluster>-small-1..6, the names the daemon gives VMs
JOB_SECONDS = 8
DEADLINE = 240.0          # the whole loop, seconds
LINGER = 6.0              # seconds the daemon keeps running once all is done


class VmSlurm(SlurmCluster):
    """A SLURM cluster whose nodes start with no slurmd: their "VMs" do not exist yet."""

    def start(self) -> None:
        self._hold = True
        try:
            super().start()
        finally:
            self._hold = False

    def start_slurmd(self, name: str) -> None:
        if not getattr(self, "_hold", False):
            super().start_slurmd(name)

    def wait_states(self, wanted, timeout: float = 15) -> None:
        if not getattr(self, "_hold", False):
            super().wait_states(wanted, timeout)


class Hypervisor(threading.Thread):
    """Maps running EC2 instances of the cluster to SLURM nodes and runs their slurmd.

    An instance named like a declared node gets that node; otherwise the lowest free node, with
    ``instance-id=<id>`` in its comment so the daemon pairs them by id. Terminated: slurmd stopped.
    """

    def __init__(self, ec2, slurm: VmSlurm, cluster: str) -> None:
        super().__init__(daemon=True, name="hypervisor")
        self.ec2, self.slurm, self.cluster = ec2, slurm, cluster
        self.by_instance: dict[str, str] = {}
        self.seen: set[str] = set()
        self.errors: list[str] = []
        self.done = threading.Event()

    def instances(self) -> dict[str, dict]:
        out = {}
        pages = self.ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "tag:nodemanager-cluster", "Values": [self.cluster]}])
        for page in pages:
            for res in page["Reservations"]:
                for inst in res["Instances"]:
                    out[inst["InstanceId"]] = inst
        return out

    def step(self) -> None:
        for iid, inst in self.instances().items():
            state = inst["State"]["Name"]
            name = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}.get("Name", "")
            if state == "running" and iid not in self.by_instance:
                free = [n for n in self.slurm.nodes if n not in self.by_instance.values()]
                node = name if name in free else free[0]
                self.slurm.run("scontrol", "update", f"NodeName={node}", f"Comment=instance-id={iid}")
                self.by_instance[iid] = node
                self.seen.add(iid)
                self.slurm.start_slurmd(node)
            elif state in ("shutting-down", "terminated", "stopped") and iid in self.by_instance:
                self.slurm.stop_slurmd(self.by_instance.pop(iid), signal.SIGKILL)

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - reported by the test, never hidden
                self.errors.append(repr(exc))
            self.done.wait(0.5)


def write_config(tmp: pathlib.Path, moto_port: int, cluster: str, slurm: VmSlurm, status_port: int) -> pathlib.Path:
    return daemon_config(tmp, moto_port, cluster, status_port,
                         f"type = slurm\nslurm_conf = {slurm.conf}\ntimeout = 20s\n",
                         cores=slurm.cpus, ram_mb=slurm.memory_mb)


def daemon_config(tmp: pathlib.Path, moto_port: int, cluster: str, status_port: int, scheduler: str, *,
                  cores: int, ram_mb: int) -> pathlib.Path:
    """The closed loops' configuration: moto's EC2, 1 s polls, one small size billed at least 15 s;
    ``scheduler``: the [Scheduler] section's lines."""
    path = tmp / "nodemanager.ini"
    path.write_text(f"""
[Daemon]
min_nodes = 0
max_nodes = 3
boot_grace = 120s
idle_grace = 10s
node_stale_after = 60s
poll_stale_after = 30s
max_concurrent_drains = 3
log_level = info

[Polling]
cloud_interval = 1s
scheduler_interval = 1s
cycle_interval = 1s
max_backoff = 5s

[Cloud]
driver = ec2
cluster = {cluster}
key = AKIDCLOSEDLOOPTEST
secret = closed-loop-secret-not-real
region = us-east-1
host = 127.0.0.1
port = {moto_port}
secure = no
calls_per_second = 20

[Cloud Create]
image = {EC2_IMAGE}

[Scheduler]
{scheduler}
[Manage]
address = 127.0.0.1
port = {status_port}
state_dir = {tmp}/state

[Size small]
cores = {cores}
ram_mb = {ram_mb}
price = 0.02
billing_period = 0
# billed per second with a short minimum: an idle node's billing window opens soon after its jobs
min_charge = 15
instance_type = t3.small
""")
    path.chmod(0o600)
    return path


def start_daemon(config: pathlib.Path, log: pathlib.Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "nodemanager", "run", "--config", str(config)],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env, cwd=REPO,
                            start_new_session=True)


def status(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=2) as r:
            return json.loads(r.read())
    except OSError:
        return None


def harness(moto_server, nodes: int = NODES, *, future: bool = False, hypervisor: type[Hypervisor] = Hypervisor,
            **slurm_options):
    """A cluster name, a :class:`VmSlurm` of ``nodes`` names ``<cluster>-small-N`` (``future``:
    declared ``State=FUTURE``; ``slurm_options``: more :class:`SlurmCluster` arguments) and a
    running ``hypervisor`` (a :class:`Hypervisor`); for a fixture."""
    import boto3
    cluster = f"cl{uuid.uuid4().hex[:6]}"
    # slurmstepd's socket path (spool dir + node name + job id) must stay under 108 bytes
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="nmcl-", dir="/tmp"))
    names = [f"{cluster}-small-{i}" for i in range(1, nodes + 1)]
    slurm = VmSlurm(workdir, names, node_extra={n: "State=FUTURE" for n in names if future}, **slurm_options)
    ec2 = boto3.client("ec2", endpoint_url=moto_server.url, region_name="us-east-1",
                       aws_access_key_id="AKIDCLOSEDLOOPTEST", aws_secret_access_key="x")
    slurm.start()
    hv = hypervisor(ec2, slurm, cluster)
    hv.start()
    try:
        yield cluster, slurm, hv
    finally:
        hv.done.set()
        hv.join(5)
        slurm.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def loop_parts(moto_server, tmp_path):
    yield from harness(moto_server)


def submit_jobs(slurm: VmSlurm, count: int) -> dict[int, pathlib.Path]:
    jobs = {}
    for i in range(count):
        out = slurm.jobs_dir / f"job-{i}.out"
        jid = int(slurm.run("sbatch", "--parsable", "-o", str(out), "-e", str(out), "-n1",
                            "--wrap", f"sleep {JOB_SECONDS}; echo done-{i} on $SLURMD_NODENAME").stdout.split(";")[0])
        jobs[jid] = out
    return jobs


def run_loop(tmp_path, moto_server, cluster, slurm, hv, *, jobs: int, kill_at: tuple[str, ...] = (),
             config: tuple[pathlib.Path, int] | None = None):
    """Run the daemon until every job left the queue and every instance is gone (then a few
    more cycles, so a repeated action would show). ``kill_at``: SIGKILL the daemon the first time
    its log shows each of these strings, and start a new one on the same config. ``config``: a
    config file and its status port to use instead of :func:`write_config`'s."""
    if config is None:
        status_port = free_port()
        config_file = write_config(tmp_path, moto_server.port, cluster, slurm, status_port)
    else:
        config_file, status_port = config
    log = tmp_path / "daemon.log"
    submitted = submit_jobs(slurm, jobs)
    proc = start_daemon(config_file, log)
    seen: dict[str, dict] = {}           # node id -> the last explanation the status page gave
    kills = 0
    pending_kills = list(kill_at)
    start = time.monotonic()
    try:
        while time.monotonic() - start < DEADLINE:
            if proc.poll() is not None:
                pytest.fail(f"daemon exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            if pending_kills and pending_kills[0] in log.read_text():
                os.kill(proc.pid, signal.SIGKILL)           # no clean stop: everything in memory lost
                proc.wait(10)
                kills += 1
                pending_kills.pop(0)
                with log.open("a") as f:
                    f.write(f"--- test: SIGKILL #{kills}, restarting ---\n")
                proc = start_daemon(config_file, log)
            doc = status(status_port)
            for n in (doc or {}).get("nodes", []):
                seen.setdefault(n["node_id"], {}).update({k: n[k] for k in ("tuple_text", "rule", "why")})
                if n["planned_action"]:
                    seen[n["node_id"]].setdefault("actions", set()).add(n["planned_action"])
            queue = set(slurm.job_ids())
            if not queue & set(submitted) and hv.seen and not hv.by_instance:
                time.sleep(LINGER)
                break
            time.sleep(0.25)
        else:
            pytest.fail(f"loop not finished in {DEADLINE:.0f}s: queue {slurm.job_ids()}, running VMs "
                        f"{hv.by_instance}\n{log.read_text()[-4000:]}")
    finally:
        stop_daemon(proc)
    return submitted, seen, log.read_text(), kills


def stop_daemon(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 20 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def assert_closed_loop(submitted, seen, text, hv, ec2_instances, *, drain_on_status_page: bool = True):
    assert hv.errors == []
    # every job completed on a node the manager booted: its own output, nothing killed or requeued
    for jid, out in submitted.items():
        assert out.exists(), f"job {jid} never ran"
        body = out.read_text()
        assert "done-" in body and "CANCELLED" not in body and "requeue" not in body.lower(), (jid, body)
    assert len(hv.seen) >= 1
    # no instance is left running
    alive = {i for i, inst in ec2_instances().items() if inst["State"]["Name"] in ("pending", "running")}
    assert alive == set(), alive
    # the status page explained every node it showed: tuple, matched rule, an action or why not
    assert set(hv.seen) <= set(seen), f"instances never on the status page: {set(hv.seen) - set(seen)}"
    for node_id, e in seen.items():
        assert e["tuple_text"].startswith("(") and ".matrix:" in e["rule"] and e["why"], (node_id, e)
        assert "destroy" in e.get("actions", ()), (node_id, e)
    if drain_on_status_page:   # a drain is planned for one cycle only; a SIGKILL may take that one
        assert any("drain" in e.get("actions", ()) for e in seen.values())
    # the log says the same, one line per decision
    assert "-> drain" in text and "outcome destroy" in text and "Traceback" not in text
    # every instance destroyed exactly once (terminated instances stay listed for a while)
    destroyed = re.findall(r"outcome destroy (\S+), \S+: ok", text)
    assert sorted(destroyed) == sorted(set(destroyed)) and set(destroyed) == set(hv.seen), destroyed


def test_jobs_boot_nodes_run_and_the_nodes_go_away(loop_parts, moto_server, tmp_path):
    cluster, slurm, hv = loop_parts
    submitted, seen, text, _ = run_loop(tmp_path, moto_server, cluster, slurm, hv, jobs=5)
    assert_closed_loop(submitted, seen, text, hv, hv.instances)
    assert "AKIDCLOSEDLOOPTEST" not in text and "closed-loop-secret-not-real" not in text


def test_sigkill_mid_way_and_a_new_daemon_finishes_the_work(loop_parts, moto_server, tmp_path):
    cluster, slurm, hv = loop_parts
    # killed right after its first boot, then again right after its first drain
    submitted, seen, text, kills = run_loop(tmp_path, moto_server, cluster, slurm, hv, jobs=4,
                                            kill_at=("outcome boot", "outcome drain"))
    assert kills == 2
    assert_closed_loop(submitted, seen, text, hv, hv.instances, drain_on_status_page=False)
    # the drains the killed daemon started were finished by the next one, not started again
    drained = re.findall(r"outcome drain (\S+), \S+: ok", text)
    assert drained and len(drained) == len(set(drained)), drained
