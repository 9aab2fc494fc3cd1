"""How much of Slurm power saving's gap to the clairvoyant non-migrating packing a policy closes.

The no-wait bound repacks running jobs at every instant, which no policy that keeps a job on its
node can do; :func:`nodemanager.sim.clairvoyant.pack` (``rule="lifetime"``, ``cv life``) is the
bound such a policy is measured against. ``gap closed`` = (reference paid − policy paid) /
(reference paid − clairvoyant), the reference being Slurm power saving at its defaults: 0 % pays
what Slurm pays, 100 % pays what clairvoyance pays, negative is dearer than Slurm.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from nodemanager.sim.clairvoyant import pack
from nodemanager.sim.figures import Figures
from nodemanager.sim.swf import SwfJob

__all__ = ["REFERENCE", "clairvoyant_node_hours", "gap_closed", "with_gap"]

REFERENCE = "slurm-power-save"


def clairvoyant_node_hours(jobs: Sequence[SwfJob], cores_per_node: int, boot_join: float) -> float:
    """Node-hours of the clairvoyant lifetime-aware packing (``cv life``) of ``jobs``."""
    if not jobs:
        return 0.0
    return pack(jobs, cores_per_node, "lifetime", boot_join=boot_join).total_node_hours


def gap_closed(paid: float, reference: float, bound: float) -> float | None:
    """The share (0-1, negative when dearer) of ``reference - bound`` that paying ``paid`` closes;
    None when the reference is no dearer than the bound (no gap to close)."""
    if reference <= bound:
        return None
    return (reference - paid) / (reference - bound)


def with_gap(rows: Sequence[Figures], sweep_rows: Sequence[Figures],
             bound: float) -> tuple[list[Figures], list[Figures]]:
    """``rows`` and ``sweep_rows`` carrying the clairvoyant bound and their gap closed, measured
    against the reference row at its defaults (left without a gap when it did not run)."""
    ref = next((f for f in rows if f.policy == REFERENCE), None)

    def one(f: Figures) -> Figures:
        gap = gap_closed(f.paid_node_hours, ref.paid_node_hours, bound) if ref is not None else None
        return replace(f, clairvoyant_node_hours=bound, gap_closed=gap)

    return [one(f) for f in rows], [one(f) for f in sweep_rows]
