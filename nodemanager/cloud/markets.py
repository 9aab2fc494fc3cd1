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
from nodemanager.cloud.providers import PROVIDER_TABLE
from nodemanager.model import Size

__all__ = ["ON_DEMAND", "SPOT", "MARKETS", "market_problem", "market_create_kwargs"]

ON_DEMAND, SPOT = "on-demand", "spot"
MARKETS = (ON_DEMAND, SPOT)

# the simulated cloud sells spot capacity with a max price; libcloud providers as their row says
_SIMULATED = "simulated"


def market_problem(driver: str, size: Size) -> tuple[str, str] | None:
    """(option, why) when ``[Cloud] driver`` cannot buy ``size`` as configured, else None."""
    provider = PROVIDER_TABLE.get(driver)
    if size.market == SPOT and driver != _SIMULATED and (provider is None or provider.spot_kwargs is None):
        why = provider.no_spot if provider is not None else "unknown driver"
        return "market", f"spot is not offered for driver {driver}: {why}"
    if size.interruptions_per_day and size.market != SPOT:
        return "interruptions_per_day", "only a spot size is interrupted"
    if size.max_price is not None:
        if size.market != SPOT:
            return "max_price", "only a spot size takes a max_price"
        if driver != _SIMULATED and (provider is None or not provider.spot_max_price):
            return "max_price", f"driver {driver} takes no max price for spot capacity"
    return None


def market_create_kwargs(provider: str, size: Size) -> dict[str, Any]:
    """The libcloud ``create_node`` keyword arguments that buy ``size`` on its market."""
    if size.market != SPOT:
        return {}
    row = PROVIDER_TABLE.get(provider)
    if row is not None and row.spot_kwargs is not None:
        return row.spot_kwargs(size)
    # the config refuses this at start (market_problem); an adapter raises only CloudError
    raise CloudError(ErrorKind.PERMANENT, f"[Size {size.name}] market: spot is not offered for "
                     f"driver {provider}", call="create_node")
