"""What the daemon plugs in when ``[HA]`` is configured (one object, small hooks in daemon.py).

    ha = HighAvailability(settings.ha)
    cloud, scheduler = ha.fence_ports(cloud, scheduler)   # mutations only while acting, fenced
    admin = AdminState(store=ha.admin_store)               # holds/drains/pause in etcd
    controller.hold_back = ha.hold_back                    # standby: plan, carry out nothing
    metrics.registry.register(ha.collector())
    ha.start() ... ha.stop()                               # stop releases the lease
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import replace
from typing import Any, Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from nodemanager.console.admin import AdminStateError
from nodemanager.ha.admin_store import EtcdAdminStore
from nodemanager.ha.etcd import EtcdClient
from nodemanager.ha.gate import FencedCloud, FencedScheduler
from nodemanager.ha.lease import LeaderLease, client_for
from nodemanager.ha.local import HeadRecords
from nodemanager.configuration.settings import HASettings

__all__ = ["HighAvailability", "HACollector", "election_keys"]

log = logging.getLogger("nodemanager.ha")


def election_keys(ha: HASettings, records: HeadRecords, cluster: str) -> HASettings:
    """``ha`` with its etcd keys: as configured, else under ``/nodemanager/<deployment>/``, where
    the deployment is ``[HA] deployment`` or, unset, the name this head recorded at its first
    start (the cluster name then): renaming the cluster never moves a head to another election."""
    if ha.election_key and ha.admin_key:
        return ha
    deployment = ha.deployment or records.deployment(cluster)
    return replace(ha, election_key=ha.election_key or f"/nodemanager/{deployment}/leader",
                   admin_key=ha.admin_key or f"/nodemanager/{deployment}/admin")


class HighAvailability:
    """The lease, the fenced ports, the admin store and the standby rule for one daemon."""

    def __init__(self, ha: HASettings, *, me: str | None = None, client: EtcdClient | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 state_dir: str = "", cluster: str = "nodemanager") -> None:
        self.records = HeadRecords(state_dir)
        ha = election_keys(ha, self.records, cluster)
        self.settings = ha
        self.client = client or client_for(ha)
        self.clock, self.wall = clock, wall
        self.lease = LeaderLease(self.client, ha, me or f"{socket.gethostname()}:{os.getpid()}",
                                 clock=clock, wall=wall, records=self.records)
        self.admin_store = EtcdAdminStore(self.client, ha.admin_key, self.lease.acting,
                                          lambda: self.lease.view().leader, self.records)
        self.admin: Any = None
        self.fresh_start: Callable[[], None] | None = None   # forget the standby's input memory
        self._admin_loaded_for: int | None = None   # the fence under which the admin state was read
        self._fresh_for: int | None = None          # the fence under which fresh_start ran

    def fence_ports(self, cloud: Any, scheduler: Any) -> tuple[FencedCloud, FencedScheduler]:
        return FencedCloud(cloud, self.lease), FencedScheduler(scheduler, self.lease)

    def hold_back(self, oldest_input: float) -> str | None:
        """Why the controller must not act on inputs polled at ``oldest_input`` (wall time), or
        None. A new leader starts from fresh inputs as a restart does (the standby's memory keeps
        nodes the old leader destroyed as "missing"), waits for a cloud listing and a scheduler
        poll taken after its election (they show what the old leader did to the last moment) and
        for the admin state from etcd."""
        if not self.lease.acting():
            if self.admin is not None and not self.lease.view().leading:
                self._mirror_admin()
            return self.lease.description()
        state = self.lease.view()
        if self._fresh_for != state.fence:
            self._fresh_for = state.fence
            if self.fresh_start is not None:
                self.fresh_start()
            return "new leader: starting from fresh inputs, as a restart does"
        elected_at = self.wall() - (self.clock() - (state.since or 0.0))
        if oldest_input < elected_at:
            return "new leader: waiting for a cloud listing and a scheduler poll taken after the election"
        if self.admin is not None and self._admin_loaded_for != state.fence:
            try:
                self.admin.reload()
            except AdminStateError as exc:
                return f"new leader: the admin state cannot be read yet ({exc})"
            self._admin_loaded_for = state.fence
            log.info("HA: admin state read from %s", self.admin_store.name)
        return None

    def _mirror_admin(self) -> None:
        """A standby keeps its copy of the admin state current (it is what survives etcd's loss)."""
        if self.lease.etcd_error is None:
            try:
                self.admin_store.read()
            except OSError:
                pass  # the lease's own rounds report etcd's state

    def describe(self) -> str:
        return self.lease.description()

    def collector(self) -> "HACollector":
        return HACollector(self.lease)

    def start(self) -> None:
        log.info("HA: etcd %s, election key %s, lease %gs (acting stops %gs before it can end)",
                 ", ".join(self.settings.endpoints), self.settings.election_key,
                 self.settings.lease_ttl, self.settings.stop_margin)
        self.lease.start()

    def stop(self) -> None:
        self.lease.stop(release=True)
        self.client.close()


class HACollector:
    """``nodemanager_leader``, ``nodemanager_lease_age_seconds``, ``nodemanager_elections_total``."""

    def __init__(self, lease: LeaderLease) -> None:
        self.lease = lease

    def collect(self) -> Iterator[Any]:
        state = self.lease.view()
        yield GaugeMetricFamily("nodemanager_leader", "1 while this process is the acting HA leader.",
                                value=1.0 if self.lease.acting() else 0.0)
        age = GaugeMetricFamily("nodemanager_lease_age_seconds",
                                "Seconds since the leader's last successful lease keepalive was sent.")
        if state.leading and state.renewed_at is not None:
            age.add_metric([], max(0.0, self.lease.clock() - state.renewed_at))
        yield age
        yield CounterMetricFamily("nodemanager_elections", "Times this process became HA leader.",
                                  value=float(state.elections))
