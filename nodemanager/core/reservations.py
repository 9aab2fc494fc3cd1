"""Boot reservations: the name, size and request token of a create, recorded durably before the
create is sent (:mod:`nodemanager.cycle.journal` keeps the file), so that a process that dies right
after a create, and whose successor's first listing misses the new VM (EC2 lists a new instance
only after a while), neither gives that name to a second VM nor boots again for the same demand.

Everything here is pure. A reservation is *open* (its name taken, its boot in flight) until a
listing shows its VM — by the request-id tag, which is also EC2's ``ClientToken``, or by name for a
node that carries no request tag — or until it is older than the hold (the longest listing lag
tolerated, :data:`nodemanager.cycle.actuate.BOOT_LISTING_TIMEOUT`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from nodemanager.model import CloudNode, InFlight, is_gone
from nodemanager.tags import TAG_REQUEST

__all__ = ["Reservation", "Settled", "settle", "to_line", "from_line"]


@dataclass(frozen=True, slots=True)
class Reservation:
    """One create, as recorded before it was sent."""

    token: str      # the request id: the TAG_REQUEST tag and EC2's ClientToken
    name: str
    size: str
    at: float       # when the create was decided (epoch seconds)

    def in_flight(self) -> InFlight:
        """The boot as the planner counts it while no listing shows it."""
        return InFlight(node=self.token, action="boot", since=self.at, size=self.size, request_id=self.token)


class Settled(NamedTuple):
    """:func:`settle`'s answer: reservations whose VM is listed (with the node), those given up
    (older than the hold and never listed), and those still open."""

    listed: tuple[tuple[Reservation, CloudNode], ...]
    expired: tuple[Reservation, ...]
    open: tuple[Reservation, ...]


_NONE = Settled((), (), ())


def settle(reservations: Iterable[Reservation], listing: Iterable[CloudNode], now: float,
           hold: float) -> Settled:
    """Split ``reservations`` by what ``listing`` (taken at ``now``) shows; terminated nodes do
    not count as showing a reservation's VM."""
    reservations = tuple(reservations)
    if not reservations:
        return _NONE  # most cycles: nothing to look for, no listing to index
    by_token: dict[str, CloudNode] = {}
    untagged: dict[str, CloudNode] = {}
    for node in listing:
        if is_gone(node):
            continue
        tag = node.tags.get(TAG_REQUEST)
        if tag:
            by_token[tag] = node
        else:
            untagged.setdefault(node.name, node)
    listed: list[tuple[Reservation, CloudNode]] = []
    expired: list[Reservation] = []
    still: list[Reservation] = []
    for r in reservations:
        found = by_token.get(r.token) or untagged.get(r.name)
        if found is not None:
            listed.append((r, found))
        elif now - r.at > hold:
            expired.append(r)
        else:
            still.append(r)
    return Settled(tuple(listed), tuple(expired), tuple(still))


def to_line(r: Reservation) -> str:
    """One journal line (JSON, no newline)."""
    return json.dumps({"token": r.token, "name": r.name, "size": r.size, "at": r.at}, sort_keys=True)


def from_line(text: str) -> Reservation:
    """Parse a journal line; ValueError says what is wrong with it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    missing = [k for k in ("token", "name", "size", "at") if k not in data]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if not all(isinstance(data[k], str) and data[k] for k in ("token", "name", "size")):
        raise ValueError("token, name and size must be non-empty strings")
    if not isinstance(data["at"], (int, float)) or isinstance(data["at"], bool):
        raise ValueError("at must be a number")
    return Reservation(token=data["token"], name=data["name"], size=data["size"], at=float(data["at"]))
