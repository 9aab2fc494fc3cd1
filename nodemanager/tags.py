"""The marks nodemanager leaves on what it manages, shared by the core and the adapters.

Cloud tag keys (``TAG_*``) are written on our VMs and are what survives a controller restart;
``DRAIN_REASON_PREFIX`` starts the reason of every drain we ask a scheduler for. They live here,
not in ``nodemanager.cloud`` or ``nodemanager.scheduler``, so the pure core can read them without
loading the adapters; ``nodemanager.cloud.port`` and ``nodemanager.scheduler.port`` re-export them.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

__all__ = ["TAG_CLUSTER", "TAG_SIZE", "TAG_REQUEST", "TAG_DRAIN", "TAG_DESTROY", "TAG_FENCE",
           "TAG_SETTINGS", "TAG_PRICE", "DRAIN_REASON_PREFIX", "settings_digest", "price_tag"]

TAG_CLUSTER = "nodemanager-cluster"
TAG_SIZE = "nodemanager-size"
TAG_REQUEST = "nodemanager-request"
TAG_DRAIN = "nodemanager-drain"        # value: "<epoch>:<request id>" while we drain the node
TAG_DESTROY = "nodemanager-destroy"    # value: "<epoch>" once we decided to destroy the node
TAG_FENCE = "nodemanager-fence"        # value: the HA leader's fencing revision at its last mutation
TAG_SETTINGS = "nodemanager-settings"  # value: settings_digest of its size's settings at boot
TAG_PRICE = "nodemanager-price"        # value: its size's price per hour at boot (counted if the size goes)

# Every drain we start carries this reason prefix, so we can tell our drains from anyone else's.
DRAIN_REASON_PREFIX = "nodemanager"


def settings_digest(size: Any, create_args: Mapping[str, str]) -> str:
    """A short digest of what a VM of ``size`` is booted as (its instance type, cores, memory,
    scratch, and the ``[Cloud Create]`` options such as the image; not its price or billing): a
    VM whose tag differs was booted under other settings."""
    what = (size.cloud_type, size.cores, size.ram_mb, size.scratch_mb)
    text = repr((what, sorted(create_args.items())))
    return hashlib.sha256(text.encode()).hexdigest()[:16]

def price_tag(price: float) -> str:
    """The ``TAG_PRICE`` value for a price per hour (read back by ``core.pricing.node_price``)."""
    return format(price, ".12g")


# Whose VM it is: the deployment that booted it (an id made at a deployment's first start), and
# the controller process that last acted on it ("host:pid:start@epoch of that action").
TAG_DEPLOYMENT = "nodemanager-deployment"
TAG_CONTROLLER = "nodemanager-controller"
__all__ += ["TAG_DEPLOYMENT", "TAG_CONTROLLER"]
