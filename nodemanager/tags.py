"""The marks nodemanager leaves on what it manages, shared by the core and the adapters.

Cloud tag keys (``TAG_*``) are written on our VMs and are what survives a controller restart;
``DRAIN_REASON_PREFIX`` starts the reason of every drain we ask a scheduler for. They live here,
not in ``nodemanager.cloud`` or ``nodemanager.scheduler``, so the pure core can read them without
loading the adapters; ``nodemanager.cloud.port`` and ``nodemanager.scheduler.port`` re-export them.
"""

from __future__ import annotations

__all__ = ["TAG_CLUSTER", "TAG_SIZE", "TAG_REQUEST", "TAG_DRAIN", "TAG_DESTROY", "TAG_FENCE",
           "DRAIN_REASON_PREFIX"]

TAG_CLUSTER = "nodemanager-cluster"
TAG_SIZE = "nodemanager-size"
TAG_REQUEST = "nodemanager-request"
TAG_DRAIN = "nodemanager-drain"        # value: "<epoch>:<request id>" while we drain the node
TAG_DESTROY = "nodemanager-destroy"    # value: "<epoch>" once we decided to destroy the node
TAG_FENCE = "nodemanager-fence"        # value: the HA leader's fencing revision at its last mutation

# Every drain we start carries this reason prefix, so we can tell our drains from anyone else's.
DRAIN_REASON_PREFIX = "nodemanager"
