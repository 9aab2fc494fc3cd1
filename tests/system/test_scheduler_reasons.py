"""The scheduler's own reason reaches the operator, through the real daemon (`nodemanager run`),
libcloud's EC2 driver on the local endpoint and a real slurmctld whose slurmd start when their
"VM" boots (the closed loop's hypervisor):

* a VM whose slurmd SLURM refuses (its FUTURE NodeName line declares more CPUs than the VM has:
  INVAL, hidden from `sinfo`) is explained on the status page in SLURM's words;
* a VM whose worker has fewer CPUs than its size's cores is warned about once, in the log and
  in the status page's notes."""

from __future__ import annotations

import re
import time

import pytest

from tests.fixtures.moto import free_port
from tests.system.test_closed_loop import harness, start_daemon, status, stop_daemon, write_config

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

NODES = 2


def _run_until(tmp_path, moto_server, cluster, slurm, cores: int, found, what: str, timeout: float = 90,
               linger: float = 0.0):
    """Run the daemon with one queued job until ``found(status document)``, then ``linger`` seconds
    more (a repeated log line would show); return the last status document."""
    port = free_port()
    config = write_config(tmp_path, moto_server.port, cluster, slurm, port)
    config.write_text(re.sub(r"^cores = \d+$", f"cores = {cores}", config.read_text(), flags=re.M)
                      .replace("max_nodes = 3", "max_nodes = 1"))
    slurm.sbatch("-n1", wrap="sleep 600")
    log = tmp_path / "daemon.log"
    proc = start_daemon(config, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            doc = status(port)
            if doc and found(doc):
                time.sleep(linger)
                return doc
            assert time.monotonic() < deadline, f"no {what} in {timeout:.0f}s:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
    finally:
        stop_daemon(proc)


@pytest.fixture
def parts(moto_server, request):
    # future: the site's FUTURE lines (deploy/slurm/nodemanager.conf)
    yield from harness(moto_server, NODES, **request.param)


REFUSED = "Low socket*core*thread count, Low CPUs"


@pytest.mark.parametrize("parts", [{"cpus": 4, "future": True}], indirect=True, ids=["four-cpu-lines"])
def test_a_vm_slurm_refuses_is_explained_in_slurms_words(parts, moto_server, tmp_path):
    cluster, slurm, hv = parts

    def refused(doc):
        return any(REFUSED in (n.get("why") or "") for n in doc.get("nodes", []))

    doc = _run_until(tmp_path, moto_server, cluster, slurm, 4, refused, "refusal on the status page")
    node = next(n for n in doc["nodes"] if REFUSED in (n.get("why") or ""))
    assert node["tuple_text"].startswith("(unpaired,")
    assert "slurm refused its slurmd (INVAL, hidden from sinfo)" in node["why"]
    assert "no scheduler worker advertises" not in node["why"]


@pytest.mark.parametrize("parts", [{}], indirect=True, ids=["two-cpu-lines"])
def test_a_worker_smaller_than_its_size_is_warned_about_once(parts, moto_server, tmp_path):
    cluster, slurm, hv = parts
    note = re.compile(rf"node {cluster}-small-\d+: worker {cluster}-small-\d+ has 2 CPUs, smaller than its "
                      r"size small \(4 cores\): jobs placed for its cores wait")

    def warned(doc):
        return any(note.fullmatch(n) for n in doc.get("notes", []))

    _run_until(tmp_path, moto_server, cluster, slurm, 4, warned, "undersized note", linger=5.0)
    text = (tmp_path / "daemon.log").read_text()
    lines = [line for line in text.splitlines() if note.search(line)]
    assert len(lines) == 1 and " WARNING nodemanager.decisions: " in lines[0], lines
