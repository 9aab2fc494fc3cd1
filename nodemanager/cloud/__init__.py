"""Cloud side of the controller: the port (``port``), the libcloud adapter, error classification,
the rate limit and the helpers that settle failed creates/destroys from the next listing.

``LibcloudCloud`` is imported on first use, so importing this package does not import libcloud.
"""

from __future__ import annotations

from typing import Any

from nodemanager.cloud.port import (TAG_CLUSTER, TAG_DESTROY, TAG_DRAIN, TAG_REQUEST, TAG_SIZE,
                                    CloudDriver, CloudError, ErrorKind)
from nodemanager.cloud.ratelimit import TokenBucket
from nodemanager.cloud.reconcile import GONE_STATES, is_gone, reconcile_create, reconcile_destroy

__all__ = ["CloudDriver", "CloudError", "ErrorKind", "TAG_CLUSTER", "TAG_SIZE", "TAG_REQUEST",
           "TAG_DRAIN", "TAG_DESTROY", "TokenBucket", "GONE_STATES", "is_gone",
           "reconcile_create", "reconcile_destroy", "LibcloudCloud", "classify"]


def __getattr__(name: str) -> Any:
    if name == "LibcloudCloud":
        from nodemanager.cloud.libcloud_driver import LibcloudCloud
        return LibcloudCloud
    if name == "classify":
        from nodemanager.cloud.errors import classify
        return classify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
