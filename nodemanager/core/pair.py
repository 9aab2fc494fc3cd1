"""Pair cloud nodes with scheduler workers.

Rules, in order:

1. A worker that advertises a cloud instance id (HTCondor ``CloudInstanceID``, a SLURM node
   feature or comment...) pairs with the cloud node of that id, and with no other. Two workers
   advertising the same id: the node stays unpaired (ambiguous).
2. Otherwise a worker pairs by name: its name (or short name, before the first dot) equals the
   node's hostname or name (or their short forms), or its address equals the node's private IP.
   A worker that advertises an instance id is never matched by name (its id names its VM).
3. A name/address match whose worker record began (``registered_at``) before the VM was launched
   is refused: the hostname or address was recycled from an older VM, or (``registered_at`` 0)
   no daemon has registered under that name yet. ``None`` means the scheduler does not say: then
   a worker last heard (``last_heard``, 0: not reported) more than ``HEARD_SKEW`` seconds before
   the VM was launched is refused too (a record of an older VM under the same name or address).
4. More than one candidate worker for a node, or one worker claimed by more than one node:
   unpaired, with the reason.

Workers are indexed once, so pairing is linear in the number of nodes and workers. A
:class:`PairMemo` gives the last pairing back while what pairing reads stayed the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter, is_
from typing import Any, Iterable, Mapping, Sequence

from nodemanager.model import CloudNode, Worker
from nodemanager.text import duration

__all__ = ["Pairing", "PairMemo", "pair", "normalize_address", "by_id", "HEARD_SKEW"]

by_id = attrgetter("id")  # the sort key of cloud nodes: the core works on them in id order

# seconds the scheduler's clock may run behind the cloud's before "heard before launch" is believed
HEARD_SKEW = 5.0


@dataclass(frozen=True)
class Pairing:
    """``paired`` maps cloud node id → worker; ``reasons`` node id → how it was paired or why it
    was not; ``orphans`` are workers no cloud node claims (static nodes, or gone VMs)."""

    paired: Mapping[str, Worker]
    reasons: Mapping[str, str]
    orphans: tuple[Worker, ...]


def normalize_address(addr: str | None) -> str | None:
    """``<10.0.0.5:9618?...>`` or ``10.0.0.5`` → ``10.0.0.5`` (None stays None)."""
    if not addr:
        return None
    a = addr.strip()
    if a.startswith("<"):
        a = a[1:].split(">", 1)[0].split("?", 1)[0]
        if a.count(":") == 1:
            a = a.split(":", 1)[0]
    return a.lower() or None


_BY_ID = "paired by the cloud id the worker advertises"
_BY_NAME = "paired by name or address"


def _keys(value: str | None, out: list[str]) -> None:
    if value:
        v = value.lower()
        out.append(v)
        dot = v.find(".")
        if dot > 0:
            out.append(v[:dot])


def _fresh(w: Worker, launched_at: float) -> bool:
    """Can ``w`` be the record of a VM launched at ``launched_at`` (rule 3)?"""
    if w.registered_at is not None:
        return w.registered_at >= launched_at
    return not (0 < w.last_heard < launched_at - HEARD_SKEW)


# what pairing reads of a worker; last_heard only of a worker with no registered_at (rule 3)
_PAIRING_FIELDS = attrgetter("cloud_id", "name", "address", "registered_at")
_REGISTERED = attrgetter("registered_at")
_HEARD = attrgetter("last_heard")

# the pairing by worker index: paired node ids, their workers' indexes, reasons, orphans' indexes
_Found = tuple[list[str], list[int], dict[str, str], list[int]]


class PairMemo:
    """The last pairing, given back while its inputs stay the same: the very same cloud node
    objects in the same order (identity: the cloud poller hands back unchanged records as the
    same objects) and, in the same order, workers whose pairing fields are equal (cloud id,
    name, address, registered_at; last_heard too when a worker has no registered_at). The
    workers themselves may be new records: the pairing hands on this cycle's. Not thread-safe."""

    __slots__ = ("_nodes", "_workers", "_fields", "_found")

    def __init__(self) -> None:
        self._nodes: Sequence[CloudNode] = ()
        self._workers: list[Worker] = []
        self._fields: list[tuple[Any, ...]] | None = None  # the pairing fields of _workers, once read
        self._found: _Found | None = None

    def pair(self, cloud_nodes: Sequence[CloudNode], workers: Sequence[Worker]) -> Pairing:
        """:func:`pair` of these nodes and workers, reusing the last one's work if it can."""
        wlist = list(workers)
        found, last = self._found, self._nodes
        fields = None
        # the node listing first: when it changed, the workers' fields are not read at all
        if found is not None and len(cloud_nodes) == len(last) and all(map(is_, cloud_nodes, last)):
            fields = list(map(_PAIRING_FIELDS, wlist))
            before = self._fields if self._fields is not None else list(map(_PAIRING_FIELDS, self._workers))
            # equal fields: the same workers lack a registered_at, whose last_heard pairing reads
            if fields == before and (None not in map(_REGISTERED, wlist)
                                     or list(map(_HEARD, wlist)) == list(map(_HEARD, self._workers))):
                self._workers, self._fields = wlist, fields
                return _assemble(found, wlist)
        self._found = found = _match(cloud_nodes, wlist)
        self._nodes, self._workers, self._fields = cloud_nodes, wlist, fields
        return _assemble(found, wlist)


def pair(cloud_nodes: Iterable[CloudNode], workers: Iterable[Worker]) -> Pairing:
    """Pair nodes and workers by the rules in the module docstring (deterministic)."""
    wlist = list(workers)
    return _assemble(_match(cloud_nodes, wlist), wlist)


def _assemble(found: _Found, wlist: list[Worker]) -> Pairing:
    """The pairing of ``found`` (by worker index) with the workers of ``wlist``."""
    ids, index, reasons, orphans = found
    paired = dict(zip(ids, map(wlist.__getitem__, index)))
    return Pairing(paired, reasons, tuple(map(wlist.__getitem__, orphans)))


def _match(cloud_nodes: Iterable[CloudNode], wlist: list[Worker]) -> _Found:
    """The pairing, by worker index (see :data:`_Found`)."""
    nodes = sorted(cloud_nodes, key=by_id)
    by_cloud_id: dict[str, list[int]] = {}
    by_name: dict[str, list[int]] = {}
    by_addr: dict[str, list[int]] = {}
    for i, w in enumerate(wlist):
        if w.cloud_id:
            by_cloud_id.setdefault(w.cloud_id, []).append(i)
            continue
        keys: list[str] = []
        # HTCondor slot names look like slot1@host; the host part is what the cloud knows.
        _keys(w.name.rsplit("@", 1)[-1], keys)
        for key in keys:
            by_name.setdefault(key, []).append(i)
        a = normalize_address(w.address)
        if a:
            by_addr.setdefault(a, []).append(i)

    candidate: dict[str, int] = {}      # node id -> worker index
    owner: dict[int, str] = {}          # worker index -> the first node claiming it
    contested: dict[int, list[str]] = {}  # worker index -> every node claiming it, if several
    reasons: dict[str, str] = {}
    for n in nodes:
        ids = by_cloud_id.get(n.id)
        if ids:
            if len(ids) > 1:
                names = ", ".join(sorted(wlist[i].name for i in ids))
                reasons[n.id] = f"ambiguous: workers {names} all advertise cloud id {n.id}"
                continue
            i = ids[0]
            reasons[n.id] = _BY_ID
        else:
            keys = []
            _keys(n.name, keys)
            _keys(n.hostname, keys)
            found: set[int] = set()
            for key in keys:
                hit = by_name.get(key)
                if hit:
                    found.update(hit)
            if n.private_ip:
                hit = by_addr.get(normalize_address(n.private_ip) or "")
                if hit:
                    found.update(hit)
            if not found:
                reasons[n.id] = "no scheduler worker advertises its cloud id, name or address"
                continue
            fresh = [i for i in found if _fresh(wlist[i], n.launched_at)]
            if len(fresh) > 1:
                names = ", ".join(sorted(wlist[i].name for i in fresh))
                reasons[n.id] = f"ambiguous: workers {names} all match its name or address"
                continue
            if not fresh:
                w = min((wlist[j] for j in found), key=lambda w: w.name)
                if w.registered_at is None:
                    reasons[n.id] = (f"worker {w.name} was last heard {duration(n.launched_at - w.last_heard)} "
                                     "before this VM was launched (recycled name)")
                elif not w.registered_at:
                    reasons[n.id] = (f"worker {w.name} is known to the scheduler but has not "
                                     "registered since this VM was launched")
                else:
                    reasons[n.id] = (f"worker {w.name} registered {duration(n.launched_at - w.registered_at)} "
                                     "before this VM was launched (recycled name)")
                continue
            i = fresh[0]
            reasons[n.id] = _BY_NAME
        candidate[n.id] = i
        first = owner.setdefault(i, n.id)
        if first != n.id:
            contested.setdefault(i, [first]).append(n.id)

    node_ids: list[str] = []
    index: list[int] = []
    for node_id, i in candidate.items():
        if i in contested:
            reasons[node_id] = (f"ambiguous: worker {wlist[i].name} matches nodes "
                                f"{', '.join(sorted(contested[i]))}")
            continue
        node_ids.append(node_id)
        index.append(i)
    if len(index) == len(wlist):
        return node_ids, index, reasons, []  # each paired worker is another one: no orphan
    used = set(index)
    orphans = sorted((i for i in range(len(wlist)) if i not in used),
                     key=lambda i: (wlist[i].name, wlist[i].cloud_id or "", wlist[i].address or ""))
    return node_ids, index, reasons, orphans
