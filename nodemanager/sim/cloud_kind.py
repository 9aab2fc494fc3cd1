"""``[Cloud] driver = simulated``: the in-process simulated cloud (built with the simulated pool
by :class:`nodemanager.sim.world.SimWorld`) as a :class:`~nodemanager.configuration.kinds.CloudKind`."""

from __future__ import annotations

from nodemanager.cloud.markets import market_problem
from nodemanager.configuration.kinds import CloudKind

__all__ = ["KIND"]

KIND = CloudKind(name="simulated", drivers=("simulated",), in_process=frozenset({"simulated"}), build=None,
                 image_required=lambda driver: False, market_problem=market_problem)
