"""Cloud side of the controller: the port, the libcloud adapter, error classification, the rate
limit and the helpers that settle failed creates/destroys from the next listing.

The surface: the port (:class:`CloudDriver`, :class:`CloudError`, :class:`ErrorKind`, the
``TAG_*`` keys, ``PROVIDERS``, :func:`image_required`); :class:`TokenBucket`; reconciliation
(``GONE_STATES``, :func:`is_gone`, :func:`reconcile_create`, :func:`reconcile_destroy`); and,
loaded on first use so importing this package does not import libcloud, :class:`LibcloudCloud`
and the error classifier :func:`classify`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodemanager.cloud.port import (PROVIDERS, TAG_CLUSTER, TAG_DESTROY, TAG_DRAIN, TAG_FENCE,
                                    TAG_REQUEST, TAG_SIZE, CloudDriver, CloudError, ErrorKind,
                                    image_required)
from nodemanager.cloud.ratelimit import TokenBucket
from nodemanager.cloud.reconcile import GONE_STATES, is_gone, reconcile_create, reconcile_destroy

if TYPE_CHECKING:
    from nodemanager.cloud.errors import classify
    from nodemanager.cloud.libcloud_driver import LibcloudCloud

__all__ = ["CloudDriver", "CloudError", "ErrorKind", "TAG_CLUSTER", "TAG_SIZE", "TAG_REQUEST",
           "TAG_DRAIN", "TAG_DESTROY", "TAG_FENCE", "PROVIDERS", "image_required", "TokenBucket",
           "GONE_STATES", "is_gone", "reconcile_create", "reconcile_destroy", "LibcloudCloud",
           "classify"]


def __getattr__(name: str) -> Any:
    if name == "LibcloudCloud":
        from nodemanager.cloud.libcloud_driver import LibcloudCloud
        return LibcloudCloud
    if name == "classify":
        from nodemanager.cloud.errors import classify
        return classify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
