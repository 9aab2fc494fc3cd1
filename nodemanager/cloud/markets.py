"""The markets a size can be bought on (``[Size NAME] market``), and what each driver supports.

``on-demand`` is bought everywhere. ``spot`` is capacity the cloud may take back with a short
notice, at a lower price: EC2 spot (``InstanceMarketOptions``, with ``max_price`` as
``SpotOptions.MaxPrice``), GCE preemptible (``scheduling.preemptible``: libcloud 3.9.1 knows no
``provisioningModel: SPOT``, so these are legacy preemptible VMs, stopped after 24 h at the latest),
and the simulated cloud. Azure spot needs ``priority``/``evictionPolicy``, which libcloud 3.9.1's
azure_arm ``create_node`` cannot send; OpenStack has no spot market; libcloud's dummy driver none.
"""

from __future__ import annotations

from typing import Any

from nodemanager.cloud.port import CloudError, ErrorKind
from nodemanager.model import Size

__all__ = ["ON_DEMAND", "SPOT", "MARKETS", "market_problem", "market_create_kwargs"]

ON_DEMAND, SPOT = "on-demand", "spot"
MARKETS = (ON_DEMAND, SPOT)

_SPOT_DRIVERS = frozenset({"ec2", "gce", "simulated"})
_MAX_PRICE_DRIVERS = frozenset({"ec2", "simulated"})
_WHY_NOT = {
    "azure_arm": "libcloud 3.9.1's azure_arm create_node cannot send priority/evictionPolicy, "
                 "so it would boot an on-demand VM at the on-demand price",
    "openstack": "OpenStack has no spot market",
    "dummy": "libcloud's dummy driver has no spot market",
}


def market_problem(driver: str, size: Size) -> tuple[str, str] | None:
    """(option, why) when ``[Cloud] driver`` cannot buy ``size`` as configured, else None."""
    if size.market == SPOT and driver not in _SPOT_DRIVERS:
        return "market", f"spot is not offered for driver {driver}: {_WHY_NOT.get(driver, 'unknown driver')}"
    if size.interruptions_per_day and size.market != SPOT:
        return "interruptions_per_day", "only a spot size is interrupted"
    if size.max_price is not None:
        if size.market != SPOT:
            return "max_price", "only a spot size takes a max_price"
        if driver not in _MAX_PRICE_DRIVERS:
            return "max_price", f"driver {driver} takes no max price for spot capacity"
    return None


def market_create_kwargs(provider: str, size: Size) -> dict[str, Any]:
    """The libcloud ``create_node`` keyword arguments that buy ``size`` on its market."""
    if size.market != SPOT:
        return {}
    if provider == "ec2":
        return {"ex_spot": True, "ex_spot_max_price": size.max_price}
    if provider == "gce":
        return {"ex_preemptible": True}
    # the config refuses this at start (market_problem); an adapter raises only CloudError
    raise CloudError(ErrorKind.PERMANENT, f"[Size {size.name}] market: spot is not offered for "
                     f"driver {provider}", call="create_node")
