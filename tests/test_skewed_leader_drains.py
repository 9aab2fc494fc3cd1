"""A head node whose clock runs ahead (a new leader 240 s ahead, under max_clock_skew) and an
operator's drain: the real Controller and Actuator over libcloud's EC2 driver on moto (which
stamps launch times and its Date header with the true time), and a scheduler on the true clock
(the drain time it reports is the scheduler host's). Our clock and the scheduler's are two
injected clocks; nothing sleeps.

The controller puts the VM's launch time on its own clock (launch + 240 s); the drain, started
after the launch on the scheduler's clock, must not look older than the VM (a drain inherited
from an older VM of that name, which is cancelled): that would RESUME the node and drain it
again every few cycles, each RESUME letting jobs land on a node being drained.
"""

from __future__ import annotations

import time
from dataclasses import replace

import policy_matrix
import pytest

from nodemanager.console.admin import AdminState
from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.configuration.settings import CloudSettings, CoreSettings, PollSettings, Settings
from nodemanager.model import Demand, Size
from tests.fixtures.daemon import ScriptedScheduler, Time

pytestmark = pytest.mark.ec2

SIZE = Size("small", cores=2, ram_mb=4096, price=0.1, instance_type="t3.small")
AHEAD = 240.0
STEP = 5.0


class TrueClockScheduler(ScriptedScheduler):
    """The scripted scheduler polled on our clock (as the adapters stamp their polls), whose
    records carry the scheduler host's times (``true``): a drain's start, a daemon's registration."""

    true: Time

    def drain(self, worker, schedule, reason):
        ticket = super().drain(worker, schedule, reason)
        self.workers[worker.name] = replace(self.workers[worker.name], drain_since=self.true())
        return ticket


@pytest.mark.parametrize("ahead", [AHEAD, -AHEAD], ids=["leader-ahead", "leader-behind"])
def test_an_operators_drain_does_not_flap_on_a_leader_whose_clock_is_off(ec2_cloud, ec2_proxy, ahead):
    ours = Time(time.time())                         # this head node's clock
    truth = Time(ours.now - ahead)                   # the cloud's and the scheduler's
    ec2_proxy.date_offset = -ahead                   # EC2's Date header and launch times on it
    settings = Settings(core=CoreSettings(sizes=(SIZE,), max_nodes=2, boot_grace=600.0, idle_grace=600.0,
                                          poll_stale_after=120.0),
                        cloud=CloudSettings(quota_backoff=300.0), poll=PollSettings(max_backoff=60.0))
    sched = TrueClockScheduler(ours)
    sched.true = truth
    cloud = ec2_cloud(clock=ours)
    admin = AdminState(clock=ours)
    actuator = Actuator(cloud, sched, settings, clock=ours, latest_worker=lambda name: sched.workers.get(name))
    ctl = Controller(settings, policy_matrix.load_default(), actuator, clock=ours, admin=admin,
                     clock_skew=lambda: cloud.clock_skew)
    reports = []

    def cycle():
        nodes = cloud.list_nodes()
        for n in nodes:
            if n.state == "running" and n.name not in sched.workers:
                w = sched.add(n.name, n.id, running_jobs=1)
                sched.workers[n.name] = replace(w, registered_at=truth.now)
        for name, w in list(sched.workers.items()):
            sched.workers[name] = replace(w, last_heard=ours.now)
        reports.append(ctl.cycle(nodes, ours.now, sched.poll()))
        truth.advance(STEP)
        ours.advance(STEP)

    sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    cycle()
    sched.demand = []
    for _ in range(6):                               # the VM joins, busy, 30 s after its launch
        cycle()
    assert [n.state for n in cloud.list_nodes()] == ["running"], [(o.kind, o.result, o.detail) for r in reports for o in r.outcomes]
    [node] = cloud.list_nodes()
    assert abs((cloud.clock_skew or 0.0) + ahead) <= 2.0, cloud.clock_skew   # the skew is measured
    admin.drain(node.name)
    for _ in range(36):                              # 3 minutes of cycles
        cycle()
    calls = [call for call, name in sched.calls if name == node.name and call in ("drain", "cancel_drain")]
    assert calls == ["drain"], calls                 # drained once, never resumed
    assert sched.workers[node.name].draining
    assert not [o for r in reports for o in r.outcomes if o.kind == "cancel_drain"]
