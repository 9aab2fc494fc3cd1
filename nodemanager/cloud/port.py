"""The cloud port: what the controller needs from a cloud, whatever the provider.

Adapters (libcloud, the simulated cloud) implement :class:`CloudDriver` and raise only
:class:`CloudError`, classified so the controller knows whether to retry, back off or stop booting.
"""

from __future__ import annotations

import enum
from typing import Mapping, Protocol, runtime_checkable

from nodemanager.cloud.providers import PROVIDER_TABLE
from nodemanager.model import CloudNode, Size
from nodemanager.tags import (TAG_CLUSTER, TAG_DESTROY, TAG_DRAIN, TAG_FENCE, TAG_REQUEST,
                              TAG_SIZE)

__all__ = ["CloudDriver", "CloudError", "ErrorKind", "TAG_CLUSTER", "TAG_SIZE", "TAG_REQUEST",
           "TAG_DRAIN", "TAG_DESTROY", "TAG_FENCE", "PROVIDERS", "image_required"]

# The libcloud providers the adapter supports (``[Cloud] driver``; ``simulated`` is the other choice).
PROVIDERS = tuple(PROVIDER_TABLE)


def image_required(driver: str) -> bool:
    """Whether ``[Cloud Create] image`` must be set for this ``[Cloud] driver``."""
    provider = PROVIDER_TABLE.get(driver)
    return provider is not None and provider.image_required




class ErrorKind(str, enum.Enum):
    QUOTA = "quota"            # account limit reached: learn the quota, stop booting for a while
    CAPACITY = "capacity"      # the provider has no capacity for this size now: stop booting it
    RATE_LIMIT = "rate_limit"  # throttled: wait retry_after (or back off)
    TRANSIENT = "transient"    # timeouts, 5xx, connection errors: retry with backoff
    NOT_FOUND = "not_found"    # the node is gone (a destroy of it succeeded)
    PERMANENT = "permanent"    # bad request, auth, unknown image: report, do not retry

    def __str__(self) -> str:
        return self.value


class CloudError(Exception):
    """A classified cloud failure. ``retry_after`` is seconds the cloud asked us to wait."""

    def __init__(self, kind: ErrorKind, message: str, *, retry_after: float | None = None,
                 call: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after
        self.call = call

    def __str__(self) -> str:
        where = f"{self.call}: " if self.call else ""
        return f"{where}{self.kind}: {self.args[0]}"


@runtime_checkable
class CloudDriver(Protocol):
    def list_nodes(self) -> list[CloudNode]:
        """All of this cluster's nodes (one API call per page, filtered by the cluster tag)."""

    def create_node(self, size: Size, name: str, tags: Mapping[str, str]) -> CloudNode:
        """Boot one node with these tags (which include the boot request id)."""

    def destroy_node(self, node: CloudNode) -> None:
        """Destroy the node; a node already gone is success."""

    def set_tags(self, node: CloudNode, tags: Mapping[str, str]) -> None:
        """Set (or, with an empty value, remove) tags on the node."""
