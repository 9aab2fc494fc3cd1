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
5. A node no worker pairs with, whose name or address a worker answers to that advertises
   another cloud id (one of no live listed VM), registered since the node's VM was launched: a
   conflict. That worker may well be the node's (a boot script that left the previous VM's
   ``instance-id`` in a SLURM comment, a startd with a wrong ``CloudInstanceID``), so whether the
   node runs jobs is unknown: the node is left alone (``conflicts``) until the ids agree.

Workers are indexed once, so pairing is linear in the number of nodes and workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Iterable, Mapping

from nodemanager.model import GONE_STATES, CloudNode, Worker, provider_id
from nodemanager.text import duration

__all__ = ["Pairing", "pair", "candidates", "normalize_address", "by_id", "HEARD_SKEW"]

by_id = attrgetter("id")  # the sort key of cloud nodes: the core works on them in id order

# seconds the scheduler's clock may run behind the cloud's before "heard before launch" is believed
HEARD_SKEW = 5.0


@dataclass(frozen=True)
class Pairing:
    """``paired`` maps cloud node id → worker; ``reasons`` node id → how it was paired or why it
    was not; ``orphans`` are workers no cloud node claims (static nodes, or gone VMs);
    ``ambiguous`` the ids of nodes left unpaired because several workers or nodes match (rules 1
    and 4): which worker is theirs, and so whether they run jobs, is unknown; ``conflicts`` the
    ids of nodes a worker carrying another cloud id answers for by name or address (rule 5)."""

    paired: Mapping[str, Worker]
    reasons: Mapping[str, str]
    orphans: tuple[Worker, ...]
    ambiguous: frozenset[str] = frozenset()
    conflicts: frozenset[str] = frozenset()


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


def _same_name(node: CloudNode, ids: list[int], workers: list[Worker]) -> list[int]:
    """Of the workers ``ids`` that advertise ``node``'s id, those whose name is the node's (all of
    them when none or several are: still ambiguous)."""
    keys: list[str] = []
    _keys(node.name, keys)
    _keys(node.hostname, keys)
    named = []
    for i in ids:
        mine: list[str] = []
        _keys(workers[i].name.rsplit("@", 1)[-1], mine)
        if set(keys).intersection(mine):
            named.append(i)
    return named if len(named) == 1 else ids


def _fresh(w: Worker, launched_at: float) -> bool:
    """Can ``w`` be the record of a VM launched at ``launched_at`` (rule 3)?"""
    if w.registered_at is not None:
        return w.registered_at >= launched_at
    return not (0 < w.last_heard < launched_at - HEARD_SKEW)


def _names_of(node: CloudNode) -> tuple[set[str], str | None]:
    keys: list[str] = []
    _keys(node.name, keys)
    _keys(node.hostname, keys)
    return set(keys), normalize_address(node.private_ip)


def _answers_to(w: Worker, names: set[str], addr: str | None) -> bool:
    """Does ``w`` carry one of ``names`` or the address ``addr`` (rule 2's match, whatever id it has)?"""
    mine: list[str] = []
    _keys(w.name.rsplit("@", 1)[-1], mine)
    return bool(names.intersection(mine)) or (addr is not None and normalize_address(w.address) == addr)


def candidates(node: CloudNode, workers: Iterable[Worker]) -> list[Worker]:
    """Every worker that could be ``node``'s: its cloud id, or its name or address whatever cloud
    id the worker advertises (a stale or wrong id names another VM), however old its record: what
    must be idle before the node is destroyed without a drain of ours."""
    names, addr = _names_of(node)
    return [w for w in workers if w.cloud_id == provider_id(node) or _answers_to(w, names, addr)]


def _conflict(node: CloudNode, id_workers: list[Worker], live: set[str]) -> Worker | None:
    """Rule 5: a worker with another cloud id, of no live listed VM, that answers to ``node``'s
    name or address and registered since its launch (None: none)."""
    names, addr = _names_of(node)
    found = [w for w in id_workers if w.cloud_id != provider_id(node) and w.cloud_id not in live
             and w.registered_at is not None and w.registered_at >= node.launched_at
             and _answers_to(w, names, addr)]
    return min(found, key=lambda w: w.name) if found else None


def pair(cloud_nodes: Iterable[CloudNode], workers: Iterable[Worker]) -> Pairing:
    """Pair nodes and workers by the rules in the module docstring (deterministic)."""
    nodes = sorted(cloud_nodes, key=by_id)
    wlist = list(workers)
    by_cloud_id: dict[str, list[int]] = {}
    by_name: dict[str, list[int]] = {}
    by_addr: dict[str, list[int]] = {}
    id_workers: list[Worker] = []
    for i, w in enumerate(wlist):
        if w.cloud_id:
            by_cloud_id.setdefault(w.cloud_id, []).append(i)
            id_workers.append(w)
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
    ambiguous: set[str] = set()
    for n in nodes:
        ids = by_cloud_id.get(provider_id(n) if n.cloud else n.id)
        if ids and len(ids) > 1 and n.cloud:
            ids = _same_name(n, ids, wlist)  # several clouds may give VMs the same id: the name tells
        if ids:
            if len(ids) > 1:
                names = ", ".join(sorted(wlist[i].name for i in ids))
                reasons[n.id] = f"ambiguous: workers {names} all advertise cloud id {n.id}"
                ambiguous.add(n.id)
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
                ambiguous.add(n.id)
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

    paired: dict[str, Worker] = {}
    for node_id, i in candidate.items():
        if i in contested:
            reasons[node_id] = (f"ambiguous: worker {wlist[i].name} matches nodes "
                                f"{', '.join(sorted(contested[i]))}")
            ambiguous.add(node_id)
            continue
        paired[node_id] = wlist[i]
    conflicts: set[str] = set()
    if id_workers and len(paired) + len(ambiguous) < len(nodes):
        live = {provider_id(n) for n in nodes if n.state not in GONE_STATES}
        for n in nodes:
            if n.id in paired or n.id in ambiguous:
                continue
            other = _conflict(n, id_workers, live)
            if other is not None:
                reasons[n.id] = (f"conflict: worker {other.name} answers to its name or address but says it "
                                 f"is instance {other.cloud_id}: which VM runs its jobs is unknown")
                conflicts.add(n.id)
    if len(paired) == len(wlist):  # each paired worker is another one: no orphan
        return Pairing(paired, reasons, (), frozenset(ambiguous), frozenset(conflicts))
    used = {i for node_id, i in candidate.items() if i not in contested}
    orphans = tuple(sorted((w for i, w in enumerate(wlist) if i not in used),
                           key=lambda w: (w.name, w.cloud_id or "", w.address or "")))
    return Pairing(paired, reasons, orphans, frozenset(ambiguous), frozenset(conflicts))
