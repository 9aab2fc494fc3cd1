"""SLURM's own reason reaches the operator, against the real slurmctld: a VM whose slurmd registers
with fewer CPUs than its FUTURE NodeName line is refused (FUTURE+DRAIN+INVALID_REG, hidden from
`sinfo`, JSON and text); its VM's explanation says so in SLURM's words instead of "no scheduler
worker advertises its cloud id, name or address". A down node's words end with SLURM's reason."""

from __future__ import annotations

import pathlib
import tempfile

import pytest

import policy_matrix
from nodemanager.configuration.settings import CoreSettings
from nodemanager.core import plan
from nodemanager.model import CloudNode, Size, Snapshot
from nodemanager.scheduler import SlurmScheduler
from nodemanager.scheduler.slurm_options import SlurmOptions
from tests.fixtures.slurm import NODE_CPUS, SlurmCluster, started

pytestmark = pytest.mark.slurm

REFUSED = "rj-small-1"  # declared with twice the CPUs this host's slurmd reports


class OneRefused(SlurmCluster):
    """node1 as usual, and a FUTURE node whose slurmd (started by the test) is refused."""

    def __init__(self, workdir: pathlib.Path) -> None:
        super().__init__(workdir, ["node1", REFUSED],
                         node_extra={REFUSED: f"CPUs={2 * NODE_CPUS} State=FUTURE"})
        self.booted = False

    def start_slurmd(self, name: str) -> None:
        if name != REFUSED or self.booted:
            super().start_slurmd(name)

    def wait_states(self, wanted, timeout: float = 15) -> None:
        super().wait_states({k: v for k, v in wanted.items() if k != REFUSED}, timeout)


@pytest.fixture(scope="module")
def refused():
    yield from started(OneRefused(pathlib.Path(tempfile.mkdtemp(prefix="nmrj-", dir="/tmp"))))


def test_a_refused_vm_says_slurms_reason(refused):
    launched = refused.run("date", "+%s").stdout.strip()
    refused.booted = True
    refused.start_slurmd(REFUSED)  # the VM boots; its slurmd registers with too few CPUs
    refused.wait_for(lambda: "INVALID_REG" in refused.run("scontrol", "-F", "-o", "show", "node",
                                                          REFUSED, check=False).stdout, 15, "refusal")
    assert REFUSED not in refused.run("sinfo", "--json").stdout  # hidden from sinfo

    poll = SlurmScheduler(SlurmOptions(slurm_conf=str(refused.conf))).poll()
    worker = next(w for w in poll.workers if w.name == REFUSED)
    assert worker.classified is not None and worker.classified.state == "unpaired"
    assert worker.classified.why == ("slurm refused its slurmd (INVAL, hidden from sinfo): "
                                     "Low socket*core*thread count, Low CPUs")

    now = float(launched) + 60
    vm = CloudNode(id="i-refused", name=REFUSED, size="small", launched_at=float(launched) - 1)
    snap = Snapshot(now=now, polled_at={"cloud": now, "scheduler": now}, cloud_nodes=(vm,),
                    workers=poll.workers)
    settings = CoreSettings(sizes=(Size("small", 2 * NODE_CPUS, 1000),), boot_grace=900.0)
    why = plan(snap, settings, policy_matrix.load_default()).nodes[0]
    assert why.tuple.worker_state == "unpaired" and why.worker == REFUSED
    assert "Low socket*core*thread count, Low CPUs" in why.reason


def test_a_down_node_says_slurms_reason(refused):
    refused.set_node("node1", "State=DOWN", "Reason=admin: cable pulled")
    try:
        poll = SlurmScheduler(SlurmOptions(slurm_conf=str(refused.conf))).poll()
    finally:
        refused.set_node("node1", "State=RESUME")
    worker = next(w for w in poll.workers if w.name == "node1")
    assert worker.classified is not None and worker.classified.state == "down"
    assert worker.classified.why.endswith("; slurm reason: admin: cable pulled"), worker.classified.why
