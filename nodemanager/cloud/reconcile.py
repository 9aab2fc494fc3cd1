"""Pure helpers that settle a cloud call that raised, using the next listing.

A create can fail on our side (timeout, 5xx) after the cloud made the VM; a destroy can fail after
the cloud terminated it. The daemon keeps the request id of a failed create (and the id of a failed
destroy) and asks, with the next ``list_nodes()`` result it takes anyway, whether the call in fact
succeeded. No extra API call is made, and eventual consistency is handled by asking again next
cycle.
"""

from __future__ import annotations

from typing import Iterable

from nodemanager.model import GONE_STATES, CloudNode, is_gone
from nodemanager.tags import TAG_REQUEST

__all__ = ["GONE_STATES", "is_gone", "reconcile_create", "reconcile_destroy"]

def reconcile_create(listing: Iterable[CloudNode], request_id: str,
                     name: str | None = None) -> CloudNode | None:
    """The node a create with ``request_id`` made after all, or None.

    A node matches by its request-id tag; a node without that tag matches by ``name`` (clouds
    that lost the tags, or nodes created before tagging). A terminated match counts as not created.
    """
    by_name = None
    for node in listing:
        if is_gone(node):
            continue
        tag = node.tags.get(TAG_REQUEST)
        if tag == request_id:
            return node
        if tag is None and name is not None and node.name == name:
            by_name = node
    return by_name


def reconcile_destroy(listing: Iterable[CloudNode], node_id: str) -> bool:
    """True when the node ``node_id`` is gone from ``listing`` (or listed as terminated)."""
    return all(node.id != node_id or is_gone(node) for node in listing)
