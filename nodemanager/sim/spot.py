"""The simulator's spot market: a cheaper copy of a size that the cloud takes back.

Assumptions (documented in docs/simulator.md):

* a spot size costs ``price_factor`` x the on-demand price, flat (EC2's spot price moves slowly
  and is capped at on-demand; Arvados prices its preemptible copies the same way);
* each running spot VM is reclaimed at a constant rate of ``interruptions_per_day`` (a memoryless
  draw per VM: the time to reclaim is exponential). The EC2 Spot Advisor publishes monthly
  frequency bands: "<5 %", "5-10 %", "10-15 %", "15-20 %", ">20 %" of instances interrupted per
  month; read as a constant hazard λ = −ln(1 − p) / 730 h, "<5 %" is at most 0.0017 per VM-day,
  ">20 %" at least 0.0073; real reclaims cluster in time, which this model does not;
* the notice comes ``notice`` seconds (EC2: 120) before the reclaim; a VM reclaimed sooner after
  it came up gets its notice at once; at the reclaim the VM is terminated and its running jobs
  are killed and requeued (a one-time spot request, what libcloud asks for);
* draws are deterministic: each VM's reclaim time comes from ``seed`` and its node id alone.
"""

from __future__ import annotations

import random
from typing import Mapping
from dataclasses import replace
from nodemanager.model import Size

__all__ = ["SpotModel", "spot_size", "spot_sizes", "NOTICE"]

NOTICE = 120.0  # seconds: EC2's two-minute warning
_DAY = 86400.0


def spot_size(base: Size, price_factor: float, interruptions_per_day: float) -> Size:
    """The spot copy of ``base`` that ``--spot-price-factor`` and ``--spot-interruptions-per-day``
    add beside it: named ``<base>-spot``, same shape and billing."""
    return replace(base, name=f"{base.name}-spot", instance_type="", price=base.price * price_factor,
                   market="spot", interruptions_per_day=interruptions_per_day)


def spot_sizes(sizes: tuple[Size, ...], factor: float | None, rate: float, told: float | None) -> tuple[Size, ...]:
    """``simulate``'s spot copies: one beside each on-demand size at ``factor`` x its price (None:
    none), configured with ``told`` reclaims per VM-day (None: ``rate``, the market's own);
    ValueError naming the option for a value out of range."""
    if factor is None:
        if rate:
            raise ValueError("--spot-interruptions-per-day needs --spot-price-factor")
        return ()
    if not 0 < factor <= 1 or rate < 0 or (told is not None and told < 0):
        raise ValueError("--spot-price-factor must be above 0 and at most 1, --spot-interruptions-per-day "
                         "and --spot-configured-rate at least 0")
    return tuple(spot_size(s, factor, rate if told is None else told) for s in sizes if s.market != "spot")


class SpotModel:
    """When the cloud gives notice and reclaims each spot VM (see the module doc)."""

    def __init__(self, *, seed: int = 1, notice: float = NOTICE, rate_per_day: float | None = None,
                 by_size: Mapping[str, float] | None = None) -> None:
        self.seed = seed
        self.notice = notice
        self.rate_per_day = rate_per_day   # the market's own rate (None: what each size is configured with)
        self.by_size = dict(by_size or {})  # size -> its own market's rate (several clouds), over both

    def events(self, node_id: str, size: Size, running_at: float) -> list[tuple[float, float | None]]:
        """``[(notice time, deadline), (reclaim time, None)]`` for a VM of ``size`` running
        since ``running_at``; nothing for an on-demand size or a zero rate."""
        rate = size.interruptions_per_day if self.rate_per_day is None else self.rate_per_day
        rate = self.by_size.get(size.name, rate)
        if size.market != "spot" or rate <= 0:
            return []
        rng = random.Random(f"{self.seed}:{node_id}")
        at = running_at + rng.expovariate(rate / _DAY)
        return [(max(running_at, at - self.notice), at), (at, None)]
