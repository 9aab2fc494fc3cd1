"""What the daemon plugs in when ``[HA]`` is configured (one object, small hooks in daemon.py).

    ha = HighAvailability(settings.ha, deployment_id=settings.cloud.deployment_id)
    cloud, scheduler = ha.fence_ports(cloud, scheduler)   # mutations only while acting, fenced
    admin = AdminState(store=ha.admin_store)               # holds/drains/cancels/pause in etcd
    controller.hold_back = ha.hold_back                    # standby: plan, carry out nothing
    controller.term = lambda: ha.term(tolerance)           # a second leader's marks stop this one
    ha.describe_config = lambda: config_parts(settings, matrix_sha256)   # compared between heads
    metrics.registry.register(ha.collector())
    ha.start() ... ha.stop()                               # stop releases the lease
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from nodemanager.console.admin import AdminStateError
from nodemanager.ha.admin_store import EtcdAdminStore
from nodemanager.ha.etcd import EtcdClient
from nodemanager.core.identity import Term
from nodemanager.ha.election import Leadership
from nodemanager.ha.gate import FencedCloud, FencedScheduler
from nodemanager.ha.heads import HeadDigests
from nodemanager.ha.lease import LeaderLease, client_for
from nodemanager.ha.local import HeadRecords
from nodemanager.configuration.settings import HASettings

__all__ = ["HighAvailability", "HACollector", "election_keys", "earlier_keys"]

log = logging.getLogger("nodemanager.ha")


def election_keys(ha: HASettings, records: HeadRecords, cluster: str, deployment_id: str = "") -> HASettings:
    """``ha`` with its etcd keys: as configured, else under ``/nodemanager/<deployment_id>/``,
    the identity every VM of the deployment carries, so heads of one deployment share one
    election whatever else their configurations say. Without a deployment id (tests), the name
    ``[HA] deployment`` or the cluster name this head recorded at its first start."""
    if ha.election_key and ha.admin_key:
        return ha
    deployment = deployment_id or ha.deployment or records.deployment(cluster)
    return replace(ha, election_key=ha.election_key or f"/nodemanager/{deployment}/leader",
                   admin_key=ha.admin_key or f"/nodemanager/{deployment}/admin")


def earlier_keys(ha: HASettings, records: HeadRecords, deployment_id: str) -> tuple[str, ...]:
    """The election key an earlier version used (``/nodemanager/<[HA] deployment or the recorded
    name>/leader``) when it differs: while a head of that version holds it, no head leads here."""
    if ha.election_key or not deployment_id:
        return ()
    name = ha.deployment or records.recorded_deployment()
    return (f"/nodemanager/{name}/leader",) if name else ()


class HighAvailability:
    """The lease, the fenced ports, the admin store and the standby rule for one daemon."""

    def __init__(self, ha: HASettings, *, me: str | None = None, client: EtcdClient | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 state_dir: str = "", cluster: str = "nodemanager", deployment_id: str = "") -> None:
        self.records = HeadRecords(state_dir)
        earlier = earlier_keys(ha, self.records, deployment_id)
        ha = election_keys(ha, self.records, cluster, deployment_id)
        self.settings = ha
        self.client = client or client_for(ha)
        self.clock, self.wall = clock, wall
        self.me = me or f"{socket.gethostname()}:{os.getpid()}"
        self.lease = LeaderLease(self.client, ha, self.me, clock=clock, wall=wall, records=self.records,
                                 watch=tuple(k for k in earlier if k != ha.election_key))
        self.admin_store = EtcdAdminStore(self.client, ha.admin_key, self.lease.acting,
                                          lambda: self.lease.view().leader, self.records,
                                          window=ha.lease_ttl)
        self.describe_config: Callable[[], Mapping[str, str]] = dict   # set by the daemon
        # by the deployment's identity: heads elected under other keys see each other here
        prefix = (f"/nodemanager/{deployment_id}" if deployment_id else ha.election_key.rpartition("/")[0]) + "/heads/"
        self.heads = HeadDigests(self.client, prefix, self.me, ha.lease_ttl, lambda: self.describe_config(),
                                 lambda: ha.election_key if self.lease.acting() else "")
        self._heads_stop = threading.Event()
        self._heads_thread: threading.Thread | None = None
        self.admin: Any = None
        self.fresh_start: Callable[[], None] | None = None   # forget the standby's input memory
        self._admin_loaded_for: int | None = None   # the fence under which the admin state was read
        self._fresh_for: int | None = None          # the fence under which fresh_start ran
        self._second_logged: tuple[str, ...] = ()

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
        second = self.heads.other_leaders()
        if second:
            if second != self._second_logged:
                log.error("HA: %s: two leaders of this deployment; this head carries out nothing while "
                          "it lasts: give every head the same etcd endpoints and election_key (or "
                          "leave it empty)", "; ".join(second))
            self._second_logged = second
            return "another leader of this deployment: " + "; ".join(second)
        self._second_logged = ()
        state = self.lease.view()
        if self._fresh_for != state.fence:
            self._fresh_for = state.fence
            self._log_takeover()
            if self.fresh_start is not None:
                self.fresh_start()
            return "new leader: starting from fresh inputs, as a restart does"
        if oldest_input < self._elected_at(state):
            return "new leader: waiting for a cloud listing and a scheduler poll taken after the election"
        if self.admin is not None and (self._admin_loaded_for != state.fence or self.admin_store.in_doubt()):
            try:
                self.admin.reload()
            except AdminStateError as exc:
                return f"the admin state cannot be read ({exc})"
            if self._admin_loaded_for != state.fence:
                log.info("HA: admin state read from %s", self.admin_store.name)
            self._admin_loaded_for = state.fence
        return self.admin_store.in_doubt() if self.admin is not None else None

    def _elected_at(self, state: Leadership) -> float:
        """The wall time of this head's election."""
        return self.wall() - (self.clock() - (state.since or 0.0))

    def term(self, tolerance: float) -> Term | None:
        """This leader's term while it acts (None otherwise): what tells its marks on the VMs
        from a second leader's."""
        state = self.lease.view()
        if not self.lease.acting() or state.fence is None:
            return None
        return Term(fence=state.fence, since=self._elected_at(state), tolerance=tolerance)

    def _log_takeover(self) -> None:
        """At every takeover: whether the heads decide with one configuration and matrix."""
        differences = self.heads.differences()
        for line in differences:
            log.warning("HA: taking over: %s than the other head(s) did; what was capped there may "
                        "not be here", line.replace(" decides with ", " decided with ", 1))
        if not differences:
            others = self.heads.heads()
            log.info("HA: taking over with the same configuration and matrix as %s",
                     ", ".join(others) if others else "no other live head")

    def _mirror_admin(self) -> None:
        """A standby shows the admin state the leader holds, and keeps its copy current (it is
        what survives etcd's loss)."""
        if self.lease.etcd_error is None:
            try:
                self.admin.reload()
            except AdminStateError:
                pass  # the lease's own rounds report etcd's state

    def describe(self) -> str:
        second = self.heads.other_leaders() if self.lease.acting() else ()
        return self.lease.description() + ("; STOPPED, another leader: " + "; ".join(second) if second else "")

    def collector(self) -> "HACollector":
        return HACollector(self.lease, self.heads)

    def start(self) -> None:
        log.info("HA: etcd %s, election key %s, lease %gs (acting stops %gs before it can end)",
                 ", ".join(self.settings.endpoints), self.settings.election_key,
                 self.settings.lease_ttl, self.settings.stop_margin)
        self.lease.start()
        self._heads_thread = threading.Thread(target=self._run_heads, name="nodemanager-heads", daemon=True)
        self._heads_thread.start()

    def _run_heads(self) -> None:
        while not self._heads_stop.is_set():
            self.heads.step()
            self._heads_stop.wait(self.lease.interval)

    def stop(self) -> None:
        self._heads_stop.set()
        if self._heads_thread is not None:
            self._heads_thread.join(timeout=self.settings.timeout * 4 + 1)
        self.heads.stop()
        self.lease.stop(release=True)
        self.client.close()


class HACollector:
    """``nodemanager_leader``, ``nodemanager_lease_age_seconds``, ``nodemanager_elections_total``,
    ``nodemanager_ha_config_mismatch``."""

    def __init__(self, lease: LeaderLease, heads: HeadDigests | None = None) -> None:
        self.lease, self.heads = lease, heads

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
        yield GaugeMetricFamily("nodemanager_ha_other_leaders",
                                "Other heads of this deployment leading under another election key "
                                "while this one leads.",
                                value=float(len(self.heads.other_leaders()) if self.heads and self.lease.acting() else 0))
        yield GaugeMetricFamily("nodemanager_ha_config_mismatch",
                                "Other live HA heads deciding with another configuration or matrix.",
                                value=float(len(self.heads.differences()) if self.heads else 0))
