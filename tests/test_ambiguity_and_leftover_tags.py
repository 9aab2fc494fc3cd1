"""What an ambiguous pairing and a leftover destroy tag may do to a busy VM, through the real
Controller and Actuator over libcloud's EC2 driver on the local EC2 endpoint (moto), on a virtual
clock; the scheduler side is scripted so a test says exactly which workers report jobs.

- A node that matches several workers (``small-1`` and ``SMALL-1.example.org``), or a name two VMs
  share, is held (``blocked_by = ambiguous``, one decision line when its matrix action is held
  back), never destroyed with its job;
  the actuator's last check before a destroy looks at every worker that could be the node's.
- A ``nodemanager-destroy`` tag left by an interrupted destroy never beats an operator's hold, is
  resumed only for a node that still qualifies, and is removed from a node that recovered.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import pytest

import policy_matrix
from nodemanager.cycle.actuate import Actuator, Task
from nodemanager.console.admin import AdminState
from nodemanager.cycle.controller import Controller
from nodemanager.model import Demand, ItemKind, PlanItem, Size, Worker
from nodemanager.configuration.settings import CloudSettings, CoreSettings, PollSettings, Settings
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.tags import TAG_CLUSTER, TAG_DESTROY, TAG_SIZE
from tests.fixtures.daemon import ScriptedScheduler, Time

pytestmark = pytest.mark.ec2

SIZE = Size("small", cores=2, ram_mb=4096, price=0.1, instance_type="t3.small")
STEP = 30.0
BOOT_GRACE = 300.0


class Loop:
    """Controller + Actuator over EC2 on moto and a scheduler whose workers the test sets; every
    worker is heard from each cycle."""

    def __init__(self, ec2_cloud, proxy) -> None:
        self.time = Time(time.time())            # moto stamps launch times with the real clock
        self.proxy = proxy
        self.settings = Settings(core=CoreSettings(sizes=(SIZE,), max_nodes=4, boot_grace=BOOT_GRACE,
                                                   idle_grace=120.0, poll_stale_after=120.0),
                                 cloud=CloudSettings(quota_backoff=300.0), poll=PollSettings(max_backoff=60.0))
        self.sched = ScriptedScheduler(self.time)
        self.cloud = ec2_cloud(clock=self.time)
        self.admin = AdminState(clock=self.time)
        self.actuator = Actuator(self.cloud, self.sched, self.settings, clock=self.time,
                                 latest_worker=lambda name: self.sched.workers.get(name))
        self.ctl = Controller(self.settings, policy_matrix.load_default(), self.actuator, clock=self.time,
                              admin=self.admin)
        self.reports: list = []

    def live(self):
        return [n for n in self.cloud.list_nodes() if n.state in ("pending", "running")]

    def worker(self, name: str, *, jobs: int, cloud_id: str | None = None) -> None:
        w = self.sched.add(name, cloud_id or "", running_jobs=jobs)
        self.sched.workers[name] = replace(w, cloud_id=cloud_id)

    def cycle(self):
        for name, w in list(self.sched.workers.items()):
            state = "drain" if w.draining and not w.running_jobs else w.state  # SLURM: IDLE+DRAIN
            self.sched.workers[name] = replace(w, last_heard=self.time.now, state=state)
        nodes = self.cloud.list_nodes()
        report = self.ctl.cycle(nodes, self.time.now, self.sched.poll())
        self.reports.append(report)
        return report

    def run(self, seconds: float) -> None:
        for _ in range(int(seconds / STEP)):
            self.time.advance(STEP)
            self.cycle()

    def boot_one(self):
        """One VM booted by the controller for one queued job, running."""
        self.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
        self.cycle()
        self.sched.demand = []
        [node] = self.live()
        self.time.advance(60)                           # its workers register a minute after launch
        return node

    def explanation(self, node_id: str):
        [e] = [e for e in self.reports[-1].plan.nodes if e.node_id == node_id]
        return e

    def outcomes(self, kind: str):
        return [o for r in self.reports for o in r.outcomes if o.kind == kind]


@pytest.fixture
def loop(ec2_cloud, ec2_proxy):
    return Loop(ec2_cloud, ec2_proxy)


def test_a_node_matching_two_workers_is_held_not_destroyed_with_its_job(loop, caplog):
    """``small-1`` runs a job; ``SMALL-1.example.org`` (the same host under its full name) is idle:
    past boot grace the node is held as ambiguous, named in one decision line, and its VM lives."""
    node = loop.boot_one()
    loop.worker(node.name, jobs=1)
    loop.worker(f"{node.name.upper()}.example.org", jobs=0)
    with caplog.at_level(logging.INFO, logger="nodemanager.decisions"):
        loop.run(BOOT_GRACE * 2)
    assert [n.id for n in loop.live()] == [node.id]
    assert loop.proxy.count("TerminateInstances") == 0
    e = loop.explanation(node.id)
    assert e.blocked_by == "ambiguous" and e.action is None
    assert f"workers {node.name.upper()}.example.org, {node.name} all match" in e.reason
    [shown] = [n for n in status_document(StatusView(report=loop.reports[-1]), None, loop.time.now)["nodes"]
               if n["node_id"] == node.id]
    assert shown["blocked_by"] == "ambiguous" and "all match its name or address" in shown["why"]
    lines = [r.getMessage() for r in caplog.records if "-> none: blocked by ambiguous" in r.getMessage()
             and r.getMessage().endswith("says START_SHUTDOWN")]
    assert len(lines) == 1 and lines[0].startswith(f"node {node.name} ")


def test_two_vms_sharing_one_name_are_held_while_its_worker_runs_a_job(loop):
    """A twin (two VMs, one name) and one busy worker of that name: neither VM is destroyed."""
    first = loop.boot_one()
    tags = {TAG_CLUSTER: first.tags[TAG_CLUSTER], TAG_SIZE: SIZE.name}
    twin = loop.cloud.create_node(SIZE, first.name, tags)
    loop.worker(first.name, jobs=1)
    loop.run(BOOT_GRACE * 2)
    assert sorted(n.id for n in loop.live()) == sorted([first.id, twin.id])
    assert loop.proxy.count("TerminateInstances") == 0
    assert {loop.explanation(i).blocked_by for i in (first.id, twin.id)} == {"ambiguous"}


def _destroy_without_drain(loop, node):
    """The actuator's outcome of a destroy of an unpaired node (never cancellable), handed to it."""
    item = PlanItem(kind=ItemKind.DESTROY, node_id=node.id, node_name=node.name, reason="unpaired",
                    worker=None, cancellable=False)
    [out] = loop.actuator.run(Task(item, node, None))
    return out


def test_the_last_check_before_a_destroy_looks_at_every_worker_matching_the_node(loop):
    """A destroy of an unpaired node (never cancellable) handed to the actuator is refused while a
    worker matching the node by its full name runs a job, though no worker is paired with it."""
    node = loop.boot_one()
    loop.worker(f"{node.name}.example.org", jobs=1)
    loop.worker(node.name.upper(), jobs=0)
    loop.cycle()
    out = _destroy_without_drain(loop, node)
    assert out.result == "refused" and f"{node.name}.example.org runs 1 job(s)" in out.detail
    assert [n.id for n in loop.live()] == [node.id]


def _leftover(loop):
    """A busy VM carrying the destroy tag of a destroy decided 20 min ago and interrupted."""
    node = loop.boot_one()
    loop.worker(node.name, jobs=1, cloud_id=node.id)
    loop.cloud.set_tags(node, {TAG_DESTROY: str(int(loop.time.now - 1200))})
    return node


def test_a_hold_beats_a_leftover_destroy_tag(loop):
    """Held, busy, tagged: when its job ends it is not destroyed, and the hold stays."""
    node = _leftover(loop)
    loop.admin.hold(node.name)
    loop.run(120)
    loop.sched.set_jobs(node.name, 0)
    loop.run(600)
    assert [n.id for n in loop.live()] == [node.id]
    assert loop.proxy.count("TerminateInstances") == 0
    assert loop.admin.held == {node.name}
    assert loop.explanation(node.id).blocked_by == "held"


def test_a_leftover_destroy_tag_on_a_node_that_recovered_is_removed(loop, caplog):
    """Busy and tagged: the tag is removed (one decision line says why) and the VM outlives its
    job; given back later, it is drained first like any idle node."""
    node = _leftover(loop)
    with caplog.at_level(logging.DEBUG, logger="nodemanager.decisions"):
        loop.run(60)
    [listed] = loop.live()
    assert not listed.tags.get(TAG_DESTROY)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO
            and "-> cancel_drain: not destroyed" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"node {node.name} ") and "not destroyed: the destroy decided" in said[0]
    whole = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
             and r.getMessage().startswith(f"node {node.name} ({node.id}") and "not destroyed" in r.getMessage()]
    assert len(whole) == 1 and "no longer holds" in whole[0]
    loop.sched.set_jobs(node.name, 0)
    loop.run(60)                                        # within idle_grace: kept
    assert [n.id for n in loop.live()] == [node.id]
    loop.run(900)                                       # idle past its grace: drained, then destroyed
    assert loop.live() == []
    assert ("drain", node.name) in loop.sched.calls and ("confirm_drained", node.name) in loop.sched.calls


def test_a_leftover_destroy_tag_on_a_node_still_down_is_finished(loop):
    """A tagged VM whose worker is gone still qualifies: its destroy is finished."""
    node = loop.boot_one()
    loop.cloud.set_tags(node, {TAG_DESTROY: str(int(loop.time.now - 1200))})
    loop.run(60)
    assert loop.live() == []
    assert any("finishing a destroy started before" in o.detail for o in loop.outcomes("destroy"))


def test_a_busy_worker_answering_to_the_vms_name_with_another_instance_id_holds_the_vm(loop, caplog):
    """A SLURM node whose comment still names the previous VM of its name (``instance-id=`` left
    by a boot script that failed), registered since this VM's launch and running a job: the VM is
    unpaired, and past boot grace the matrix says START_SHUTDOWN, but it is held as a conflict
    (status page, one decision line) and never destroyed with the job; once the id is fixed it
    pairs and, idle, is drained and destroyed as any node."""
    node = loop.boot_one()
    loop.worker(node.name, jobs=1, cloud_id="i-0previousvm0000")
    with caplog.at_level(logging.INFO, logger="nodemanager.decisions"):
        loop.run(BOOT_GRACE * 2)
    assert [n.id for n in loop.live()] == [node.id]
    assert loop.proxy.count("TerminateInstances") == 0
    e = loop.explanation(node.id)
    assert e.blocked_by == "id_conflict" and e.action is None and e.matrix_action.value == "START_SHUTDOWN"
    assert f"worker {node.name} answers to its name or address but says it is instance i-0previousvm0000" in e.reason
    [shown] = [n for n in status_document(StatusView(report=loop.reports[-1]), None, loop.time.now)["nodes"]
               if n["node_id"] == node.id]
    assert shown["blocked_by"] == "id_conflict" and "i-0previousvm0000" in shown["why"]
    lines = [r.getMessage() for r in caplog.records if "-> none: blocked by id_conflict" in r.getMessage()
             and r.getMessage().endswith("says START_SHUTDOWN")]
    assert len(lines) == 1 and lines[0].startswith(f"node {node.name} ")
    loop.worker(node.name, jobs=0, cloud_id=node.id)          # the id fixed, the job done
    loop.run(900)
    assert loop.live() == [] and loop.proxy.count("TerminateInstances") == 1


def test_the_last_check_before_a_destroy_looks_at_workers_carrying_another_instance_id(loop):
    """A destroy without our drain (never cancellable) is refused while a worker answering to the
    node's name runs a job, whatever instance id it carries."""
    node = loop.boot_one()
    loop.worker(node.name, jobs=1, cloud_id="i-0previousvm0000")
    loop.cycle()
    out = _destroy_without_drain(loop, node)
    assert out.result == "refused" and f"{node.name} runs 1 job(s)" in out.detail
    assert [n.id for n in loop.live()] == [node.id]
