"""What a size is expected to cost for a job, counting spot reclaims. Pure.

A spot size is cheaper per hour but may be taken back: a job on it is killed and runs again from
the start elsewhere (work re-run), and each reclaim costs ``[Daemon] reclaim_penalty`` of node
time on top (requeue, restart, the notice window). With reclaims at a constant rate λ per hour
(the market's rate: ``[Size] interruptions_per_day`` / 24 as the prior, learned from the reclaims
the controller sees, see :mod:`nodemanager.core.reclaim_rates`) a job asking for ``T`` hours of
walltime needs, on average, ``(e^{λT} − 1) / λ`` hours of node time and meets ``e^{λT} − 1``
reclaims, so its expected price per hour of useful work is::

    price × ((e^{λT} − 1) / λ + penalty × (e^{λT} − 1)) / T

which grows fast with ``T``: long jobs go to on-demand, short ones to spot. Without a walltime
(the scheduler gave none) the factor is its short-job limit, ``1 + λ × penalty``. An on-demand
size (λ = 0) costs its price.

Money is not the only loss: a re-run delays its job. ``[Daemon] max_rerun_share`` bounds the
node time a job may be expected to lose to re-runs, as a share of its walltime; a spot market
takes a job only while its walltime is within :func:`spot_walltime_limit` of the market's rate.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from nodemanager.model import CloudNode, Size
from nodemanager.tags import TAG_PRICE
from nodemanager.text import duration

__all__ = ["node_price", "unsized_price", "MAX_TAGGED_PRICE", "expected_price", "reclaim_rate", "effective_price", "rerun_share", "spot_walltime_limit", "spot_limits",
           "spot_words"]

_HOUR = 3600.0
_MAX_EXPONENT = 50.0  # e^50: a job that would practically never finish on this size


def effective_price(price: float, override: float | None, licence: float) -> float:
    """A size's price per node-hour for every decision and figure (size choice, ``max_total_price``,
    spend metrics, the simulator): ``[Size] price_override`` (a reservation or savings plan rate)
    in place of the configured ``price``, plus ``licence_price`` per VM-hour."""
    return (price if override is None else override) + licence


MAX_TAGGED_PRICE = 1e6   # per hour: a price tag above this (or not a number) is not believed


def unsized_price(node: CloudNode, known: Mapping[str, float]) -> tuple[float, str]:
    """What a VM of a size no longer configured costs per hour, and from where: the price tagged
    at its boot, else its size's last configured price in ``known``, else 0 (unknown)."""
    tag = node.tags.get(TAG_PRICE) if node.tags else None
    if tag:
        try:
            price = float(tag)
        except ValueError:
            price = math.nan
        if 0.0 <= price <= MAX_TAGGED_PRICE:
            return price, "its price tagged at boot"
    if node.size in known:
        return known[node.size], f"size {node.size}'s last configured price"
    return 0.0, "price unknown: no price tag and its size was never configured here"


def node_price(node: CloudNode, sizes: Mapping[str, Size], known: Mapping[str, float]) -> float:
    """A listed VM's price per hour for ``max_total_price`` and the spend figures: its size's while
    the size is configured, else :func:`unsized_price` (a VM counts until it is gone)."""
    size = sizes.get(node.size)
    return size.price if size is not None else unsized_price(node, known)[0]


def reclaim_rate(size: Size, learned: Mapping[str, tuple[float, str]] | None = None) -> float:
    """Reclaims per hour of one VM of ``size`` (0 for on-demand): the rate ``learned`` for its
    market (size name -> (reclaims per hour, words)) where there is one, else the configured one."""
    if size.market != "spot":
        return 0.0
    if learned is not None and size.name in learned:
        return learned[size.name][0]
    return size.interruptions_per_day / 24.0


def expected_price(size: Size, walltime: float | None, penalty: float, rate: float | None = None) -> float:
    """Expected price per node-hour of useful work on ``size`` for jobs asking for ``walltime``
    seconds (None: unknown), each reclaim costing ``penalty`` seconds besides the re-run;
    ``rate`` is the reclaims per hour to price with (None: :func:`reclaim_rate` of the size)."""
    rate = reclaim_rate(size) if rate is None else rate
    if rate <= 0.0:
        return size.price
    hours, penalty_h = (walltime or 0.0) / _HOUR, penalty / _HOUR
    if hours <= 0.0:
        return size.price * (1.0 + rate * penalty_h)
    reclaims = math.expm1(min(rate * hours, _MAX_EXPONENT))
    return size.price * (reclaims / rate + penalty_h * reclaims) / hours


def rerun_share(rate: float, walltime: float, penalty: float = 0.0) -> float:
    """The node time a job of ``walltime`` seconds is expected to lose to reclaims at ``rate``
    per hour (re-runs and ``penalty`` seconds each), as a share of its walltime."""
    hours = walltime / _HOUR
    if rate <= 0.0 or hours <= 0.0:
        return 0.0
    reclaims = math.expm1(min(rate * hours, _MAX_EXPONENT))
    return (reclaims / rate + penalty / _HOUR * reclaims) / hours - 1.0


def spot_walltime_limit(rate: float, max_share: float, penalty: float = 0.0) -> float:
    """The longest walltime, in seconds, whose :func:`rerun_share` at ``rate`` reclaims per hour
    stays within ``max_share`` (inf: no reclaims; 0: not even the penalty fits)."""
    if rate <= 0.0:
        return math.inf
    if rerun_share(rate, 1.0, penalty) > max_share:
        return 0.0
    low, high = 1.0, 3600.0
    while rerun_share(rate, high, penalty) <= max_share and high < 1e9:
        low, high = high, high * 2
    for _ in range(50):   # the share grows with the walltime: bisect to a second
        if high - low <= 1.0:
            break
        mid = (low + high) / 2
        low, high = (mid, high) if rerun_share(rate, mid, penalty) <= max_share else (low, mid)
    return low


def spot_limits(sizes: Iterable[Size], learned: Mapping[str, tuple[float, str]], max_share: float,
                penalty: float) -> dict[str, float]:
    """Spot size name -> the longest walltime (seconds) it takes at its reclaim rate (``learned``
    where known, else configured); sizes that are never reclaimed are not in it."""
    out = {}
    for s in sizes:
        rate = reclaim_rate(s, learned)
        if rate > 0.0:
            out[s.name] = spot_walltime_limit(rate, max_share, penalty)
    return out


def spot_words(names: set[str], limits: Mapping[str, float]) -> str:
    """Why the spot sizes ``names`` do not take a job: the walltime each takes at its rate."""
    if not names:
        return ""
    return " (at their reclaim rates, " + ", ".join(
        f"{n} takes jobs up to {duration(limits[n])}" for n in sorted(names)) + ")"
