"""How long a size's last free cores stay up, from the recent job arrivals
(``idle_timing = wait`` with ``wait_grace = arrivals``). Pure.

Giving back the last idle node of a size makes the next job wait for a boot; keeping it costs its
price while no job comes. Whether a job is likely soon depends on how long the pool has already
gone without one: in a busy spell the gaps between arrivals are short, in a quiet night they are
long, and whether a gap that has lasted long will last longer is read from the gaps themselves.
The rule reads the gaps between the recent arrivals (the instants the controller saw new jobs,
queued or started; several jobs seen in one cycle are one arrival) and keeps the node while, of
the remembered gaps at least as long as the current one, at least ``chance`` ended within
``window`` more seconds (a boot and join's time): a job is that likely to come before a re-booted
node could take it. Once that share falls below ``chance`` the node goes as any idle node does
(the break-even grace). With too few gaps to judge (:data:`MIN_GAPS`), the configured
``idle_grace`` holds, as ``wait_grace = fixed`` does; where fewer than :data:`MIN_TAIL`
remembered gaps were as long as the current one, the pool has been quiet longer than it
remembers and the node is not kept.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Sequence

__all__ = ["MIN_GAPS", "MIN_TAIL", "keep_until"]

MIN_GAPS = 20    # remembered gaps before the arrivals decide (else the configured idle_grace)
MIN_TAIL = 5     # gaps at least as long as the current one, below which nothing is kept


def _chance(gaps: Sequence[float], s: float, window: float) -> tuple[float, int]:
    """(share of the gaps longer than ``s`` that ended within ``s + window``, how many were longer)."""
    longer = len(gaps) - bisect_right(gaps, s)
    if longer < MIN_TAIL:
        return 0.0, longer
    return (bisect_right(gaps, s + window) - bisect_right(gaps, s)) / longer, longer


def keep_until(arrivals: Sequence[float], now: float, window: float, chance: float) -> tuple[float | None, str]:
    """(the instant the last free cores stop being kept for arrivals, the words a kept or released
    node's why shows); None with too few arrivals to judge. ``arrivals``: the recent arrival
    instants, oldest first (later than ``now``: left out); ``window``: seconds a job may come in to
    count (a re-boot's time); ``chance``: the share of such gaps that keeps the node. The instant is
    the last arrival plus the shortest gap length, not shorter than the current gap, at which the
    share falls below ``chance``; ``-inf`` when the share is below it now (not kept)."""
    times = [t for t in arrivals if t <= now and math.isfinite(t)]
    gaps = sorted(b - a for a, b in zip(times, times[1:]) if b > a)
    if len(gaps) < MIN_GAPS:
        return None, f"{len(gaps)} arrival gaps remembered, {MIN_GAPS} needed"
    last = times[-1]
    s = now - last
    # the share changes only where s or s + window passes a gap's length
    points = sorted({s, *(g for g in gaps if g > s), *(g - window for g in gaps if g - window > s)})
    for p in points:
        if _chance(gaps, p, window)[0] < chance:
            break
    else:  # chance 0: kept through the longest gap remembered
        p = points[-1]
    now_share, now_longer = _chance(gaps, s, window)
    if p <= s:
        why = (f"after {s:.0f}s without a job, {now_longer} of the last {len(gaps)} arrival gaps lasted as long"
               if now_longer < MIN_TAIL else
               f"a job within {window:.0f}s is {100 * now_share:.0f} % likely after {s:.0f}s without one")
        return -math.inf, why
    return last + p, (f"kept for arrivals: a job within {window:.0f}s is {100 * now_share:.0f} % likely "
                      f"after {s:.0f}s without one (of the last {len(gaps)} gaps)")
