"""Who spent what: each node's paid time and money attributed to the users and groups whose jobs
ran on it. Pure.

The rule: a node's whole life (boot, idle and drain time included) is shared by the jobs it
served, pro rata by the core-seconds each (user, group) ran on it over that life; a node that
served no job is charged to :data:`NOBODY`. Over a window (``--since``), a node counts with the
part of its life inside the window, split by its whole life's shares. Money is node-hours at the
size's price per hour (no billing rounding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from nodemanager.model import JobOwner

__all__ = ["NodeUse", "SpendRow", "NOBODY", "NO_GROUP", "BY", "DAY", "accrue", "attribute", "top", "merge",
           "by_day"]

NOBODY = "(no job)"          # the user and group of a node that served no job
NO_GROUP = "(none)"          # a job the scheduler names no group for
BY = ("user", "group", "size", "node")
DAY = 86400.0                # the store sums closed nodes per UTC day (:func:`by_day`)
Key = tuple[str, str]        # (user, group)


@dataclass(frozen=True)
class NodeUse:
    """One node's life as the ledger saw it: ``start`` (launch) to ``end`` (last seen), and the
    core-seconds run on it per (user, group)."""

    node_id: str
    size: str
    price: float
    start: float
    end: float
    shares: Mapping[Key, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SpendRow:
    """One line of the answer: who (a user, group or size), node-hours and money attributed, and
    the core-hours their jobs ran."""

    name: str
    node_hours: float
    money: float
    core_hours: float


def accrue(shares: Mapping[Key, float], jobs: Sequence[JobOwner], seconds: float) -> dict[Key, float]:
    """``shares`` with ``seconds`` of ``jobs`` added (each job's cores times the seconds)."""
    out = dict(shares)
    if seconds <= 0:
        return out
    for j in jobs:
        if j.cores > 0:
            key = (j.user or NOBODY, j.group or NO_GROUP)
            out[key] = out.get(key, 0.0) + j.cores * seconds
    return out


def _name(by: str, key: Key, size: str, node_id: str) -> str:
    return key[0] if by == "user" else key[1] if by == "group" else size if by == "size" else node_id


def attribute(uses: Iterable[NodeUse], since: float, until: float, by: str) -> list[SpendRow]:
    """Node-hours and money per ``by`` (:data:`BY`) over [``since``, ``until``], dearest first."""
    if by not in BY:
        raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
    hours: dict[str, float] = {}
    money: dict[str, float] = {}
    cores: dict[str, float] = {}
    for u in uses:
        life = u.end - u.start
        inside = min(u.end, until) - max(u.start, since)
        if inside <= 0 or life <= 0:
            continue
        fraction = inside / life
        total = sum(u.shares.values())
        parts = [(k, cs / total) for k, cs in u.shares.items()] if total > 0 else [((NOBODY, NOBODY), 1.0)]
        for key, part in parts:
            name = _name(by, key, u.size, u.node_id)
            nh = inside / 3600.0 * part
            hours[name] = hours.get(name, 0.0) + nh
            money[name] = money.get(name, 0.0) + nh * u.price
            cores[name] = cores.get(name, 0.0) + u.shares.get(key, 0.0) * fraction / 3600.0
    return _ranked(SpendRow(name=n, node_hours=h, money=money[n], core_hours=cores[n]) for n, h in hours.items())


def _ranked(rows: Iterable[SpendRow]) -> list[SpendRow]:
    return sorted(rows, key=lambda r: (-r.money, -r.node_hours, r.name))


def merge(*parts: Iterable[SpendRow]) -> list[SpendRow]:
    """Rows of disjoint sets of nodes (the ledger's closed lives, its live ones) summed per name,
    dearest first: attribution adds up node by node."""
    out: dict[str, SpendRow] = {}
    for rows in parts:
        for r in rows:
            o = out.get(r.name)
            out[r.name] = r if o is None else SpendRow(name=r.name, node_hours=o.node_hours + r.node_hours,
                                                         money=o.money + r.money, core_hours=o.core_hours + r.core_hours)
    return _ranked(out.values())


def top(rows: Sequence[SpendRow], n: int, other: str = "other") -> list[SpendRow]:
    """The first ``n`` of ``rows`` and the rest summed into one row named ``other``."""
    if len(rows) <= n:
        return list(rows)
    rest = rows[n:]
    return [*rows[:n], SpendRow(name=other, node_hours=sum(r.node_hours for r in rest),
                                money=sum(r.money for r in rest), core_hours=sum(r.core_hours for r in rest))]


def by_day(use: NodeUse) -> list[tuple[int, str, str, float, float, float]]:
    """``use``'s :func:`attribute` over each UTC day it overlaps, by user, group and size:
    (day number, by, name, node-hours, money, core-hours). Summed over whole days, these are
    :func:`attribute` over those days (it adds up interval by interval)."""
    out = []
    day = int(use.start // DAY)
    while day * DAY < use.end:
        for by in BY[:3]:
            out += [(day, by, r.name, r.node_hours, r.money, r.core_hours)
                    for r in attribute((use,), day * DAY, (day + 1) * DAY, by)]
        day += 1
    return out
