"""The simulated pool's poll costs what changed: it keeps its workers between
polls and sends an ad again only when its startd changed or ``update_interval`` passed, an ad
sent again with no change is not parsed again, and the demand is grouped again only when the
queue changed. Checked against a pool that parses every ad
it sends, driven through the same random sequences of joins, jobs, drains and VM stops."""

from __future__ import annotations

import random

import pytest

from nodemanager.actors.clock import ManualClock
from nodemanager.model import CloudNode, Demand, Size, Worker
from nodemanager.scheduler.port import DrainRefused, DrainSchedule, SchedulerPoll
from nodemanager.sim.pool import Job, SimPool
from nodemanager.sim.startd import SimStartd

SIZE = Size("m8", cores=8, ram_mb=16000)
T0 = 1_200_000.0


class ParsesEveryAd(SimPool):
    """The pool as it was: each poll walks every startd, every ad it sends is parsed from
    scratch, and the demand is grouped from the queue at every call."""

    def render(self, st: SimStartd, now: float, before: Worker | None = None) -> Worker:
        return super().render(st, now, None)

    def demand(self) -> tuple[Demand, ...]:
        self._demand = None  # grouped again from the queue every time
        return super().demand()

    def poll(self) -> SchedulerPoll:
        self.advance(self._clock())
        now = self.now
        workers = []
        for nid, st in self._joined.items():
            if not st.alive:
                continue
            cached = self._rendered.get(nid)
            version = self._version[nid]
            if cached is None or cached[0] != version or now - cached[1] >= self.update_interval:
                cached = self._rendered[nid] = (version, now, self.render(st, now))
            workers.append(cached[2])
        return SchedulerPoll(workers=tuple(workers), demand=self.demand(), polled_at=now)


def _drive(seed: int, pools: list[SimPool], clock: ManualClock) -> int:
    """Feed ``pools`` the same random events for two simulated hours; after each step every pool
    polls and the polls must be equal. Returns how many ads were sent with no change."""
    rng = random.Random(seed)
    booted: list[str] = []
    refreshed = 0
    for step in range(400):
        clock.advance(rng.choice((1.0, 7.0, 30.0, 61.0, 299.0, 300.0, 301.0)))
        r = rng.random()
        if r < 0.08 or len(booted) < 3:
            n = len(booted)
            node = CloudNode(f"i-{n}", f"n{n}", SIZE.name, clock(), private_ip=f"10.0.{n // 250}.{n % 250}")
            booted.append(node.id)
            for p in pools:
                p.vm_started(node, SIZE)
        elif r < 0.6:
            job = Job(f"j{step}", cpus=rng.choice((1, 2, 4, 8)), ram_mb=rng.choice((0, 1000, 4000)),
                      runtime=rng.uniform(30, 3000), submit_time=clock(),
                      walltime=rng.choice((0.0, 3600.0)))
            for p in pools:
                p.submit(job)
        elif r < 0.66 and booted:
            victim = rng.choice(booted)
            for p in pools:
                p.vm_stopped(victim)
        elif r < 0.72:
            schedule = rng.choice(list(DrainSchedule))
            for p in pools:
                mine = [w for w in p.poll().workers if not w.draining]
                if mine:
                    w = mine[step % len(mine)]
                    try:
                        p.drain(w, schedule, "test")
                    except DrainRefused:
                        pass
        polls = [p.poll() for p in pools]
        assert all(q == polls[0] for q in polls[1:]), (seed, step)
        fast = pools[0]
        refreshed += sum(1 for nid, (v, at, w) in fast._rendered.items() if at == fast.now)
    return refreshed


@pytest.mark.parametrize("seed", range(6))
def test_the_poll_reports_what_a_pool_parsing_every_ad_reports(seed):
    clock = ManualClock(T0)
    kw = dict(join_delay=60.0, negotiation_interval=60.0, update_interval=300.0)
    pools = [SimPool(clock, **kw), ParsesEveryAd(clock, **kw)]
    assert _drive(seed, pools, clock) > 100


def test_an_unchanged_startd_is_heard_again_every_update_interval():
    """The ad sent again moves LastHeardFrom (and the worker's last_heard) and nothing else the
    adapter reads; a change (a job starts) is sent at once."""
    clock = ManualClock(T0)
    pool = SimPool(clock, join_delay=0.0, negotiation_interval=0.0, update_interval=300.0)
    pool.vm_started(CloudNode("i-1", "n1", SIZE.name, T0, private_ip="10.0.0.1"), SIZE)
    (w0,) = pool.poll().workers
    clock.advance(299.0)
    assert pool.poll().workers == (w0,)                          # the collector's copy
    clock.advance(1.0)
    (w1,) = pool.poll().workers
    assert (w0.last_heard, w1.last_heard) == (T0, T0 + 300)
    assert w1.ad["LastHeardFrom"] == T0 + 300 and w1.ad["MyCurrentTime"] == T0 + 300
    assert w1 == ParsesEveryAd(clock).render(pool.startd("i-1"), clock())
    pool.submit(Job("a", cpus=3, ram_mb=0, runtime=600.0, submit_time=clock()))
    (w2,) = pool.poll().workers
    assert (w2.cpus_busy, w2.running_jobs, w2.classified.state) == (3, 1, "busy")
