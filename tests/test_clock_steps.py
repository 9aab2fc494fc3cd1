"""A step of the head node's wall clock (NTP, a VM resume, an operator) stalls nothing: the daemon
on the embedded simulated world, its status server, and a ManualClock whose wall time the test
steps back an hour while its monotonic time runs on. Every interval, wait and backoff is measured
on the monotonic clock; wall time is for people and for comparing with cloud and scheduler times.
Nothing sleeps: the test advances the clock and waits for the actors to settle."""

from __future__ import annotations

import re

import requests

from nodemanager.actors.clock import ManualClock
from nodemanager.cycle.actuate import Actuator, Task
from nodemanager.cloud import CloudError, ErrorKind
from nodemanager.configuration.config import load
from nodemanager.daemon import Daemon
from nodemanager.model import BootRequest
from nodemanager.sim.cloud import SimCloud
from nodemanager.sim.world import SimWorld
from tests.fixtures.daemon import SIZES
from tests.test_daemon import daemons, write_config  # noqa: F401  (the fixture)

HOUR = 3600.0


class SteppingListing:
    """The simulated cloud port; the listing during which ``step`` is set steps the wall clock."""

    def __init__(self, world: SimWorld, clock: ManualClock) -> None:
        self._inner, self._clock = world.cloud, clock
        self.step: float | None = None
        self.listings = 0

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def list_nodes(self):
        self.listings += 1
        if self.step is not None:
            self._clock.step_wall(self.step)   # the wall clock steps while the listing is under way
            self.step = None
        return self._inner.list_nodes()


def run_for(d: Daemon, seconds: float, step: float = 1.0) -> None:
    for _ in range(int(seconds / step)):
        d.clock.advance(step)
        assert d.system.settle(10.0)


def daemon_on(tmp_path, daemons, port: str = "-1"):  # noqa: F811
    clock = ManualClock(1_000_000.0)
    cfg = write_config(tmp_path / "nm.ini", port=port)
    world = SimWorld(load(cfg), clock)
    cloud = SteppingListing(world, clock)
    return daemons(cfg, clock=clock, ports=(cloud, world.scheduler, world)), cloud, world


def test_a_wall_clock_step_back_during_a_poll_does_not_stall_the_poller(tmp_path, daemons) -> None:  # noqa: F811
    d, cloud, _ = daemon_on(tmp_path, daemons)
    d.start()
    run_for(d, 30)
    cloud.step = -HOUR
    run_for(d, 5)                                          # cloud_interval: the stepping listing
    assert cloud.step is None
    before = cloud.listings
    run_for(d, 30)
    assert cloud.listings - before >= 5                    # one listing every 5 s, as before the step


def test_quota_blocks_rate_limits_and_backoffs_end_on_time_after_a_step_back(nm_settings,
                                                                              scripted_scheduler) -> None:
    """The actuator (as the daemon runs it) against the simulated cloud, on a clock whose wall time
    steps back an hour after each refusal: every wait ends when its own length has passed."""
    clock = ManualClock(1_000_000.0)
    cloud = SimCloud(clock=clock.monotonic, sizes=SIZES, cluster="testcluster", boot_delay=0.0)
    act = Actuator(cloud, scripted_scheduler, nm_settings, clock=clock)
    boot = Task(BootRequest("small", 1, "3 jobs queued"))
    cases = ((ErrorKind.QUOTA, {}, nm_settings.cloud.quota_backoff),
             (ErrorKind.RATE_LIMIT, {"retry_after": 30.0}, 30.0),
             (ErrorKind.TRANSIENT, {}, 10.0))                  # the first retry backoff
    for kind, extra, wait in cases:
        cloud.fail_next("create_node", CloudError(kind, "refused", call="create_node", **extra))
        [refused] = act.run(boot)
        assert refused.result == "failed", refused
        act.observe_listing(cloud.list_nodes())               # settles a create that may have created
        clock.step_wall(-HOUR)
        clock.advance(wait - 1)
        [early] = act.run(boot)
        assert early.result == "skipped" and re.search(r"\b1s\b", early.detail), early.detail
        clock.advance(1)
        [done] = act.run(boot)
        assert done.result == "ok", (kind, done.detail)
        act.observe_listing(cloud.list_nodes())


def test_healthz_fails_when_a_poll_is_older_than_its_limit(tmp_path, daemons) -> None:  # noqa: F811
    d, cloud, world = daemon_on(tmp_path, daemons, port="0")
    d.start()
    run_for(d, 30)
    url = d.status_server.url + "/healthz"
    assert requests.get(url, timeout=5).status_code == 200
    world.sim_cloud.fail_next("list_nodes", CloudError(ErrorKind.TRANSIENT, "HTTP 503", call="list_nodes"),
                              count=10_000)                # the cloud stops answering
    d.clock.step_wall(-HOUR)                               # and the wall clock steps back
    run_for(d, 100)
    assert requests.get(url, timeout=5).status_code == 200  # within poll_stale_after (2m)
    run_for(d, 30)
    reply = requests.get(url, timeout=5)
    assert reply.status_code == 503
    assert reply.text.startswith("last cloud poll 2m 10s ago (limit 2m 00s)")
