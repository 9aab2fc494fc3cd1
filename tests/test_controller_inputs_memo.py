"""The input memory reuses what it worked out for a listed node object it saw before (launch time
on our clock, whether it carries an action tag): the answers are those of a memory that sees every
node as a new object, and change when the node, the clock skew or the tolerance does."""

from dataclasses import replace

from hypothesis import given, settings, strategies as st

import nodemanager.cycle.controller_inputs as ci
from nodemanager.cloud.port import TAG_DESTROY, TAG_DRAIN, TAG_REQUEST
from nodemanager.cycle.controller_inputs import InputMemory, build_in_flight
from nodemanager.model import CloudNode, Worker
from nodemanager.scheduler.port import DRAIN_REASON_PREFIX, SchedulerPoll


def node(i, launched_at=100.0, **kw):
    return CloudNode(id=f"n{i}", name=f"h{i}", size="small", launched_at=launched_at, hostname=f"h{i}", **kw)


def poll(t, *workers):
    return SchedulerPoll(workers=tuple(workers), demand=(), polled_at=t)


_TAGS = [{}, {TAG_REQUEST: "r.1000"}, {TAG_REQUEST: "r.5000"}, {TAG_DRAIN: "900:7"},
         {TAG_DESTROY: "950"}, {TAG_DESTROY: "x"}, {TAG_DRAIN: "900:7", TAG_REQUEST: "r.800"}]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_warm_memory_answers_as_one_that_sees_only_new_objects(data):
    """Many cycles of a changing world (nodes re-listed, re-tagged, relaunched, terminated,
    missing; the skew, the tolerance and our clock moving, also back): a memory given the same
    objects again answers exactly as one given fresh copies every time."""
    warm, cold = InputMemory(), InputMemory()
    slots = {i: node(i) for i in range(6)}
    t, skew, tolerance = 1000.0, None, 30.0
    listing: list[CloudNode] = []
    for _ in range(data.draw(st.integers(5, 40), label="cycles")):
        t += data.draw(st.sampled_from([0.0, 5.0, 10.0, 200.0, 4000.0, -60.0]), label="dt")
        if data.draw(st.integers(0, 9)) == 0:
            skew = data.draw(st.sampled_from([None, 0.0, 20.0, 45.0, -400.0]), label="skew")
        if data.draw(st.integers(0, 14)) == 0:
            tolerance = data.draw(st.sampled_from([10.0, 30.0]), label="tolerance")
        repeat = data.draw(st.integers(0, 2), label="repeat") == 0    # the last listing again, as is
        listing = list(listing) if repeat else []
        for i, n in ({} if repeat else slots).items():
            op = data.draw(st.sampled_from(["same"] * 5 + ["absent", "copy", "tags", "launch", "state"]))
            if op == "absent":
                continue
            if op == "copy":
                n = replace(n)
            elif op == "tags":
                n = replace(n, tags=data.draw(st.sampled_from(_TAGS)))
            elif op == "launch":
                n = replace(n, launched_at=data.draw(st.sampled_from([100.0, 990.0, t + 5.0, t + 500.0])))
            elif op == "state":
                n = replace(n, state=data.draw(st.sampled_from(["running", "pending", "terminated"])))
            slots[i] = n
            listing.append(n)
        ours = "nodemanager: x"
        workers = [Worker(name=f"h{i}", scheduler="x", cloud_id=f"n{i}", draining=i % 2 == 0,
                          drain_reason=ours if i % 4 == 0 else "admin" if i % 2 == 0 else None)
                   for i in data.draw(st.sets(st.integers(0, 5), max_size=3), label="workers")]
        p = poll(t, *workers)
        got = warm.nodes(listing, t, p, skew, tolerance)
        want = cold.nodes([replace(n) for n in listing], t, p, skew, tolerance)
        assert got == want
        assert warm.carrying() == cold.carrying()
        assert warm.ids(got) == frozenset(n.id for n in want)
        assert build_in_flight(warm.action_tagged(got), p) == build_in_flight(want, p)


def test_the_launch_time_of_a_node_follows_its_tag_skew_and_clock():
    """What a memoised launch time depends on changes it: a node re-listed with another request
    tag or launch time, a new clock skew or tolerance, and a launch time in the future, which is
    taken afresh on every listing until it is believable."""
    mem = InputMemory()
    a = node(1, tags={TAG_REQUEST: "r1.1000"}, launched_at=990.0)
    assert mem.nodes([a], 1005.0, poll(1005.0))[0].launched_at == 1000.0       # raised to the request
    assert mem.nodes([a], 1010.0, poll(1010.0))[0].launched_at == 1000.0       # the same object
    b = replace(a, tags={TAG_REQUEST: "r1.1003"})                               # re-tagged: a new object
    assert mem.nodes([b], 1015.0, poll(1015.0))[0].launched_at == 1003.0
    c = replace(b, launched_at=1007.0)
    assert mem.nodes([c], 1020.0, poll(1020.0))[0].launched_at == 1007.0
    assert mem.nodes([c], 1025.0, poll(1025.0), skew=60.0)[0].launched_at == 1003.0   # 947 < request
    assert mem.nodes([c], 1100.0, poll(1100.0), skew=-60.0)[0].launched_at == 1067.0
    assert mem.nodes([c], 1105.0, poll(1105.0), skew=-60.0, tolerance=90.0)[0].launched_at == 1007.0
    # a launch time ahead of our clock is not believed, however often the same object is listed...
    ahead = node(2, launched_at=2000.0)
    mem = InputMemory()
    assert mem.nodes([ahead], 1000.0, poll(1000.0))[0].launched_at == 1000.0
    assert mem.nodes([ahead], 1500.0, poll(1500.0))[0].launched_at == 1000.0
    # ...until our clock reaches it
    assert mem.nodes([ahead], 1990.0, poll(1990.0))[0].launched_at == 2000.0


def test_an_unchanged_listing_takes_no_launch_time_again(monkeypatch):
    """The controller's cost of a listing grows with what changed: nodes listed as the same
    objects are not taken afresh (one launch time per changed node, not one per node per cycle)."""
    calls = []
    real = ci.launch_time
    monkeypatch.setattr(ci, "launch_time", lambda *a: calls.append(a[0]) or real(*a))
    mem = InputMemory()
    listing = [node(i) for i in range(50)]
    mem.nodes(listing, 1000.0, poll(1000.0))
    calls.clear()
    for k in range(1, 20):
        mem.nodes(listing, 1000.0 + 10 * k, poll(1000.0 + 10 * k))
    assert calls == []
    listing[7] = replace(listing[7], tags={TAG_DRAIN: "1100:3"})
    [drain] = build_in_flight(mem.action_tagged(mem.nodes(listing, 1300.0, poll(1300.0))), poll(1300.0))
    assert len(calls) <= 2 and (drain.node, drain.action) == ("n7", "drain")


def test_the_snapshot_holds_unconfirmed_every_listed_node_fresh_polls_have_not_shown_missing_long_enough():
    """Snapshot.unconfirmed (kept from the listing's ids while they stay the same): every listed
    node but the one whose worker fresh polls showed missing for min(node_stale_after,
    boot_grace); a node listed later is unconfirmed."""
    import policy_matrix
    from nodemanager.cycle.controller import Controller
    from tests.fixtures.daemon import Time, sim_settings

    settings = sim_settings()
    confirm = min(settings.core.node_stale_after, settings.core.boot_grace)
    clock = Time()
    ctl = Controller(settings, policy_matrix.load_default(), None, clock=clock, dry_run=True)
    start = clock.now
    listing = [node(i, launched_at=start - 10.0) for i in (1, 2, 3)]
    workers = [Worker(name=f"h{i}", scheduler="x", cloud_id=f"n{i}", last_heard=start) for i in (1, 3)]
    while clock.now - start <= confirm + 20.0:
        for i, w in enumerate(workers):
            workers[i] = replace(w, last_heard=clock.now)
        report = ctl.cycle(listing, clock.now, poll(clock.now, *workers))
        clock.advance(10.0)
    assert report.snapshot.unconfirmed == {"n1", "n3"}             # n2's worker never came
    listing = listing + [node(4, launched_at=clock.now)]
    report = ctl.cycle(listing, clock.now, poll(clock.now, *workers))
    assert report.snapshot.unconfirmed == {"n1", "n3", "n4"}
    fresh = [replace(n) for n in listing[1:]]                        # not the memory's own list
    assert ctl.snapshot(fresh, clock.now, poll(clock.now, *workers)).unconfirmed == {"n3", "n4"}


def test_a_worker_missing_from_polls_in_a_row_is_carried_from_when_a_poll_last_showed_it():
    """Only the workers a poll lacks are looked at again: one missing from several polls in a
    row stays (as last seen, after the poll's own workers) until node_stale_after has passed since
    a poll last showed it; a duplicate name counts once, as listed last."""
    mem = InputMemory()
    n1, n2 = node(1), node(2)
    w1 = Worker(name="h1", scheduler="x", cloud_id="n1", last_heard=10.0, running_jobs=1)
    w2 = Worker(name="h2", scheduler="x", cloud_id="n2", last_heard=10.0)
    newer = replace(w1, last_heard=20.0)
    assert mem.poll(poll(20.0, w1, w2, newer), [n1, n2], 600.0).workers == (w1, w2, newer)
    assert mem.poll(poll(100.0, w2), [n1, n2], 600.0).workers == (w2, newer)
    assert mem.poll(poll(400.0), [n1, n2], 600.0).workers == (newer, w2)       # both carried
    assert mem.carrying()
    assert mem.poll(poll(621.0), [n1, n2], 600.0).workers == (w2,)             # h1 last shown at 20
    assert mem.poll(poll(701.0), [n1, n2], 600.0).workers == ()                # h2 last shown at 100
    assert not mem.carrying()
