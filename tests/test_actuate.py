"""The actuator against the simulated cloud and a scripted scheduler: what an operator would see
happen to nodes (or refused), with plans built by hand."""

import dataclasses

from nodemanager.cycle.actuate import BOOT_LISTING_TIMEOUT, Actuator, Task
from nodemanager.cycle.actuator_memory import NAME_QUARANTINE
from nodemanager.cycle.drain_tickets import drain_tag, parse_drain_tag, ticket_for
from nodemanager.cloud.port import TAG_DESTROY, TAG_DRAIN, TAG_REQUEST, CloudError, ErrorKind
from nodemanager.model import BootRequest, ItemKind, PlanItem
from nodemanager.scheduler.port import DrainTicket, SchedulerError
from nodemanager.sim.cloud import SimCloud
from tests.fixtures.daemon import SIZES

SMALL = SIZES[0]


def setup(time_now, settings, sched, **cloud_kw):
    cloud = SimCloud(clock=time_now, sizes=SIZES, cluster="testcluster", boot_delay=0.0, **cloud_kw)
    ids = iter(f"req{i}" for i in range(1000))
    act = Actuator(cloud, sched, settings, clock=time_now, request_ids=lambda: next(ids))
    return cloud, act


def running_node(cloud, sched, name="w1", jobs=0):
    node = cloud.create_node(SMALL, name, {})
    sched.add(name, node.id, running_jobs=jobs)
    return cloud.node(node.id)


def item(kind, node, worker="w1", cancellable=True, schedule=None):
    return PlanItem(kind=kind, node_id=node.id, node_name=node.name, reason="test", worker=worker,
                    cancellable=cancellable, schedule=schedule)


def test_boot_tags_nodes_with_cluster_size_and_request(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    outs = act.run(Task(BootRequest("small", 2, "3 jobs queued")))
    assert [o.result for o in outs] == ["ok", "ok"]
    nodes = cloud.list_nodes()
    assert sorted(n.tags[TAG_REQUEST] for n in nodes) == ["req0.1000000", "req1.1000000"]  # id.request time
    assert all(n.tags["nodemanager-cluster"] == "testcluster" and n.size == "small" for n in nodes)
    assert len(act.state().in_flight) == 2        # requested, not listed yet
    act.observe_listing(nodes)
    assert act.state().in_flight == ()


def test_create_that_raised_but_node_listed_is_a_success(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    cloud.create_fails_but_creates()
    [out] = act.run(Task(BootRequest("small", 1, "demand")))
    assert out.result == "failed"
    [flight] = act.state().in_flight
    assert flight.action == "boot" and flight.size == "small"
    settled = act.observe_listing(cloud.list_nodes())
    assert [(o.kind, o.result) for o in settled] == [("boot", "ok")]
    assert "raised but the node is listed" in settled[0].detail
    assert act.state().in_flight == ()


def test_boot_never_listed_is_given_up(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    cloud.fail_next("create_node", CloudError(ErrorKind.TRANSIENT, "timeout"))
    act.run(Task(BootRequest("small", 1, "demand")))
    time_now.advance(BOOT_LISTING_TIMEOUT + 1)
    settled = act.observe_listing([])
    assert [(o.kind, o.result) for o in settled] == [("boot", "failed")]
    assert act.state().in_flight == ()


def test_quota_error_learns_quota_and_blocks_size(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler, quotas={"small": 2})
    outs = act.run(Task(BootRequest("small", 5, "demand")))
    assert [o.result for o in outs] == ["ok", "ok", "failed"]
    assert "quota" in outs[-1].detail
    act.observe_listing(cloud.list_nodes())
    state = act.state()
    assert state.quota == 2 and state.blocked_sizes == frozenset({"small"})
    [skip] = act.run(Task(BootRequest("small", 1, "demand")))
    assert skip.result == "skipped" and cloud.calls["create_node"] == 3
    time_now.advance(nm_settings.cloud.quota_backoff + 1)
    assert act.state().blocked_sizes == frozenset() and act.state().quota is None


def test_rate_limit_honours_retry_after(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    cloud.fail_next("create_node", CloudError(ErrorKind.RATE_LIMIT, "throttled", retry_after=42))
    [out] = act.run(Task(BootRequest("small", 1, "demand")))
    assert out.result == "failed" and "42s" in out.detail
    time_now.advance(41)
    [out] = act.run(Task(BootRequest("small", 1, "demand")))
    assert out.result == "skipped" and "rate limit" in out.detail
    time_now.advance(2)
    [out] = act.run(Task(BootRequest("small", 1, "demand")))
    assert out.result == "ok"


def test_transient_errors_back_off_exponentially_up_to_the_cap(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    waits = []
    for _ in range(8):
        cloud.fail_next("create_node", CloudError(ErrorKind.TRANSIENT, "503"))
        [out] = act.run(Task(BootRequest("small", 1, "demand")))
        assert out.result == "failed"
        waits.append(float(out.detail.rsplit("retry in ", 1)[1].rstrip("s")))
        [skip] = act.run(Task(BootRequest("small", 1, "demand")))
        assert skip.result == "skipped"
        time_now.advance(waits[-1])
    assert waits == [10, 20, 40, 80, 160, 300, 300, 300]


def test_drain_records_tag_and_destroy_confirms_first(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = running_node(cloud, scripted_scheduler)
    [out] = act.run(Task(item(ItemKind.DRAIN, node), node, scripted_scheduler.workers["w1"]))
    assert out.result == "ok"
    tagged = cloud.node(node.id)
    assert parse_drain_tag(tagged.tags[TAG_DRAIN]) == (1_000_000.0, "1", 1000.0)
    # a job sneaks in: the confirmation refuses and nothing is destroyed
    scripted_scheduler.set_jobs("w1", 1)
    [out] = act.run(Task(item(ItemKind.DESTROY, tagged), tagged, scripted_scheduler.workers["w1"]))
    assert out.result == "refused" and "still runs" in out.detail
    assert cloud.node(node.id).state != "terminated" and not cloud.node(node.id).tags.get(TAG_DESTROY)
    scripted_scheduler.set_jobs("w1", 0)
    [out] = act.run(Task(item(ItemKind.DESTROY, tagged), tagged, scripted_scheduler.workers["w1"]))
    assert out.result == "ok"
    assert cloud.node(node.id).state == "terminated"
    assert scripted_scheduler.destroyed == ["w1"]
    calls = [c for c, _ in scripted_scheduler.calls]
    assert calls.index("confirm_drained") < calls.index("node_destroyed")
    assert act.state().recent_destroys == (time_now.now,)


def test_destroy_without_our_drain_is_refused(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = running_node(cloud, scripted_scheduler)
    [out] = act.run(Task(item(ItemKind.DESTROY, node), node, scripted_scheduler.workers["w1"]))
    assert out.result == "refused"
    assert cloud.live_count() == 1


def test_noncancellable_destroy_rechecks_latest_poll(time_now, nm_settings, scripted_scheduler):
    cloud = SimCloud(clock=time_now, sizes=SIZES, boot_delay=0.0)
    act = Actuator(cloud, scripted_scheduler, nm_settings, clock=time_now,
                   latest_worker=scripted_scheduler.workers.get)
    node = running_node(cloud, scripted_scheduler)
    stale_worker = scripted_scheduler.workers["w1"]
    scripted_scheduler.set_jobs("w1", 2)      # the latest poll sees jobs; the plan's snapshot did not
    [out] = act.run(Task(item(ItemKind.DESTROY, node, cancellable=False), node, stale_worker))
    assert out.result == "refused" and "2 job(s)" in out.detail
    scripted_scheduler.set_jobs("w1", 0)
    [out] = act.run(Task(item(ItemKind.DESTROY, node, cancellable=False), node, stale_worker))
    assert out.result == "ok" and cloud.live_count() == 0
    assert out.launched_at == node.launched_at          # for the late-give-back metric


def test_destroy_marks_tag_before_the_call_and_settles_by_listing(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = cloud.create_node(SMALL, "orphan", {})
    cloud.fail_next("destroy_node", CloudError(ErrorKind.TRANSIENT, "timeout"))
    [out] = act.run(Task(item(ItemKind.DESTROY, node, worker=None, cancellable=False), node, None))
    assert out.result == "failed"
    assert cloud.node(node.id).tags.get(TAG_DESTROY) == str(int(time_now.now))
    # the next attempt (a resumed destroy) needs no new confirmation and succeeds
    time_now.advance(11)
    resumed = cloud.node(node.id)
    [out] = act.run(Task(item(ItemKind.DESTROY, resumed, worker=None, cancellable=False), resumed, None))
    assert out.result == "ok" and "started before" in out.detail
    assert act.observe_listing(cloud.list_nodes()) == []


def test_destroy_of_gone_node_is_success(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = cloud.create_node(SMALL, "x", {})
    cloud.fail_next("destroy_node", CloudError(ErrorKind.NOT_FOUND, "gone"))
    [out] = act.run(Task(item(ItemKind.DESTROY, node, worker=None, cancellable=False), node, None))
    assert out.result == "ok"


def test_cancel_drain_resumes_worker_and_clears_tag(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = running_node(cloud, scripted_scheduler)
    act.run(Task(item(ItemKind.DRAIN, node), node, scripted_scheduler.workers["w1"]))
    tagged = cloud.node(node.id)
    [out] = act.run(Task(item(ItemKind.CANCEL_DRAIN, tagged), tagged, scripted_scheduler.workers["w1"]))
    assert out.result == "ok"
    assert not scripted_scheduler.workers["w1"].draining
    assert TAG_DRAIN not in cloud.node(node.id).tags


def test_drain_refused_and_scheduler_failure(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = running_node(cloud, scripted_scheduler)
    snapshot_worker = scripted_scheduler.workers["w1"]
    scripted_scheduler.set_jobs("w1", 1)
    [out] = act.run(Task(item(ItemKind.DRAIN, node), node, snapshot_worker))
    assert out.result == "refused" and TAG_DRAIN not in cloud.node(node.id).tags
    scripted_scheduler.set_jobs("w1", 0)
    scripted_scheduler.fail["drain"] = [SchedulerError("collector unreachable")]
    [out] = act.run(Task(item(ItemKind.DRAIN, node), node, snapshot_worker))
    assert out.result == "failed" and "retry in 10s" in out.detail


def test_a_drain_refused_again_backs_off_and_a_single_refusal_does_not(time_now, nm_settings, scripted_scheduler):
    """A node that took a job after our look is refused once, and the next cycle's drain goes
    through; a scheduler that refuses every drain (no ADMINISTRATOR at the startd) is asked again
    after a doubling backoff, not every cycle."""
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = running_node(cloud, scripted_scheduler)
    snapshot = scripted_scheduler.workers["w1"]
    scripted_scheduler.set_jobs("w1", 1)
    [out] = act.run(Task(item(ItemKind.DRAIN, node), node, snapshot))
    assert out.result == "refused" and "next try" not in out.detail
    scripted_scheduler.set_jobs("w1", 0)
    time_now.advance(5)
    [out] = act.run(Task(item(ItemKind.DRAIN, node), node, scripted_scheduler.workers["w1"]))
    assert out.result == "ok"

    other = running_node(cloud, scripted_scheduler, name="w2")
    snapshot = scripted_scheduler.workers["w2"]
    scripted_scheduler.set_jobs("w2", 1)                 # every drain decided on this look is refused
    asked = []
    for _ in range(240):                                 # 20 minutes of 5-second cycles
        [out] = act.run(Task(item(ItemKind.DRAIN, other, worker="w2"), other, snapshot))
        if out.result == "refused":
            asked.append(time_now())
        time_now.advance(5)
    assert 8 <= len(asked) <= 12, len(asked)             # was 240: every cycle
    assert asked[1] - asked[0] == 5 and 300 <= asked[-1] - asked[-2] <= 305


def test_escalate_uses_ticket_from_tag(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = running_node(cloud, scripted_scheduler)
    act.run(Task(item(ItemKind.DRAIN, node), node, scripted_scheduler.workers["w1"]))
    tagged = cloud.node(node.id)
    [out] = act.run(Task(item(ItemKind.ESCALATE, tagged, schedule="fast"), tagged,
                         scripted_scheduler.workers["w1"]))
    assert out.result == "ok" and "fast" in out.detail
    assert ("escalate", "w1") in scripted_scheduler.calls


def test_drain_tag_round_trip_with_awkward_request_ids():
    t = DrainTicket(worker="w", request_id="a:b%c", reason="nodemanager", started_at=12.7, daemon_start=None)
    assert parse_drain_tag(drain_tag(t)) == (12.0, "a:b%c", None)
    assert parse_drain_tag("garbage") is None and parse_drain_tag("1:2:3:4") is None
    assert ticket_for(None, None, "w") is None


def test_destroy_that_raised_but_happened_is_settled_by_the_listing(time_now, nm_settings, scripted_scheduler):
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = cloud.create_node(SMALL, "x", {})
    cloud.fail_next("destroy_node", CloudError(ErrorKind.TRANSIENT, "502 bad gateway"))
    [out] = act.run(Task(item(ItemKind.DESTROY, node, worker=None, cancellable=False), node, None))
    assert out.result == "failed"
    assert act.observe_listing(cloud.list_nodes()) == []      # still listed: not settled
    cloud.destroy_node(cloud.node(node.id))                   # the cloud finished it after all
    [settled] = act.observe_listing(cloud.list_nodes())
    assert (settled.kind, settled.node, settled.result) == ("destroy", node.id, "ok")
    assert len(act.state().recent_destroys) == 1


def test_new_nodes_take_the_lowest_free_name(time_now, nm_settings, scripted_scheduler):
    """Names stay within a fixed set, so a SLURM slurm.conf can declare them in advance; a name
    is reused only once no listing has shown it for NAME_QUARANTINE (a listing may miss a VM),
    and a freshly started actuator numbers above every name it has seen (it may have forgotten
    boots of the process before it that are not listed yet)."""
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    template = nm_settings.cloud.node_name_template
    name = lambda seq: template.format(cluster=nm_settings.cloud.cluster, size="small", seq=seq)
    live = lambda: sorted(n.name for n in cloud.list_nodes() if n.state != "terminated")
    act.run(Task(BootRequest("small", 3, "jobs queued")))
    assert live() == [name(1), name(2), name(3)]
    act.observe_listing(cloud.list_nodes())
    cloud.destroy_node(next(n for n in cloud.list_nodes() if n.name == name(2)))
    act.observe_listing(cloud.list_nodes())
    act.run(Task(BootRequest("small", 1, "more jobs")))     # just started: above every name seen
    assert live() == [name(1), name(3), name(4)]
    time_now.advance(NAME_QUARANTINE + 1)
    act.observe_listing(cloud.list_nodes())                  # name 2 not listed for the quarantine
    act.run(Task(BootRequest("small", 2, "more jobs")))
    assert live() == [name(1), name(2), name(3), name(4), name(5)]


def test_a_destroyed_node_still_in_a_late_listing_is_not_destroyed_twice(time_now, nm_settings,
                                                                         scripted_scheduler):
    """A listing taken while the destroy was under way still shows the node with its destroy tag;
    the next plan says "finish the destroy", and the actuator must not call the cloud again."""
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    node = running_node(cloud, scripted_scheduler)
    stale = cloud.node(node.id)
    first = act.run(Task(item(ItemKind.DESTROY, node, worker=None, cancellable=False), node, None))
    assert [o.result for o in first] == ["ok"]
    tagged = stale.__class__(**{**{f: getattr(stale, f) for f in stale.__slots__},
                                "tags": {**stale.tags, TAG_DESTROY: "1"}})
    again = act.run(Task(item(ItemKind.DESTROY, tagged, worker=None, cancellable=False), tagged, None))
    assert [o.result for o in again] == ["skipped"] and "waiting for the listing" in again[0].detail
    assert cloud.calls.get("destroy_node", 0) == 1


def test_boot_names_skip_the_workers_of_the_latest_poll(time_now, nm_settings, scripted_scheduler):
    """A worker the scheduler still hears from holds its name; what the actuator reads of a poll
    is worked out when a boot needs it, from the poll observed last (not one before it)."""
    from nodemanager.model import Worker
    from nodemanager.scheduler.port import SchedulerPoll

    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    template = nm_settings.cloud.node_name_template
    name = lambda seq: template.format(cluster=nm_settings.cloud.cluster, size="small", seq=seq)
    time_now.advance(NAME_QUARANTINE + 1)
    heard = lambda *seqs: SchedulerPoll(workers=tuple(
        Worker(name=name(s), scheduler="x", last_heard=time_now.now) for s in seqs), demand=(),
        polled_at=time_now.now)
    act.observe_poll(heard(1))
    act.run(Task(BootRequest("small", 1, "jobs queued")))
    act.observe_poll(heard(3))                               # name 1's worker is gone: its name is free
    act.run(Task(BootRequest("small", 1, "jobs queued")))
    assert sorted(n.name for n in cloud.list_nodes()) == [name(1), name(2)]
    act.observe_poll(heard(1, 3))
    act.observe_poll(heard(4))
    act.run(Task(BootRequest("small", 1, "jobs queued")))
    assert sorted(n.name for n in cloud.list_nodes()) == [name(1), name(2), name(3)]


def test_a_listing_of_as_many_nodes_but_another_one_is_read_afresh(time_now, nm_settings, scripted_scheduler):
    """The actuator keeps what it read of a listing while the next lists the very same node
    objects; one that differs in a node (not in length) settles the boot it shows, and names
    listed again and again stay held while a name no longer listed is freed after the quarantine."""
    cloud, act = setup(time_now, nm_settings, scripted_scheduler)
    template = nm_settings.cloud.node_name_template
    name = lambda seq: template.format(cluster=nm_settings.cloud.cluster, size="small", seq=seq)
    other = running_node(cloud, scripted_scheduler, name="w1")
    act.run(Task(BootRequest("small", 1, "jobs queued")))
    booted = next(n for n in cloud.list_nodes() if n.id != other.id)
    before = [other, dataclasses.replace(booted, id="i-elsewhere", tags={}, name=name(2))]
    for _ in range(3):
        act.observe_listing(list(before))
        assert [f.action for f in act.state().in_flight] == ["boot"]
    act.observe_listing([other, booted])                     # as many nodes, one of them new
    assert act.state().in_flight == ()
    for _ in range(int(NAME_QUARANTINE // 60) + 2):          # listed every minute past the quarantine
        time_now.advance(60.0)
        act.observe_listing([other, booted])
    act.run(Task(BootRequest("small", 1, "jobs queued")))   # name 2 was freed; name 1 is still listed
    assert sorted(n.name for n in cloud.list_nodes()) == sorted(["w1", name(1), name(2)])
