"""Start-up costs an operator feels: ``import policy_matrix`` and ``nodemanager matrix check``.

Prints the median and the spread of 7 runs of each (wall seconds, each a fresh interpreter)::

    python benchmarks/bench_startup.py
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

RUNS = 7


def wall(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - started


def import_seconds() -> float:
    code = "import time; t = time.perf_counter(); import policy_matrix; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout)


def main() -> int:
    exe = shutil.which("nodemanager")
    check = ([exe] if exe else [sys.executable, "-m", "nodemanager"]) + ["matrix", "check"]
    rows = [("import policy_matrix (in-process)", [import_seconds() for _ in range(RUNS)]),
            ("nodemanager matrix check (whole command)", [wall(check) for _ in range(RUNS)])]
    print(f"{'what':<42} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, xs in rows:
        print(f"{name:<42} {statistics.median(xs):>9.3f} {min(xs):>7.3f} {max(xs):>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
