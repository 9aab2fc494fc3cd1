"""Clock sanity: the cloud's clock an hour ahead of ours, and our own clock stepped back an hour.

The simulated cloud keeps its own clock (``clock_offset``) and stamps each reply with it, as a
real cloud's Date header does; the controller reads the skew the adapter measured from it.
"""

from __future__ import annotations

import time

import policy_matrix
import pytest

from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.core import plan
from nodemanager.model import CloudNode, Demand, Snapshot
from nodemanager.configuration.settings import CloudSettings, CoreSettings, Settings
from nodemanager.sim.cloud import SimCloud
from nodemanager.console.status_document import StatusView, status_document
from policy_matrix.vocabulary import BOOT_EXCEEDED, CLOSED, OPEN
from tests.fixtures.daemon import SIZES, ScriptedScheduler, Time

HOUR = 3600.0
GRACE = 600.0
STEP = 30.0
MATRIX = policy_matrix.load_default()


class Site:
    """A controller, an actuator and a scripted scheduler on our clock (``ours``), and a simulated
    cloud on its own (``true`` + ``offset``)."""

    def __init__(self, *, offset: float = 0.0, max_clock_skew: float = 300.0,
                 boot_grace: float = GRACE) -> None:
        self.true, self.ours = Time(), Time()
        self.cloud = SimCloud(clock=self.true, sizes=SIZES, boot_delay=0.0, clock_offset=offset,
                              local_clock=self.ours)
        self.sched = ScriptedScheduler(self.ours)
        self.settings = Settings(core=CoreSettings(sizes=SIZES, max_nodes=5, boot_grace=boot_grace,
                                                   max_clock_skew=max_clock_skew),
                                 cloud=CloudSettings(cluster="nodemanager"))
        self.actuator = Actuator(self.cloud, self.sched, self.settings, clock=self.ours)
        self.ctl = Controller(self.settings, MATRIX, self.actuator, clock=self.ours,
                              clock_skew=lambda: self.cloud.clock_skew)

    def cycle(self):
        return self.ctl.cycle(self.cloud.list_nodes(), self.ours(), self.sched.poll())

    def advance(self, seconds: float) -> None:
        self.true.advance(seconds)
        self.ours.advance(seconds)

    def boot(self, size: str) -> CloudNode:
        """One VM of ``size`` booted by the controller for a queued job (then the job is gone)."""
        self.sched.demand = [Demand(cpus=1, count=1, size=size)]
        report = self.cycle()
        assert [o.result for o in report.outcomes if o.kind == "boot"] == ["ok"]
        self.sched.demand = []
        [vm] = self.cloud.list_nodes()
        return vm

    def destroyed_after(self, limit: float) -> float | None:
        """Seconds from now until a destroy goes through, cycling every STEP (None: not by limit)."""
        start = self.ours()
        while self.ours() - start <= limit:
            report = self.cycle()
            if any(o.kind == "destroy" and o.result == "ok" for o in report.outcomes):
                return self.ours() - start
            self.advance(STEP)
        return None


def test_cloud_an_hour_ahead_an_unjoined_vm_goes_when_boot_grace_ends():
    """Was: the cloud's launch time, an hour ahead of ours, kept a VM that never joined in
    ``boot wait`` for an hour longer than boot_grace (a paid VM doing nothing)."""
    site = Site(offset=HOUR, max_clock_skew=2 * HOUR)
    vm = site.boot("small")
    assert vm.launched_at == pytest.approx(site.ours() + HOUR)      # the cloud's own clock
    took = site.destroyed_after(2 * HOUR)
    assert took is not None and GRACE <= took <= GRACE + 2 * STEP, took
    assert site.ctl.last_report.snapshot.cloud_clock_skew == pytest.approx(HOUR, abs=1.0)


def test_cloud_an_hour_ahead_the_billing_window_is_counted_from_the_real_launch():
    """Was: the window of an hourly-billed VM opened an hour late (the shutdown window of its
    first paid hour was seen closed: the node was kept into a second paid hour)."""
    site = Site(offset=HOUR, max_clock_skew=2 * HOUR, boot_grace=2 * HOUR)
    site.boot("big")                                # billing_period 1h, shutdown_window 10 min
    launched = site.ours()
    site.advance(HOUR - 300.0)                      # 55 minutes in: the last 10 minutes are open
    [e] = site.cycle().plan.nodes
    assert e.tuple.window == OPEN
    assert e.next_change == pytest.approx(launched + HOUR, abs=1.0)
    site.advance(600.0)                             # 65 minutes in: the second hour is paid
    [e] = site.cycle().plan.nodes
    assert e.tuple.window == CLOSED


def test_cloud_an_hour_ahead_beyond_max_clock_skew_freezes_destroys_and_says_why():
    site = Site(offset=HOUR)                        # max_clock_skew 5 min
    site.boot("small")
    assert site.destroyed_after(GRACE + 4 * STEP) is None
    report = site.ctl.last_report
    [e] = report.plan.nodes
    assert e.tuple.boot_grace == BOOT_EXCEEDED and e.blocked_by == "frozen"
    assert "cloud clock 3600s ahead of ours" in e.reason and "destroys frozen" in e.reason
    doc = status_document(StatusView(report=report), None, site.ours())
    assert "cloud clock 3600s ahead of ours" in doc["frozen"]
    assert doc["cloud_clock_skew"] == pytest.approx(HOUR, abs=1.0)
    assert site.cloud.live_count() == 1
    # boots go on: queued jobs are served (a boot does not depend on any clock)
    site.sched.demand = [Demand(cpus=1, count=1, size="small")]
    assert sum(b.count for b in site.cycle().plan.boots) == 1


def test_our_clock_stepped_back_an_hour_freezes_destroys_and_says_why():
    """Our clock (not the cloud's) steps back an hour: the cloud now looks an hour ahead. Nothing
    is destroyed on times that disagree, the reason is given; once the clock is put right, the
    VM that never joined goes as soon as fresh polls confirm it again (not an hour late)."""
    site = Site()
    site.boot("small")
    site.advance(300.0)
    assert site.cycle().plan.frozen is None
    site.ours.advance(-HOUR)                        # NTP steps our clock back
    for _ in range(int(2 * GRACE / STEP)):
        site.advance(STEP)
        report = site.cycle()
        assert not [o for o in report.outcomes if o.kind == "destroy"]
    assert "cloud clock 3600s ahead of ours" in report.plan.frozen
    site.ours.advance(HOUR)                         # the clock is put right
    # the gap in poll times resets the confirmation of a missing worker (see Controller)
    took = site.destroyed_after(2 * GRACE)
    assert took is not None and took <= GRACE + STEP, took


def _unjoined(now: float, polled: float) -> Snapshot:
    vm = CloudNode(id="i-1", name="vm1", size="small", launched_at=now - 2 * HOUR)
    return Snapshot(now=now, polled_at={"cloud": now, "scheduler": polled}, cloud_nodes=(vm,))


def test_a_poll_stamped_in_the_future_is_stale_not_fresh_for_ever():
    """Was: after our clock stepped back an hour, a poll taken before the step had a negative age
    and counted as fresh for an hour, however long the poller had been stuck since."""
    core = CoreSettings(sizes=SIZES, boot_grace=GRACE)
    now = 2_000_000.0
    assert [i.kind.value for i in plan(_unjoined(now, now - 10.0), core, MATRIX).items] == ["destroy"]
    stepped = plan(_unjoined(now, now + HOUR - 600.0), core, MATRIX)
    assert stepped.items == ()
    assert "scheduler poll is 3000s in the future (our clock stepped back?)" in stepped.frozen
    assert stepped.nodes[0].blocked_by == "stale"
    # within clock_tolerance a poll a little ahead (another host's clock) is fine
    assert plan(_unjoined(now, now + 20.0), core, MATRIX).items != ()


def test_ec2_an_hour_ahead_skew_is_measured_from_the_date_header_and_launch_times_corrected(
        ec2_cloud, ec2_proxy):
    """The real EC2 driver against the local EC2 endpoint, behind a proxy whose Date headers and
    launch times run an hour ahead: the skew is measured and a new VM's boot grace ends
    boot_grace after its real launch (was: an hour later)."""
    from nodemanager.model import Size
    small = Size("small", cores=2, ram_mb=2048, instance_type="t3.small", min_charge=0)
    ec2_proxy.date_offset = HOUR
    cloud = ec2_cloud()
    sched = ScriptedScheduler(time.time)
    settings = Settings(core=CoreSettings(sizes=(small,), max_nodes=2, boot_grace=GRACE,
                                          max_clock_skew=2 * HOUR),
                        cloud=CloudSettings(cluster=cloud.cluster))
    ctl = Controller(settings, MATRIX, Actuator(cloud, sched, settings, clock=time.time),
                     clock=time.time, clock_skew=lambda: cloud.clock_skew)
    sched.demand = [Demand(cpus=1, count=1)]
    booted = time.time()
    ctl.cycle(cloud.list_nodes(), time.time(), sched.poll())
    sched.demand = []
    [vm] = cloud.list_nodes()
    assert vm.launched_at > booted + HOUR - 5                       # as the cloud says
    assert cloud.clock_skew == pytest.approx(HOUR, abs=3.0)
    report = ctl.cycle(cloud.list_nodes(), time.time(), sched.poll())
    [e] = report.plan.nodes
    assert e.next_change == pytest.approx(booted + GRACE, abs=5.0)  # boot grace ends
    assert report.snapshot.cloud_clock_skew == pytest.approx(HOUR, abs=3.0)
    cloud.destroy_node(vm)


def test_skew_and_the_freeze_are_exported_as_metrics():
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from nodemanager.console.metrics import Metrics
    site = Site(offset=HOUR)
    site.boot("small")
    metrics = Metrics(sizes=SIZES, clock=site.ours)
    metrics.observe(site.cycle())
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(generate_latest(metrics.registry).decode())
               for s in fam.samples}
    assert samples[("nodemanager_cloud_clock_skew_seconds", ())] == pytest.approx(HOUR, abs=1.0)
    assert samples[("nodemanager_actions_frozen", (("reason", "clock_skew"),))] == 1


def test_a_launch_time_in_the_future_is_not_believed_even_without_a_measured_skew():
    """A cloud whose Date is unknown (or right) but whose launch times run ahead: the launch time
    is our boot request's time; a node we did not boot keeps the time this process first saw it."""
    from nodemanager.cloud.port import TAG_REQUEST
    from nodemanager.cycle.controller_inputs import InputMemory
    from nodemanager.scheduler.port import SchedulerPoll
    now = 2_000_000.0
    ours = CloudNode(id="i-1", name="vm1", size="small", launched_at=now + HOUR,
                     tags={TAG_REQUEST: f"r1.{int(now - 40)}"})
    foreign = CloudNode(id="i-2", name="vm2", size="small", launched_at=now + HOUR)
    mem = InputMemory()
    got = {n.id: n.launched_at for n in mem.nodes([ours, foreign], now, SchedulerPoll((), (), now))}
    assert got == {"i-1": now - 40, "i-2": now}
    later = now + 300.0
    got = {n.id: n.launched_at for n in mem.nodes([ours, foreign], later, SchedulerPoll((), (), later))}
    assert got == {"i-1": now - 40, "i-2": now}


def test_snapshot_json_carries_the_skew_and_the_plan_freezes_on_it():
    from nodemanager.snapshot import dumps, loads
    snap = Snapshot(now=2_000_000.0, polled_at={"cloud": 2_000_000.0, "scheduler": 2_000_000.0},
                    cloud_nodes=(CloudNode(id="i-1", name="vm1", size="small",
                                           launched_at=2_000_000.0 - 2 * HOUR),),
                    cloud_clock_skew=-HOUR)
    again = loads(dumps(snap))
    assert again.cloud_clock_skew == -HOUR
    p = plan(again, CoreSettings(sizes=SIZES, boot_grace=GRACE), MATRIX)
    assert p.items == () and p.frozen.startswith("cloud clock 3600s behind ours")
