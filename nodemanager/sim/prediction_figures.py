"""How well a replay's runtime prediction (``runtime_prediction = recent``) did: median and 90th
percentile of predicted / actual runtime over the finished jobs, beside the same for the
requested times (the jobs' own limits), in the figures and as a line under the table."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from nodemanager.cycle.runtime_memory import RuntimeMemory
from nodemanager.sim.figures import Figures

__all__ = ["with_accuracy", "accuracy_lines"]


def with_accuracy(figures: Figures, memory: RuntimeMemory, mode: str) -> Figures:
    """``figures`` with ``runtime_accuracy`` filled from ``memory`` when prediction was on."""
    if mode == "off":
        return figures
    predicted, requested = memory.accuracy()
    return replace(figures, runtime_accuracy={
        "jobs": predicted.count, "predicted_median": predicted.median, "predicted_p90": predicted.p90,
        "requested_median": requested.median, "requested_p90": requested.p90})


def accuracy_lines(rows: Sequence[Figures]) -> list[str]:
    """One line per run that predicted runtimes."""
    out = []
    for f in rows:
        a = f.runtime_accuracy
        if a:
            out.append(f"runtime prediction, {f.policy}: predicted/actual median {a['predicted_median']:.2f}, "
                       f"p90 {a['predicted_p90']:.2f}; requested/actual median {a['requested_median']:.2f}, "
                       f"p90 {a['requested_p90']:.2f} ({a['jobs']:.0f} finished jobs with a requested time)")
    return out
