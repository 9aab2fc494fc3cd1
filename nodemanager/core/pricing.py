"""What a size is expected to cost for a job, counting spot reclaims. Pure.

A spot size is cheaper per hour but may be taken back: a job on it is killed and runs again from
the start elsewhere (work re-run), and each reclaim costs ``[Daemon] reclaim_penalty`` of node
time on top (requeue, restart, the notice window). With reclaims at a constant rate λ per hour
(``[Size] interruptions_per_day`` / 24) a job asking for ``T`` hours of walltime needs, on average,
``(e^{λT} − 1) / λ`` hours of node time and meets ``e^{λT} − 1`` reclaims, so its expected price
per hour of useful work is::

    price × ((e^{λT} − 1) / λ + penalty × (e^{λT} − 1)) / T

which grows fast with ``T``: long jobs go to on-demand, short ones to spot. Without a walltime
(the scheduler gave none) the factor is its short-job limit, ``1 + λ × penalty``. An on-demand
size (λ = 0) costs its price.
"""

from __future__ import annotations

import math

from nodemanager.model import Size

__all__ = ["expected_price", "reclaim_rate", "effective_price"]

_HOUR = 3600.0
_MAX_EXPONENT = 50.0  # e^50: a job that would practically never finish on this size


def effective_price(price: float, override: float | None, licence: float) -> float:
    """A size's price per node-hour for every decision and figure (size choice, ``max_total_price``,
    spend metrics, the simulator): ``[Size] price_override`` (a reservation or savings plan rate)
    in place of the configured ``price``, plus ``licence_price`` per VM-hour."""
    return (price if override is None else override) + licence


def reclaim_rate(size: Size) -> float:
    """Reclaims per hour of one VM of ``size`` (0 for on-demand)."""
    return size.interruptions_per_day / 24.0 if size.market == "spot" else 0.0


def expected_price(size: Size, walltime: float | None, penalty: float) -> float:
    """Expected price per node-hour of useful work on ``size`` for jobs asking for ``walltime``
    seconds (None: unknown), each reclaim costing ``penalty`` seconds besides the re-run."""
    rate = reclaim_rate(size)
    if rate <= 0.0:
        return size.price
    hours, penalty_h = (walltime or 0.0) / _HOUR, penalty / _HOUR
    if hours <= 0.0:
        return size.price * (1.0 + rate * penalty_h)
    reclaims = math.expm1(min(rate * hours, _MAX_EXPONENT))
    return size.price * (reclaims / rate + penalty_h * reclaims) / hours
