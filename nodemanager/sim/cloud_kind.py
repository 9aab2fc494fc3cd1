"""``[Cloud] driver = simulated``: the in-process simulated cloud (built with the simulated pool
by :class:`nodemanager.sim.world.SimWorld`) as a :class:`~nodemanager.cloud.kinds.CloudKind`."""

from __future__ import annotations

from nodemanager.cloud.kinds import CloudKind

__all__ = ["KIND"]

KIND = CloudKind(name="simulated", drivers=("simulated",), in_process=frozenset({"simulated"}), build=None)
