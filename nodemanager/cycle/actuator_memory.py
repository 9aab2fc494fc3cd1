"""What the actuator remembers between tasks: boots requested but not listed yet (and their
journal), actions newer than the last listing, the calls' waits (:mod:`~nodemanager.cycle.call_backoff`), a
learned quota and blocked sizes, node names in use. :class:`~nodemanager.cycle.actuate.Actuator` carries out the actions on top of it.
"""

from __future__ import annotations

import logging
import math
import operator
import re
import threading
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

from nodemanager.core.clocks import monotonic_of
from nodemanager.cloud import CloudDriver, CloudError, ErrorKind, is_gone
from nodemanager.core import Reservation, is_lost, settle
from nodemanager.core.rate_history import HOUR
from nodemanager.cycle.breakers import Breakers
from nodemanager.cycle.call_backoff import CallBackoff
from nodemanager.cycle.journal import ReservationJournal
from nodemanager.model import CloudNode, InFlight, Outcome, Worker
from nodemanager.scheduler import Scheduler, SchedulerPoll
from nodemanager.configuration.settings import Settings
from nodemanager.text import duration, request_words

__all__ = ["ActuatorMemory", "ActuatorState", "BOOT_LISTING_TIMEOUT",
           "DESTROY_SETTLE", "NAME_QUARANTINE", "OK", "REFUSED", "FAILED", "SKIPPED"]

BOOT_LISTING_TIMEOUT = 600.0    # a requested boot not listed after this long is given up
DESTROY_SETTLE = 300.0          # a node destroyed this recently is not destroyed again
NAME_QUARANTINE = 600.0         # a node name listed this recently is not given to a new VM

OK, REFUSED, FAILED, SKIPPED = "ok", "refused", "failed", "skipped"

log = logging.getLogger("nodemanager.actuate")


@dataclass(frozen=True)
class ActuatorState:
    """What the actuator learned, for the next :class:`~nodemanager.model.Snapshot`."""

    quota: int | None = None
    blocked_sizes: frozenset[str] = frozenset()
    recent_destroys: tuple[float, ...] = ()
    # the actuator's destroys (node id -> when) and boots (request id -> when) of the last hour, the
    # previous process's read back from the store, merged with the listing's (core.rate_history)
    destroys_by_node: Mapping[str, float] = field(default_factory=dict)
    boots_by_request: Mapping[str, float] = field(default_factory=dict)
    in_flight: tuple[InFlight, ...] = ()   # boots not listed yet; actions newer than the listing
    open_breakers: Mapping[str, str] = field(default_factory=dict)  # size -> why not booted
    probe_sizes: frozenset[str] = frozenset()  # capacity breakers half-open: one boot at a time


def _new_request_id() -> str:
    return uuid.uuid4().hex[:12]


class ActuatorMemory:
    """The actuator's state and bookkeeping (see the module docstring); the constructor's
    arguments are described at :class:`~nodemanager.cycle.actuate.Actuator`. Thread-safe."""

    def __init__(self, cloud: CloudDriver, scheduler: Scheduler, settings: Settings, *,
                 clock: Callable[[], float],
                 latest_worker: Callable[[str], Worker | None] | None = None,
                 request_ids: Callable[[], str] = _new_request_id,
                 journal: ReservationJournal | None = None) -> None:
        self.cloud = cloud
        self.scheduler = scheduler
        self.settings = settings
        self.clock = clock
        self._mono = monotonic_of(clock)  # backoffs, blocks and settle times: no wall-clock step moves them
        self.latest_worker = latest_worker
        self.request_ids = request_ids
        self.controller = ""   # host:pid:start of this process, tagged on what it does (none: untagged)
        self._lock = threading.Lock()
        # times below are monotonic unless said otherwise
        self._quota: tuple[int, float] | None = None          # (count, learned at)
        self._blocked: dict[str, float] = {}                  # size -> blocked until
        self.breakers = Breakers()                            # wall: capacity breakers per size
        self.backoff = CallBackoff(self._mono, lambda: self.settings.poll.max_backoff)
        self._destroys: dict[str, float] = {}                 # wall: node id -> destroyed at (last hour)
        self._booted: dict[str, float] = {}                   # wall: request id -> create sent at (last hour)
        self._boots: dict[str, Reservation] = {}              # request id -> boot not yet listed
        self._destroying: dict[str, CloudNode] = {}           # destroy raised: settle by listing
        self._destroyed_at: dict[str, float] = {}             # node id -> destroy succeeded at
        self._raised: set[str] = set()                        # request ids whose create raised
        self._restored: set[str] = set()                      # request ids of a previous process
        self._recent: dict[str, InFlight] = {}                # node -> action done after the listing
        self._listed = 0
        self._name_seen: dict[str, float] = {}                # node name -> last listed at
        self._name_oldest = math.inf                          # no entry of _name_seen is older
        # the last listing as given, and its nodes not gone, their ids and names
        self._last_listing: tuple[list[CloudNode], tuple[list[CloudNode], set[str], list[str]]] = \
            ([], ([], set(), []))
        self._started = clock()
        self._polled: tuple[tuple[Worker, ...], float] = ((), 0.0)   # last poll's workers, stale_after...
        # ...and what a boot or destroy reads of them (newest last_heard, short names heard from),
        # worked out when one first does (most polls are followed by neither)
        self._heard: tuple[float | None, set[str]] | None = None
        self.journal = journal
        if journal is not None:
            self._restore(journal)
        # where the destroys and boots of the budgets over time are kept beyond this process (the store):
        # called with (kind, key, when), when None once it is not a boot after all
        self.keep_action: Callable[[str, str, float | None], None] | None = None

    # -- state for the controller ---------------------------------------------------------------

    def update_settings(self, settings: Settings) -> None:
        """Use new settings (a reload) from the next task on."""
        self.settings = settings

    def state(self, now: float | None = None) -> ActuatorState:
        """Quota, blocked sizes, recent destroys (last hour) and boots not listed yet, at ``now``
        (wall time)."""
        now = self.clock() if now is None else now
        mono = self._mono()
        with self._lock:
            quota = None
            if self._quota is not None and mono - self._quota[1] < self.settings.cloud.quota_backoff:
                quota = self._quota[0]
            blocked = frozenset(s for s, until in self._blocked.items() if until > mono)
            self._destroys = {k: t for k, t in self._destroys.items() if now - t < HOUR}
            self._booted = {k: t for k, t in self._booted.items() if now - t < HOUR}
            boots = {**self._booted, **{r.token: r.at for r in self._boots.values()}}
            opened, probing = self.breakers.states(now)
            return ActuatorState(quota=quota, blocked_sizes=blocked, open_breakers=opened, probe_sizes=probing,
                                 recent_destroys=tuple(sorted(self._destroys.values())),
                                 destroys_by_node=dict(self._destroys), boots_by_request=boots,
                                 in_flight=tuple(r.in_flight() for r in self._boots.values())
                                 + tuple(self._recent.values()))

    def restore_actions(self, kept: Mapping[str, Mapping[str, float]]) -> None:
        """Take the destroys (by node id) and boots (by request id) a previous process (or the old HA
        leader) kept, each key once (the earlier time): the rate budgets count them as this process's."""
        with self._lock:
            for kind, mine in (("destroy", self._destroys), ("boot", self._booted)):
                for key, at in kept.get(kind, {}).items():
                    mine[key] = min(at, mine.get(key, at))

    def _kept(self, kind: str, key: str, at: float | None) -> None:
        if self.keep_action is not None:
            self.keep_action(kind, key, at)

    def denials(self) -> dict[str, str]:
        """The scheduler calls refused for lack of rights (:meth:`CallBackoff.denials`)."""
        return self.backoff.denials()

    def observe_listing(self, nodes: Iterable[CloudNode], polled_at: float | None = None) -> list[Outcome]:
        """Settle boots and destroys against a listing taken at ``polled_at``: a requested boot
        whose request id is listed is no longer in flight (a create that raised becomes a success);
        a destroy that raised whose node is gone is a success; drains, cancels and destroys done
        before the listing are forgotten (the listing's tags show them). Returns what settled."""
        now = self.clock()
        listed_at = now if polled_at is None else polled_at
        listing = list(nodes)
        out: list[Outcome] = []
        with self._lock:
            nodes, listed_ids, names = self._read_listing(listing)
            self._listed = len(nodes)
            self._name_seen.update(dict.fromkeys(names, listed_at))
            self._name_oldest = min(self._name_oldest, listed_at)
            if now - self._name_oldest >= NAME_QUARANTINE:  # else no name is old enough to forget
                self._name_seen = {k: t for k, t in self._name_seen.items() if now - t < NAME_QUARANTINE}
                self._name_oldest = min(self._name_seen.values(), default=math.inf)
            self._recent = {k: f for k, f in self._recent.items() if f.since >= listed_at}
            # most listings come with no boot waiting for one: nothing to settle
            listed, expired, _ = settle(self._boots.values(), nodes, now, BOOT_LISTING_TIMEOUT) \
                if self._boots else ((), (), ())
            for boot, node in listed:
                rid = boot.token
                del self._boots[rid]
                if rid in self._raised:
                    self._raised.discard(rid)
                    what = "was sent by a previous process" if rid in self._restored else "raised"
                    out.append(Outcome("boot", node.id, OK, f"create of request {request_words(rid)} "
                                       f"({boot.name}) {what} but the node is listed", now, boot.size,
                                       request=request_words(rid)))
                self._restored.discard(rid)
            for boot in expired:
                del self._boots[boot.token]
                self._booted.pop(boot.token, None)   # never listed: not a boot
                self._kept("boot", boot.token, None)
                self._raised.discard(boot.token)
                self._restored.discard(boot.token)
                out.append(Outcome("boot", boot.token, FAILED, f"requested {duration(now - boot.at)} ago "
                                   f"({boot.name}) and never listed; given up", now, boot.size,
                                   request=request_words(boot.token)))
            if listed or expired:
                self._save_journal()
            mono = self._mono()
            self._destroyed_at = {k: t for k, t in self._destroyed_at.items()
                                  if k in listed_ids or mono - t < DESTROY_SETTLE}
            for node_id, node in list(self._destroying.items()):
                if node_id not in listed_ids:
                    del self._destroying[node_id]
                    self._destroys[node_id] = now
                    self._kept("destroy", node_id, now)
                    out.append(Outcome("destroy", node_id, OK, "destroy raised but the node is gone "
                                       "from the listing", now, node.size, node.launched_at))
        return out

    def _read_listing(self, listing: list[CloudNode]) -> tuple[list[CloudNode], set[str], list[str]]:
        """The listing's nodes not gone, their ids and names (lock held); kept from the last
        listing when this one lists the very same node objects (most listings change nothing)."""
        last, read = self._last_listing
        if len(listing) != len(last) or not all(map(operator.is_, listing, last)):
            nodes = [n for n in listing if not is_gone(n)]
            read = (nodes, {n.id for n in nodes}, [n.name for n in nodes])
            self._last_listing = (listing, read)
        return read

    def _free_name(self, size: str, now: float) -> str:
        """The node name template filled with a ``{seq}`` no VM uses, so names stay within a small
        set (SLURM declares ``NodeName=<cluster>-<size>-[1-N]``): the lowest number not listed in
        the last :data:`NAME_QUARANTINE` seconds (one listing may miss a VM), not booting and not
        the name of a worker the scheduler still hears from (a VM no listing shows yet); in the
        first :data:`NAME_QUARANTINE` seconds after a start, a number above every one seen (a boot
        of the previous process may not be listed yet)."""
        cs = self.settings.cloud_of(self.settings.core.size(size))
        fill = cs.node_name_template.format(cluster=cs.cluster, size=size, seq="{SEQ}")
        pattern = re.compile(re.escape(fill).replace(re.escape("{SEQ}"), r"(\d+)"))
        used = set(self._name_seen) | {r.name for r in self._boots.values()} | self._heard_from()[1]
        seqs = {int(m.group(1)) for name in used if (m := pattern.fullmatch(name))}
        if now - self._started < NAME_QUARANTINE:
            seq = max(seqs, default=0) + 1
        else:
            seq = next(i for i in range(1, len(seqs) + 2) if i not in seqs)
        return fill.replace("{SEQ}", str(seq))

    def _restore(self, journal: ReservationJournal) -> None:
        """Take the reservations a previous process left in ``journal`` as boots in flight."""
        now = self.clock()
        found = journal.load()
        for r in found:
            # stamped after now (a clock that ran ahead, then stepped back): held from now on
            r = replace(r, at=min(r.at, now))
            self._boots[r.token] = r
            self._raised.add(r.token)       # its create's outcome is unknown: report it once listed
            self._restored.add(r.token)
        if found:
            log.info("%d boot reservation(s) of a previous process in %s held as booting until listed "
                     "(at most %.0fs): %s", len(found), journal.path, BOOT_LISTING_TIMEOUT,
                     ", ".join(f"{r.name} (request {r.token})" for r in found))

    def _record(self, reservation: Reservation) -> str | None:
        """Hold a boot's name and make its reservation durable before the create (lock held);
        return why it could not be made durable (then there is no create), or None."""
        if self.journal is not None:
            try:
                self.journal.record(reservation)
            except OSError as exc:
                return (f"its reservation could not be recorded in {self.journal.path}: "
                        f"{exc.strerror or exc} (no create without one)")
        self._boots[reservation.token] = reservation
        self._booted[reservation.token] = reservation.at
        self._kept("boot", reservation.token, reservation.at)
        return None

    def _save_journal(self) -> None:
        """Rewrite the journal with the boots not listed yet (lock held)."""
        if self.journal is None:
            return
        try:
            self.journal.keep(self._boots.values())
        except OSError as exc:
            log.warning("reservation journal %s not compacted: %s; listed boots stay in it until the "
                        "next rewrite", self.journal.path, exc.strerror or exc)

    def _remember(self, flight: InFlight) -> None:
        """Keep an action in flight until a listing taken after it shows its effect."""
        with self._lock:
            self._recent[flight.node] = flight

    def observe_poll(self, poll: SchedulerPoll) -> None:
        """Note a poll's workers: its newest ``last_heard`` is the reference for a lost worker
        (:meth:`freshest_heard`), and the workers still heard from hold their names."""
        with self._lock:
            self._polled, self._heard = (poll.workers, self.settings.core.node_stale_after), None

    def _heard_from(self) -> tuple[float | None, set[str]]:
        """The last poll's newest ``last_heard`` and the short names of its workers not lost
        (lock held)."""
        if self._heard is None:
            workers, stale = self._polled
            heard = [w.last_heard for w in workers if w.last_heard > 0]
            freshest = max(heard) if heard else None
            # a worker still heard from holds its name, even when a listing misses its VM
            alive = {w.name.split(".", 1)[0] for w in workers
                     if freshest is not None and w.last_heard > 0 and not is_lost(w, freshest, stale)}
            self._heard = (freshest, alive)
        return self._heard

    def freshest_heard(self) -> float | None:
        """The newest ``last_heard`` of the last poll (None: none yet): a worker is lost when it
        was heard from ``node_stale_after`` before that (measured within one poll, so a scheduler
        clock that runs behind ours does not make every worker look lost)."""
        with self._lock:
            return self._heard_from()[0]

    def _cloud_error(self, err: CloudError, key: str, size: str | None = None, which: str | None = None) -> str:
        """Apply what a cloud error teaches (to that cloud only: ``which`` or ``size``'s); return
        the words for the outcome."""
        now = self._mono()
        sized = self.settings.core.size(size) if size is not None else None
        cs = self.settings.cloud_of(sized) if which is None else next(
            (c for c in self.settings.clouds if c.name == which), self.settings.cloud)
        if err.kind is ErrorKind.RATE_LIMIT:
            delay = err.retry_after if err.retry_after else self.backoff.failed(key)
            self.backoff.hold_cloud(cs.name, now + delay)
            return f"{err}; no call to {f'cloud {cs.name}' if cs.name else 'the cloud'} for {delay:.0f}s"
        if err.kind is ErrorKind.CAPACITY and size is not None and cs.capacity_cooldown > 0:
            return f"{err}; " + self.breakers.capacity_error(size, self.clock(), str(err), cs.capacity_cooldown,
                                                             max(cs.capacity_max_cooldown, cs.capacity_cooldown))
        if err.kind in (ErrorKind.QUOTA, ErrorKind.CAPACITY) and size is not None:
            backoff = cs.quota_backoff
            if err.kind is ErrorKind.QUOTA and cs.name:
                # one named cloud's account is full: its sizes wait, the other clouds' go on
                same = [s.name for s in self.settings.core.sizes if s.cloud == cs.name]
                with self._lock:
                    self._blocked.update(dict.fromkeys(same, now + backoff))
                return f"{err}; sizes of cloud {cs.name} ({', '.join(same)}) not booted for {backoff:.0f}s"
            with self._lock:
                self._blocked[size] = now + backoff
                if err.kind is ErrorKind.QUOTA:
                    self._quota = (self._listed + len(self._boots), now)
            learned = self._quota if err.kind is ErrorKind.QUOTA else None
            what = f"quota learned: {learned[0]} nodes; " if learned else ""
            return f"{err}; {what}size {size} not booted for {backoff:.0f}s"
        delay = self.backoff.failed(key)
        return f"{err}; retry in {delay:.0f}s"
