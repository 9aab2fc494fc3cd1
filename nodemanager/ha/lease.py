"""The leader lease: one thread that keeps (or tries to win) the etcd election key.

    lease = LeaderLease(client, ha_settings, me="head1:4242")
    lease.start()              # thread: every (lease_ttl - stop_margin)/3, keepalive (leader) or try to win
    lease.acting()             # True while we lead and the lease is certainly ours
    lease.fence                # the fencing value (the key's create revision) while leading
    lease.view()               # Leadership, for status and metrics
    lease.stop()               # revoke the lease (the standby takes over at once), end the thread

One :meth:`step` is one round of I/O, so tests drive it by hand with an injected clock. Every
change of role is logged once, with why.

Fences never repeat: the winning transaction also writes ``<election_key>-fence`` (no lease) with
one more than the highest fence known (etcd's record and this head's ``ha-fence``), and the term's
fence is the larger of that and the key's create revision; standbys remember the fence they see.
When etcd has lost its data (no fence record, though this head knows of earlier terms), a leader
of before may still be acting on its own deadline: the new leader acts only one ``lease_ttl``
after its election.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import Callable

from nodemanager.ha import election as el
from nodemanager.ha.etcd import EtcdClient, EtcdError, KeyValue
from nodemanager.ha.local import HeadRecords
from nodemanager.configuration.settings import HASettings

__all__ = ["LeaderLease", "client_for"]

log = logging.getLogger("nodemanager.ha")


def client_for(ha: HASettings) -> EtcdClient:
    """The etcd client for ``[HA]``."""
    return EtcdClient(ha.endpoints, timeout=ha.timeout, ca_file=ha.ca_file, cert_file=ha.cert_file,
                      key_file=ha.key_file, user=ha.user, password=ha.password)


class LeaderLease:
    """Keeps this process's side of the election (see the module docstring). ``clock`` is
    monotonic; ``wall`` only writes the human "since" into the key's value."""

    def __init__(self, client: EtcdClient, ha: HASettings, me: str, *,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 on_change: Callable[[el.Leadership], None] | None = None,
                 records: HeadRecords | None = None, watch: tuple[str, ...] = ()) -> None:
        self.client = client
        self.watch = watch   # election keys of earlier versions: while one is held, this head does not lead
        self.ha = ha
        self.records = records or HeadRecords("")
        self.fence_key = f"{ha.election_key}-fence"
        self.clock = clock
        self.wall = wall
        self.on_change = on_change
        self._state = el.Leadership(me=me)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._etcd_error: str | None = None

    # -- what the daemon reads ------------------------------------------------------------------

    def view(self) -> el.Leadership:
        with self._lock:
            return self._state

    def acting(self) -> bool:
        """True while this process leads and may start a cloud or scheduler mutation."""
        return el.acting(self.view(), self.clock(), self.ha.lease_ttl, self.ha.stop_margin)

    @property
    def fence(self) -> int | None:
        state = self.view()
        return state.fence if state.leading else None

    def description(self) -> str:
        """One line for the status page and logs: "leader since …" or "standby; leader is …"."""
        state = self.view()
        now = self.clock()
        if el.acting(state, now, self.ha.lease_ttl, self.ha.stop_margin):
            return f"leader ({state.leader}; fence {state.fence})"
        if state.leading and state.acting_from is not None and now < state.acting_from:
            return (f"leader ({state.leader}; fence {state.fence}), acting in "
                    f"{state.acting_from - now:.0f}s: etcd lost its data, an earlier leader may still act")
        where = f"leader is {state.leader}" if state.leader else "no leader now"
        return f"standby; {where}" + (f"; etcd: {self._etcd_error}" if self._etcd_error else "")

    # -- the thread -----------------------------------------------------------------------------

    @property
    def interval(self) -> float:
        """Seconds between rounds: three keepalives fit in the time the leader may act."""
        return (self.ha.lease_ttl - self.ha.stop_margin) / 3

    def start(self) -> "LeaderLease":
        self._thread = threading.Thread(target=self._run, name="nodemanager-lease", daemon=True)
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        """End the thread; with ``release``, revoke our lease so a standby takes over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.ha.timeout * 3 + 1)
        state = self.view()
        if release and state.lease is not None:
            try:
                self.client.revoke(state.lease)
                log.info("HA: lease released; a standby can take over now")
            except EtcdError as exc:
                log.warning("HA: could not release the lease (%s); a standby takes over when it "
                            "expires", exc)
        self._set(el.deposed(state))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.interval)

    # -- one round ------------------------------------------------------------------------------

    def _set(self, new: el.Leadership) -> None:
        with self._lock:
            old, self._state = self._state, new
        if old.leading != new.leading or old.leader != new.leader:
            if new.leading:
                log.info("HA: elected leader (fence %s); acting until the lease says otherwise", new.fence)
            elif old.leading:
                log.warning("HA: no longer leader%s; acting stopped, now standby",
                            f" ({self._etcd_error})" if self._etcd_error else "")
            else:
                log.info("HA: standby; %s", f"leader is {new.leader}" if new.leader else "no leader now")
            if self.on_change is not None:
                self.on_change(new)

    @property
    def etcd_error(self) -> str | None:
        """Why the last round could not reach etcd (None: it could)."""
        return self._etcd_error

    def _failed(self, exc: EtcdError) -> None:
        if self._etcd_error is None:
            log.warning("HA: etcd unreachable: %s", exc)
        self._etcd_error = str(exc)

    def step(self) -> el.Leadership:
        """One round: drop a lapsed lead, then keep the lease alive (leader) or try to win."""
        ttl, margin = self.ha.lease_ttl, self.ha.stop_margin
        before = self.view()
        state = el.expired(before, self.clock(), ttl, margin)
        if state != before:
            self._set(state)
            # our key may outlive our deadline in etcd: end it, so the next election is clean
            self._revoke_quietly(before.lease)
        try:
            if state.leading:
                self._set(self._renew(state))
            else:
                self._set(self._campaign(state))
        except EtcdError as exc:
            self._failed(exc)
            return self.view()
        if self._etcd_error is not None:
            log.info("HA: etcd reachable again")
        self._etcd_error = None
        return self.view()

    def _renew(self, state: el.Leadership) -> el.Leadership:
        assert state.lease is not None
        sent = self.clock()
        left = self.client.keepalive(state.lease)
        kv = self.client.get(self.ha.election_key)
        if kv is None or kv.lease != state.lease:
            log.warning("HA: the election key is no longer ours (%s)", kv.value if kv else "deleted")
            return el.deposed(state, kv.value if kv else None)
        other = self._watched()
        if other is not None:
            log.error("HA: %s leads too: this head stops acting", other)
            self._revoke_quietly(state.lease)
            return el.deposed(state, other)
        return el.renewed(state, sent, min(left, self.ha.lease_ttl))

    def _watched(self) -> str | None:
        """Who holds one of the :attr:`watch` keys (a head of an earlier version of this
        deployment, elected under its old key), or None."""
        for key in self.watch:
            kv = self.client.get(key)
            if kv is not None:
                return f"{kv.value} (under the election key {key} of an earlier version)"
        return None

    def _campaign(self, state: el.Leadership) -> el.Leadership:
        other = self._watched()
        if other is not None:
            return el.observed(state, other)
        kv = self.client.get(self.ha.election_key)
        record = _fence_of(self.client.get(self.fence_key))
        if kv is not None:
            self.records.saw_fence(max(kv.create_revision, record or 0))   # the leader's fence
            return el.observed(state, kv.value)
        floor = max(self.records.fence, record or 0)
        sent = self.clock()
        lease = self.client.grant(self.ha.lease_ttl)
        since = datetime.fromtimestamp(self.wall(), timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
        value = f"{state.me} since {since}"
        try:
            won, revision = self.client.create(self.ha.election_key, value, lease,
                                               also={self.fence_key: str(floor + 1)})
        except EtcdError:
            self._revoke_quietly(lease)
            raise
        if won:
            fence = max(revision, floor + 1)
            self.records.saw_fence(fence)
            if record is None and floor > 0:
                log.warning("HA: etcd has lost its data (no fence record; this head knows of fence "
                            "%d): elected with fence %d, acting only after %gs, when any earlier "
                            "leader has stopped", floor, fence, self.ha.lease_ttl)
                return el.elected(state, lease, fence, sent, value, acting_from=sent + self.ha.lease_ttl)
            return el.elected(state, lease, fence, sent, value)
        self._revoke_quietly(lease)
        kv = self.client.get(self.ha.election_key)
        return el.observed(state, kv.value if kv else None)

    def _revoke_quietly(self, lease: int | None) -> None:
        if lease is None:
            return
        try:
            self.client.revoke(lease)
        except EtcdError:
            pass  # it expires by itself within the TTL


def _fence_of(kv: KeyValue | None) -> int | None:
    """The fence recorded in etcd (None: no record, or not a number)."""
    return int(kv.value) if kv is not None and kv.value.isdigit() else None
