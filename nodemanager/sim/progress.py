"""Progress bars for long commands (``simulate``, ``bench``, ``benchmarks/soak.py``).

``progress_bar(total, desc, enabled)`` gives a tqdm bar on a terminal (stderr) and, without one or
with ``enabled`` False (``--json``), an object with the same ``update``/``total`` that prints
nothing, so callers never branch on it.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["progress_bar", "Quiet"]


class Quiet:
    """A progress bar that shows nothing (no terminal, or machine-readable output)."""

    def __init__(self, total: float = 0) -> None:
        self.total = total
        self.n = 0.0

    def update(self, n: float = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "Quiet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: float, desc: str, *, enabled: bool = True, unit: str = "it") -> Any:
    """A tqdm bar on stderr when it is a terminal and ``enabled``; else a :class:`Quiet` one."""
    if not enabled or not sys.stderr.isatty():
        return Quiet(total)
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
                leave=False, mininterval=0.5)
