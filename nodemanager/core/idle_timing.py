"""Break-even idle timing: one size's idle grace from what a re-boot costs and
how soon its idle nodes were re-used. Pure.

Keeping an idle node costs its price per second; giving it back costs nothing until a job comes
that it would have run, and then a re-boot: boot + join seconds paid without work (the same
size's price, so seconds compare). This is ski rental: with the recent idle periods as the
forecast, the grace ``T`` is the one that pays least over them, where a period re-used after
``x`` seconds costs ``x`` if ``x <= T``, else ``T`` plus a re-boot, and a period never re-used
costs ``T``. Often re-used within a boot: a long grace; rarely: a short one. Bounded by the
configured ``idle_grace`` above and :data:`FLOOR` below. The history decides alone between the
two: no floor at one re-boot's time (ski rental's worst-case 2x bound), because with
``rebuy_hold`` keeping a boot from following a destroy, the shorter grace the history asks for paid
less on both development traces (BENCHMARKS.md, "Break-even idle timing"). The configured value
until there is enough history (:data:`MIN_PERIODS`, :data:`MIN_JOINS`).
:class:`nodemanager.cycle.idle_memory.IdleMemory` keeps the history.

``idle_timing = wait`` prices the wait the money rule leaves out: :func:`wait_keepers` names, per
size, the idle node whose give-back would leave the size no free core (so the next job would wait
for a boot); it keeps the configured ``idle_grace`` (or, with ``wait_grace = arrivals``, as long as the
recent arrivals say a job is likely soon: :func:`kept_grace`), the others follow the break-even grace.
"""

from __future__ import annotations

import math
import statistics
from typing import Iterable, Sequence

from nodemanager.model import Worker

__all__ = ["FLOOR", "MIN_PERIODS", "MIN_JOINS", "fixed_note", "break_even_grace", "wait_keepers",
           "kept_grace"]

# one HTCondor negotiation cycle (NEGOTIATOR_INTERVAL's default): a node idle for less may only
# be waiting for the next match
FLOOR = 60.0
MIN_PERIODS = 10   # ended idle periods of a size before its grace follows them
MIN_JOINS = 3      # measured boot+join times of a size before its grace follows them


def fixed_note(configured: float) -> str:
    """How a node's why names a fixed idle grace (``idle_grace_mode = fixed``)."""
    return f" (idle_grace {configured:.0f}s)"


def break_even_grace(joins: Sequence[float], reuse_after: Sequence[float], configured: float,
                     floor: float = FLOOR, billing_period: float = 0.0,
                     min_charge: float = 0.0) -> tuple[float, str]:
    """(grace in seconds, the words a node's why shows) for one size.

    ``joins``: recent boot+join times (VM created -> worker joined), seconds; ``reuse_after``:
    for each recent ended idle period, the seconds from its start until a job used the node (or
    a re-boot of the size that it could have served), ``inf`` when none came within
    ``configured``. Negative, NaN and (for joins) infinite values are left out (a clock jump);
    a huge boot time only makes the grace reach ``configured``. A re-boot costs at least the
    size's ``min_charge``; a size billed per ``billing_period`` (> 0) keeps ``configured``: an
    idle second inside a paid period costs nothing, and the matrix's billing window decides when
    such a node goes. Never above ``configured``, never below ``floor`` (unless ``configured``
    is); ties go to the longer grace (fewer jobs wait)."""
    if not (math.isfinite(configured) and configured > 0):
        return configured, fixed_note(configured)
    if billing_period > 0:
        return configured, f" (idle_grace {configured:.0f}s: break-even is for sizes billed per second)"
    boots = [b for b in joins if math.isfinite(b) and b >= 0]
    periods = [x for x in reuse_after if x >= 0]  # NaN compares False: left out
    if len(boots) < MIN_JOINS or len(periods) < MIN_PERIODS:
        return configured, (f" (idle_grace {configured:.0f}s: break-even waits for {MIN_PERIODS} ended "
                            f"idle periods and {MIN_JOINS} joins of this size, has {len(periods)} "
                            f"and {len(boots)})")
    boot = statistics.median(boots)  # one stuck boot does not make every re-boot look dear
    reboot = max(boot, min_charge)
    lo = min(floor, configured)
    candidates = sorted({lo, configured, *(x for x in periods if lo < x < configured)})
    best, best_cost = lo, math.inf
    for t in candidates:
        cost = math.fsum(x if x <= t else t + (reboot if x != math.inf else 0.0) for x in periods)
        if cost <= best_cost * (1 + 1e-12):
            best, best_cost = t, cost
    reused = sum(1 for x in periods if x <= best)
    bound = (" (the configured idle_grace)" if best == configured
             else " (the floor)" if best == lo else "")
    billed = f", billed at least {min_charge:.0f}s" if min_charge > boot else ""
    return best, (f" (idle grace {best:.0f}s{bound}: break-even: boot+join {boot:.0f}s{billed}, "
                  f"{100 * reused / len(periods):.0f} % of the last {len(periods)} idle periods "
                  f"re-used within it)")


def wait_keepers(workers: Iterable[tuple[str, str, Worker, float | None]]) -> frozenset[str]:
    """``idle_timing = wait``: the node ids that keep the configured idle grace. ``workers``: (node
    id, size name, worker, idle since: None unless the worker is classified idle) of the listed,
    heard nodes. Per size, when no busy worker (one running jobs) that is not draining has a free
    core, the idle worker not draining idle the shortest (the latest idle-since, then the highest
    id): giving it back would leave the size no free core, and the next job would wait for a boot.
    The size's other idle nodes follow the break-even grace; a size with a free core on a busy
    node keeps none."""
    free: set[str] = set()
    last: dict[str, tuple[float, str]] = {}
    for nid, size, w, idle_since in workers:
        if w.draining:
            continue
        if w.running_jobs > 0 or w.cpus_busy > 0:
            if w.cpus > w.cpus_busy:
                free.add(size)
        elif idle_since is not None:
            key = (idle_since, nid)
            if size not in last or key > last[size]:
                last[size] = key
    return frozenset(nid for size, (_, nid) in last.items() if size not in free)


def kept_grace(kept_until: tuple[float | None, str], since: float, configured: float, grace: float,
               note: str) -> tuple[float, str]:
    """(idle grace, the words its why shows) of a node :func:`wait_keepers` named, idle since
    ``since``. ``kept_until``: (the instant the arrivals stop keeping it, their words) from
    :func:`nodemanager.core.arrival_keeper.keep_until` (``wait_grace = arrivals``), or (None, ...)
    to keep the configured ``idle_grace``; ``grace``, ``note``: the size's break-even grace and words.
    Never shorter than the break-even grace, never longer than ``configured``."""
    until, why = kept_until
    if until is None:
        return configured, (f" (idle_grace {configured:.0f}s: idle_timing = wait keeps the size's last free "
                            f"cores; a job would wait for a boot without them)")
    kept = min(max(until - since, grace), configured)
    if kept <= grace:
        return grace, f"{note[:-1]}; not kept: {why})"
    return kept, f" (idle grace {kept:.0f}s{' (the configured idle_grace)' if kept == configured else ''}: {why})"
