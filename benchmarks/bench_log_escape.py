"""What escaping control characters in log records costs: a 50,000-node cycle's decision log.

The first cycle at 50,000 nodes logs one decision line per node (``node NAME (ID, SIZE) (...)
rule FILE:LINE ACTION -> ACTION [reason]``). This writes that many records through the daemon's
log handler (``nodemanager.commands.run.setup_logging``) into memory, with and without its
:class:`~nodemanager.text.EscapingFilter`, and prints the CPU seconds of each (best of 5) and
the cost per record; then the same with every 100th node name holding a ``\\r``::

    python benchmarks/bench_log_escape.py            # 50000 records
    python benchmarks/bench_log_escape.py 10000
"""

from __future__ import annotations

import io
import logging
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nodemanager.commands.run import setup_logging  # noqa: E402
from nodemanager.text import EscapingFilter  # noqa: E402


def lines(n: int, every: int = 0) -> list[str]:
    """``n`` decision lines like the controller's; every ``every``-th name holds a ``\\r``."""
    return [f"node {'evil' + chr(13) if every and i % every == 0 else ''}nm-small-{i} (i-{i:08x}, "
            f"small) (idle, open, boot exceeded, idle exceeded) rule default.matrix:30 START_DRAIN "
            f"-> drain [idle past its grace in an open window: drain]" for i in range(n)]


def run(records: list[str], escape: bool) -> float:
    """CPU seconds to log ``records`` through the daemon's handler (best of 5)."""
    best = float("inf")
    log = logging.getLogger("nodemanager.decisions")
    for _ in range(5):
        handler = setup_logging("info", io.StringIO())
        if not escape:
            handler.filters = [f for f in handler.filters if not isinstance(f, EscapingFilter)]
        start = time.process_time()
        for line in records:
            log.info("%s", line)
        best = min(best, time.process_time() - start)
        logging.getLogger().removeHandler(handler)
    return best


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    print(f"{'records':>8} {'names with CR':>14} {'plain s':>8} {'escaped s':>10} {'extra us/record':>16}")
    for every in (0, 100):
        records = lines(n, every)
        plain, escaped = run(records, False), run(records, True)
        share = f"1 in {every}" if every else "none"
        print(f"{n:>8} {share:>14} {plain:>8.3f} {escaped:>10.3f} {(escaped - plain) / n * 1e6:>16.2f}")


if __name__ == "__main__":
    main()
