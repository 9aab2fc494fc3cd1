"""Requested walltimes grouped into a few buckets, so demand stays few items.

A job's requested walltime (SLURM ``--time``, HTCondor ``allowed_job_duration`` or the attribute
``[Scheduler] walltime_attribute`` names) steers it between spot and on-demand sizes
(:func:`nodemanager.core.pricing.expected_price`). Each walltime is rounded UP to the next bucket
of a doubling ladder from 15 minutes (15 min, 30 min, 1 h, 2 h, 4 h, ... 512 h): at most 12
distinct values, never shorter than asked (a job is never priced as shorter than it may run),
at most twice as long. Pure.
"""

from __future__ import annotations

import math

__all__ = ["WALLTIME_BUCKETS", "walltime_bucket"]

_FIRST = 900.0  # 15 minutes
WALLTIME_BUCKETS: tuple[float, ...] = tuple(_FIRST * 2.0 ** k for k in range(12))  # 15 min .. 512 h (21 days 8 h)


def walltime_bucket(seconds: float | None) -> float | None:
    """``seconds`` rounded up to its bucket; None (no walltime given, zero, negative or not
    finite) stays None, and a walltime beyond the last bucket is that bucket (priced alike)."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    for bucket in WALLTIME_BUCKETS:
        if seconds <= bucket:
            return bucket
    return WALLTIME_BUCKETS[-1]
