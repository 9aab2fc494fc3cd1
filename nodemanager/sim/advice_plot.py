"""``nodemanager advise --report DIR``: the front of money against p95 wait as a PNG (matplotlib,
the ``[report]`` extra)."""

from __future__ import annotations

import os
from typing import Sequence

from nodemanager.sim.advisor import Point
from nodemanager.sim.report import _pyplot

__all__ = ["draw_front"]


def draw_front(directory: str, points: Sequence[Point], front: Sequence[Point], proposal: Point | None,
               *, title: str) -> str:
    """Every point (a cross where a job was killed, evicted or left unfinished), the front joined,
    today's point and the proposal marked; the file written."""
    plt = _pyplot()
    os.makedirs(directory, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for p in points:
        ax.scatter([p.wait_p95], [p.money], marker="o" if p.safe else "x", color="tab:blue" if p.safe else "tab:red")
        ax.annotate(p.candidate.label, (p.wait_p95, p.money), fontsize=7, xytext=(4, 3), textcoords="offset points")
    if front:
        ax.plot([p.wait_p95 for p in front], [p.money for p in front], color="tab:blue", linewidth=1,
                label="front (no job killed)")
    today = next(p for p in points if p.today)
    ax.scatter([today.wait_p95], [today.money], s=160, facecolors="none", edgecolors="black", label="today")
    if proposal is not None:
        ax.scatter([proposal.wait_p95], [proposal.money], s=160, marker="*", color="tab:green", label="proposed")
    ax.set_xlabel("p95 wait (s)")
    ax.set_ylabel("money")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    path = os.path.join(directory, "advice.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
