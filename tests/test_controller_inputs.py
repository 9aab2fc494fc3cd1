"""One bad poll is not believed: partial listings, lost ads, skewed clocks and stale drain tags."""

from dataclasses import replace

from nodemanager.cycle.actuate import Actuator, Task
from nodemanager.cloud.port import TAG_DRAIN, TAG_REQUEST
from nodemanager.cycle.controller_inputs import MISSING_LISTINGS, MISSING_SECONDS, InputMemory, build_in_flight, requested_at
from nodemanager.model import CloudNode, ItemKind, PlanItem, Worker
from nodemanager.scheduler.port import DRAIN_REASON_PREFIX, SchedulerPoll
from nodemanager.sim.cloud import SimCloud
from tests.fixtures.daemon import SIZES, sim_settings
from tests.test_controller import Loop


def node(i, **kw):
    return CloudNode(id=f"n{i}", name=f"h{i}", size="small", launched_at=100.0, hostname=f"h{i}", **kw)


def poll(t, *workers):
    return SchedulerPoll(workers=tuple(workers), demand=(), polled_at=t)


def test_node_missing_from_a_listing_is_kept_for_a_while_or_while_its_worker_lives():
    mem = InputMemory()
    a, b = node(1), node(2)
    assert mem.nodes([a, b], 110.0, poll(110.0)) == [a, b]
    for i in range(1, MISSING_LISTINGS + 1):                  # missed several times, but briefly
        assert [n.id for n in mem.nodes([a], 110.0 + i, poll(110.0 + i))] == ["n1", "n2"]
    # missed for MISSING_SECONDS too (counted from the first miss): believed gone now
    gone_at = 111.0 + MISSING_SECONDS
    assert [n.id for n in mem.nodes([a], gone_at, poll(gone_at))] == ["n1"]
    # a node whose worker the scheduler still reports stays however long the listing lacks it
    mem = InputMemory()
    mem.nodes([a, b], 110.0, poll(110.0))
    w = Worker(name="h2", scheduler="x", cloud_id="n2")
    for i in range(1, 10):
        assert [n.id for n in mem.nodes([a], 110.0 + i, poll(110.0 + i, w))] == ["n1", "n2"]
    # ...but never one we destroyed
    mem.destroyed["n1"] = 119.5
    assert [n.id for n in mem.nodes([], 121.0, poll(121.0, w))] == ["n2"]


def test_a_node_the_listing_shows_terminated_is_gone_at_once_not_kept_as_missing():
    """A spot VM the cloud took back is listed ``terminated`` (EC2 keeps it listed for a while):
    its boot or its capacity is not counted for another MISSING_SECONDS, and the memory says
    it carries nothing a later cycle would drop."""
    mem = InputMemory()
    a, b = node(1), node(2, state="pending")
    mem.nodes([a, b], 110.0, poll(110.0))
    assert [n.id for n in mem.nodes([a, replace(b, state="terminated")], 111.0, poll(111.0))] == ["n1"]
    assert not mem.carrying()
    # a node merely absent is carried, and the memory says so until it lets it go
    mem.nodes([a, b], 112.0, poll(112.0))
    assert [n.id for n in mem.nodes([b], 113.0, poll(113.0))] == ["n2", "n1"]
    assert mem.carrying()
    gone_at = 113.0 + MISSING_SECONDS
    for t in (114.0, 115.0, gone_at):
        mem.nodes([b], t, poll(t))
    assert not mem.carrying()


def test_worker_missing_from_a_poll_is_kept_until_node_stale_after():
    mem = InputMemory()
    n1 = node(1)
    w = Worker(name="h1", scheduler="x", cloud_id="n1", last_heard=10.0, running_jobs=2, cpus_busy=2)
    assert mem.poll(poll(10.0, w), [n1], 600.0).workers == (w,)
    assert mem.poll(poll(300.0), [n1], 600.0).workers == (w,)                  # a blank poll
    assert mem.poll(poll(611.0), [n1], 600.0).workers == ()                     # stale: let it go
    mem.poll(poll(620.0, w), [n1], 600.0)
    assert mem.poll(poll(630.0), [], 600.0).workers == ()                       # node gone: no carry


def test_launch_time_is_never_before_the_boot_request():
    assert requested_at("abc.1000") == 1000.0 and requested_at("abc") is None and requested_at(None) is None
    mem = InputMemory()
    skewed = node(1, tags={TAG_REQUEST: "r1.1000"})
    [fixed] = mem.nodes([skewed], 1005.0, poll(1005.0))
    assert fixed.launched_at == 1000.0
    fine = node(2, tags={TAG_REQUEST: "r2.50"})
    assert mem.nodes([fine], 1010.0, poll(1010.0))[0].launched_at == 100.0


def test_drain_tag_that_outlived_its_drain_is_ignored_after_the_grace():
    tagged = node(1, tags={TAG_DRAIN: "1000:7"})
    idle = Worker(name="h1", scheduler="x", cloud_id="n1")
    draining = replace(idle, draining=True, drain_reason=f"{DRAIN_REASON_PREFIX} 1000 x", drain_request_id="7")
    assert [f.action for f in build_in_flight([tagged], poll(1050.0, idle))] == ["drain"]     # too soon
    assert [f.action for f in build_in_flight([tagged], poll(1500.0, draining))] == ["drain"]
    assert build_in_flight([tagged], poll(1500.0, idle)) == ()                                # ended
    assert [f.action for f in build_in_flight([tagged], poll(1500.0))] == ["drain"]           # worker lost


def test_partial_listings_do_not_boot_past_max_nodes():
    settings = sim_settings(burst_size="24", job_runtime="900s")
    settings = replace(settings, core=replace(settings.core, max_nodes=3))
    loop = Loop(settings)
    loop.run(60)                                             # 3 nodes (the cap) running, jobs queued
    assert loop.world.sim_cloud.calls["create_node"] == 3
    real = loop.world.cloud.list_nodes
    loop.world.cloud.list_nodes = lambda: real()[1:]        # a page of the listing goes missing
    loop.run(10)
    del loop.world.cloud.list_nodes
    loop.run(60)
    assert loop.world.sim_cloud.calls["create_node"] == 3
    assert loop.world.pool.stats.killed == 0


def test_skewed_scheduler_clock_does_not_make_busy_workers_lost(time_now, nm_settings, scripted_scheduler):
    cloud = SimCloud(clock=time_now, sizes=SIZES, boot_delay=0.0)
    act = Actuator(cloud, scripted_scheduler, nm_settings, clock=time_now)
    vm = cloud.create_node(SIZES[0], "w1", {})
    w = replace(scripted_scheduler.add("w1", vm.id, running_jobs=1), last_heard=time_now.now - 660)
    act.observe_poll(poll(time_now.now, w))                  # every ad 11 minutes "old"
    item = PlanItem(kind=ItemKind.DESTROY, node_id=vm.id, node_name="w1", reason="down?", worker="w1",
                    cancellable=False)
    [out] = act.run(Task(item, vm, w))
    assert out.result == "refused" and cloud.live_count() == 1


def test_terminated_nodes_are_left_out_of_the_snapshot():
    mem = InputMemory()
    live, dead = node(1), node(2, state="terminated")
    assert mem.nodes([live, dead], 110.0, poll(110.0)) == [live]
    assert mem.nodes([live], 120.0, poll(120.0)) == [live]        # and a gone node is never carried
