"""Each spot market's reclaim rate, learned from the reclaims the controller saw. Pure.

The configured ``[Size] interruptions_per_day`` is the prior, worth ``[Daemon] reclaim_prior``
of VM time; the controller adds the spot VM time it watched and the reclaims it saw, both
fading with a half-life of :data:`HALF_LIFE` so the rate returns when reclaims stop. The rate is
the Gamma-Poisson posterior mean::

    (prior_rate × prior_time + reclaims) / (prior_time + watched_time)

A market seen little keeps about its prior; a market watched much longer than the prior's
weight follows what it did lately.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodemanager.text import duration

__all__ = ["Watched", "HALF_LIFE", "faded", "learned_rate", "rate_words"]

HALF_LIFE = 7 * 86400.0   # a week: markets change with the season and the hour, not by the minute


@dataclass(frozen=True, slots=True)
class Watched:
    """One market's record: spot VM-seconds watched and reclaims seen (both faded) as of ``at``."""

    vm_seconds: float = 0.0
    reclaims: float = 0.0
    at: float = 0.0


def faded(w: Watched, now: float, half_life: float = HALF_LIFE) -> Watched:
    """``w`` as of ``now``: what it holds fades by half every ``half_life`` seconds."""
    if now <= w.at:
        return w
    k = 0.5 ** ((now - w.at) / half_life)
    return Watched(vm_seconds=w.vm_seconds * k, reclaims=w.reclaims * k, at=now)


def learned_rate(prior_per_day: float, prior_seconds: float, w: Watched) -> float:
    """Reclaims per hour of one VM of the market: the prior blended with what was watched."""
    weight = prior_seconds + w.vm_seconds
    if weight <= 0.0:
        return prior_per_day / 24.0
    return (prior_per_day / 86400.0 * prior_seconds + w.reclaims) / weight * 3600.0


def rate_words(prior_per_day: float, w: Watched, rate: float) -> str:
    """``"0.185 reclaims per VM-day (prior 0.0073; 12.3 reclaims in 66d 12h of VM time watched lately)"``."""
    return (f"{rate * 24:.3g} reclaims per VM-day (prior {prior_per_day:.3g}; {w.reclaims:.1f} reclaims "
            f"in {duration(w.vm_seconds)} of VM time watched lately)")
