"""How far a policy that never moves or kills a running job can get below Slurm power saving: a
clairvoyant packing of a trace (the cost target, measured rather than hoped for).

The no-wait lower bound (:func:`nodemanager.sim.figures.lower_bounds`) repacks every running job
onto the fewest nodes at every instant, which only migration can do. A node manager drains and
destroys nodes, but a job stays on the node it started on until it ends. :func:`pack` replays a
trace with that rule and with knowledge no policy has:

* every job starts at its submit time (no waits) on a node booted ahead of it, and a node is
  given back the instant its last job ends;
* ``rule="first"``: each job (each node-sized piece of a wider one, as the replay splits them)
  goes to the first node in creation order with room: the simulated pool's breadth-first;
* ``rule="lifetime"``: each job goes to a node that stays up anyway until after the job ends
  (the earliest such end), else to the node whose last job ends latest, knowing every runtime:
  the lifetime-aware placement draining steers towards (LAVA-style);
* ``runtime``: what the rule believes a job runs (the real runtime by default; pass e.g. the
  requested time to measure a realistic estimate).

Each node created pays ``boot_join`` seconds without work, unless a node emptied at most that
long before is re-used (it pays the gap instead). The result is not a proof of optimality (the
best offline packing is NP-hard), but a policy with none of this knowledge does not beat it in
practice: it is what the cost target is measured against in BENCHMARKS.md.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from nodemanager.sim.swf import SwfJob

__all__ = ["Packing", "pack", "RULES"]

RULES = ("first", "lifetime")
_HOUR = 3600.0


@dataclass(frozen=True)
class Packing:
    """Node-hours of a clairvoyant packing: ``busy`` while nodes hold jobs, ``overhead`` for the
    boots and re-use gaps between them; ``total`` is what such a pool pays."""

    rule: str
    busy_node_hours: float
    overhead_node_hours: float
    nodes_created: int
    boots: int

    @property
    def total_node_hours(self) -> float:
        return self.busy_node_hours + self.overhead_node_hours


@dataclass
class _Node:
    order: int
    free: int
    ends: list[float]          # believed end of each job it holds
    holding: int = 0


def pack(jobs: Sequence[SwfJob], cores_per_node: int, rule: str = "first", *,
         boot_join: float = 120.0, runtime: Callable[[SwfJob], float] | None = None) -> Packing:
    """The clairvoyant packing of ``jobs`` on nodes of ``cores_per_node`` cores (module doc)."""
    if rule not in RULES:
        raise ValueError(f"rule {rule!r}: one of {', '.join(RULES)}")
    if cores_per_node <= 0 or not math.isfinite(boot_join) or boot_join < 0:
        raise ValueError("cores_per_node must be positive and boot_join a finite time >= 0")
    believed = runtime or (lambda j: j.runtime)
    starts: list[tuple[float, int, int, float, float]] = []  # submit, seq, cores, end, believed end
    for j in jobs:
        left, end, guess = j.cores, j.submit + j.runtime, j.submit + believed(j)
        while left > 0:
            cores = min(cores_per_node, left)
            left -= cores
            starts.append((j.submit, len(starts), cores, end, guess))
    starts.sort()
    nodes: dict[int, _Node] = {}
    running: list[tuple[float, int, int, int, float]] = []   # end, seq, node, cores, believed end
    created: list[float] = []
    emptied: list[float] = []
    busy = 0.0
    last = starts[0][0] if starts else 0.0
    k = 0
    while k < len(starts) or running:
        t = min(starts[k][0] if k < len(starts) else math.inf, running[0][0] if running else math.inf)
        busy += len(nodes) * (t - last)
        last = t
        if running and (k >= len(starts) or running[0][0] <= starts[k][0]):  # ends free cores first
            _, _, nid, cores, guess = heapq.heappop(running)
            n = nodes[nid]
            n.free += cores
            n.ends.remove(guess)
            n.holding -= 1
            if not n.holding:
                del nodes[nid]
                emptied.append(t)
            continue
        _, seq, cores, end, guess = starts[k]
        k += 1
        chosen = _choose(nodes, cores, guess, rule)
        if chosen is None:
            chosen = len(created)
            created.append(t)
            nodes[chosen] = _Node(order=chosen, free=cores_per_node, ends=[])
        n = nodes[chosen]
        n.free -= cores
        n.ends.append(guess)
        n.holding += 1
        heapq.heappush(running, (end, seq, chosen, cores, guess))
    overhead, boots = _overhead(created, emptied, boot_join)
    return Packing(rule, busy / _HOUR, overhead / _HOUR, len(created), boots)


def _choose(nodes: dict[int, _Node], cores: int, guess: float, rule: str) -> int | None:
    best: tuple[float, ...] | None = None
    choice = None
    for nid, n in nodes.items():
        if n.free < cores:
            continue
        if rule == "first":
            return nid                      # dicts keep creation order
        last = max(n.ends)
        key = (0.0, last, n.order) if last >= guess else (1.0, -last, n.order)
        if best is None or key < best:
            best, choice = key, nid
    return choice


def _overhead(created: list[float], emptied: list[float], boot_join: float) -> tuple[float, int]:
    """Seconds paid without work: each new node re-uses the most recently emptied node if that
    emptied at most ``boot_join`` before (paying the gap), else boots (paying ``boot_join``)."""
    emptied = sorted(emptied)
    avail: list[float] = []
    total, boots, i = 0.0, 0, 0
    for c in sorted(created):
        while i < len(emptied) and emptied[i] <= c:
            heapq.heappush(avail, -emptied[i])
            i += 1
        if avail and c + avail[0] <= boot_join:
            total += c + heapq.heappop(avail)
        else:
            avail.clear()                   # the rest emptied even longer ago
            total += boot_join
            boots += 1
    return total, boots
