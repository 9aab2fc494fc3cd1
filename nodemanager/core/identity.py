"""Whose VMs these are: the deployment a VM belongs to and the controller that last acted on it.

Pure rules over a listing (no I/O, no clock):

- :func:`sort_by_owner` splits the VMs carrying our cluster name into ours (our deployment tag,
  or no deployment tag and launched before our deployment id was made: adopted from a version
  that wrote none), VMs of another deployment (never touched, never counted), and VMs of ours
  that another controller acted on since this one started (two controllers of one deployment), or,
  under [HA], during this leader's term (a second leader: see :class:`Term`).
- :func:`joined_our_pool` finds VMs of another deployment whose workers joined our scheduler (a
  second controller of this pool under another id);
- :func:`another_controller` words the stop that follows, :func:`client_token` the EC2 idempotency
  token two controllers of one deployment send for the same boot.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable

from nodemanager.model import CloudNode, provider_id
from nodemanager.tags import TAG_CONTROLLER, TAG_DEPLOYMENT, TAG_FENCE

__all__ = ["Identity", "Ownership", "Term", "sort_by_owner", "joined_our_pool", "another_controller", "controller_tag",
           "parse_controller_tag", "client_token", "TOKEN_WINDOW"]

# seconds: a node name is not booted again within this long of its last listing, so a token made
# from the name and this window of the boot time is never reused for a later VM of that name
TOKEN_WINDOW = 600


@dataclass(frozen=True)
class Identity:
    """This process's identity as the cloud tags show it.

    ``deployment``: the deployment id; ``created_at``: when it was made (epoch seconds);
    ``controller``: ``host:pid:start`` of this process, ``started_at`` its start;
    ``one_controller``: False where several controllers of the deployment are expected ([HA]).
    """

    deployment: str
    created_at: float
    controller: str
    started_at: float
    one_controller: bool = True


@dataclass(frozen=True)
class Term:
    """This [HA] leader's term: its ``fence`` and its election's wall time ``since`` (epoch s).

    Another controller's mark on one of our VMs, dated after ``since``, is a second leader when it
    carries a higher fence (within one election a later term's fence is higher, and no later term
    exists while we act), and whatever its fence when dated more than ``tolerance`` seconds (the
    heads' clock skew) after ``since``."""

    fence: int
    since: float
    tolerance: float = 30.0


@dataclass(frozen=True)
class Ownership:
    """A listing sorted by owner (see :func:`sort_by_owner`)."""

    ours: tuple[CloudNode, ...] = ()
    adopted: tuple[CloudNode, ...] = ()          # among ours: no deployment tag (an older version's)
    foreign: tuple[CloudNode, ...] = ()          # another deployment's, with our cluster name
    # ours, acted on by another controller since this one started: (node, controller, epoch)
    others: tuple[tuple[CloudNode, str, float], ...] = ()


def controller_tag(controller: str, at: float) -> str:
    """The ``TAG_CONTROLLER`` value for an action of ``controller`` at ``at`` (epoch seconds)."""
    return f"{controller}@{int(at)}"


def parse_controller_tag(value: str) -> tuple[str, float] | None:
    """``(controller, epoch)`` from a ``TAG_CONTROLLER`` value, or None when it is not one."""
    controller, sep, at = value.rpartition("@")
    if not sep or not controller:
        return None
    try:
        return controller, float(at)
    except ValueError:
        return None


def sort_by_owner(nodes: Iterable[CloudNode], me: Identity, term: Term | None = None) -> Ownership:
    """Split a listing of our cluster name by owner. A VM with no deployment tag is ours only if it
    was launched before our deployment id was made (every VM we boot carries the tag since).
    ``term``: this process leads under [HA]; another leader's marks on ours are ``others``."""
    ours: list[CloudNode] = []
    adopted: list[CloudNode] = []
    foreign: list[CloudNode] = []
    others: list[tuple[CloudNode, str, float]] = []
    for node in nodes:
        tag = node.tags.get(TAG_DEPLOYMENT, "")
        if not tag:
            if node.launched_at < me.created_at:
                ours.append(node)
                adopted.append(node)
            else:
                foreign.append(node)
            continue
        if tag != me.deployment:
            foreign.append(node)
            continue
        ours.append(node)
        parsed = parse_controller_tag(node.tags.get(TAG_CONTROLLER, ""))
        if parsed is None or parsed[0] == me.controller:
            continue
        if (me.one_controller and parsed[1] > me.started_at) or (
                term is not None and _another_leader(node, parsed[1], term)):
            others.append((node, parsed[0], parsed[1]))
    return Ownership(ours=tuple(ours), adopted=tuple(adopted), foreign=tuple(foreign),
                     others=tuple(others))


def _another_leader(node: CloudNode, at: float, term: Term) -> bool:
    fence = node.tags.get(TAG_FENCE, "")
    return at > term.since and ((fence.isdigit() and int(fence) > term.fence) or at > term.since + term.tolerance)


def joined_our_pool(foreign: Iterable[CloudNode], cloud_ids: Iterable[str],
                    me: Identity) -> tuple[tuple[CloudNode, str, float], ...]:
    """VMs of another deployment whose worker joined our scheduler (its cloud id is among
    ``cloud_ids``): another controller boots for this very pool under another id (two head nodes
    with a state dir each and no shared ``deployment_id``). Empty where several are expected."""
    if not me.one_controller:
        return ()
    ids = set(cloud_ids)
    out = []
    for node in foreign:
        if provider_id(node) in ids:
            parsed = parse_controller_tag(node.tags.get(TAG_CONTROLLER, "")) or ("unknown", 0.0)
            out.append((node, parsed[0], parsed[1]))
    return tuple(out)


def another_controller(cluster: str, others: Iterable[tuple[CloudNode, str, float]]) -> str | None:
    """The stop reason when another controller acted on our VMs since we started, or None:
    ``another controller is acting on cluster X (VMs a, b booted or tagged by host Y pid P)``."""
    by: dict[str, list[str]] = {}
    for node, controller, _ in others:
        by.setdefault(controller, []).append(node.name)
    if not by:
        return None
    parts = []
    for controller, names in sorted(by.items()):
        host, _, rest = controller.partition(":")
        pid = rest.partition(":")[0]
        shown = ", ".join(sorted(names)[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        parts.append(f"VMs {shown} booted or tagged by host {host} pid {pid}")
    return f"another controller is acting on cluster {cluster} ({'; '.join(parts)})"


def client_token(deployment: str, name: str, at: float) -> str:
    """EC2's ``ClientToken`` for booting ``name`` at ``at``: the same for every controller of the
    deployment booting that name in the same :data:`TOKEN_WINDOW`, so the cloud makes one VM."""
    text = f"{deployment}|{name}|{int(at // TOKEN_WINDOW)}"
    return "nm-" + hashlib.sha256(text.encode()).hexdigest()[:40]
