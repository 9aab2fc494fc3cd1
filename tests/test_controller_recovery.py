"""Restart recovery: a controller stopped mid-way (all in-memory state dropped) and a new one
started on the same cloud and pool picks up where the old one was."""

from nodemanager.cloud.port import TAG_DESTROY, TAG_DRAIN, CloudError, ErrorKind
from tests.fixtures.daemon import Time, sim_settings
from tests.test_controller import Loop


def restart(loop: Loop) -> Loop:
    """A new actuator and controller (empty memory) on the same world and clock."""
    return Loop(loop.settings, world=loop.world, time=loop.time)


def test_restart_in_the_middle_of_boots_drains_and_destroys():
    time = Time()
    first = Loop(sim_settings(), time=time)
    world = first.world
    first.cycle()                                    # boots requested, nodes still pending
    booted = world.sim_cloud.calls["create_node"]
    assert booted == 3 and all(n.state == "pending" for n in world.cloud.list_nodes())

    # 1. restart while boots are in flight: the listing's request tags show them; no second boot
    second = restart(first)
    for _ in range(3):
        time.advance(5)
        second.cycle()
    assert world.sim_cloud.calls["create_node"] == booted

    # 2. run until a drain of ours is under way, then restart: the drain is not forgotten
    for _ in range(200):
        time.advance(5)
        report = second.cycle()
        if any(o.kind == "drain" and o.result == "ok" for o in report.outcomes):
            break
    drained = [n for n in world.cloud.list_nodes() if n.tags.get(TAG_DRAIN)]
    assert drained, "no drain was started"
    third = restart(second)
    time.advance(5)
    report = third.cycle()
    flights = {(f.node, f.action) for f in report.snapshot.in_flight}
    assert {(n.id, "drain") for n in drained} <= flights

    # 3. a destroy whose call failed after TAG_DESTROY was written, then a restart: finished
    world.sim_cloud.fail_next("destroy_node", CloudError(ErrorKind.TRANSIENT, "connection reset"), count=10)
    for _ in range(100):
        time.advance(5)
        third.cycle()
        if any(n.tags.get(TAG_DESTROY) for n in world.cloud.list_nodes()):
            break
    half_done = [n.id for n in world.cloud.list_nodes() if n.tags.get(TAG_DESTROY)]
    assert half_done
    world.sim_cloud._faults.clear()
    fourth = restart(third)
    time.advance(5)
    report = fourth.cycle()
    assert {o.node for o in report.outcomes if o.kind == "destroy" and o.result == "ok"} >= set(half_done)

    # 4. nothing is left that nobody reaps, and no job was killed on the way
    fourth.run(900)
    assert world.sim_cloud.live_count() == 0
    assert world.pool.stats.completed == 12 and world.pool.stats.killed == 0
    assert world.sim_cloud.calls["create_node"] == booted


def test_boot_requested_but_not_yet_listed_when_restarted_is_still_reaped():
    """The cloud made the VM but the controller died before any listing showed it: the next
    controller finds it by the cluster tag, uses it for the demand and reaps it when idle."""
    time = Time()
    first = Loop(sim_settings(), time=time)
    world = first.world
    world.sim_cloud.create_fails_but_creates(1)
    first.cycle()
    assert world.sim_cloud.live_count() == 1
    second = restart(first)
    second.run(900)
    assert world.sim_cloud.live_count() == 0
    assert world.pool.stats.completed == 12
