"""A few SWF rows replayed through ``nodemanager simulate --json`` (the tests of placement)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from nodemanager.cli import main

HEAD = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"


def replay_rows(tmp_path: Path, capsys: Any, rows: Sequence[tuple[int, int, int, int]],
                placement: str, *, cores: int = 4) -> dict[str, Any]:
    """Replay ``rows`` of (submit, runtime, cores, requested time) on ``cores``-core nodes with a
    30 s cycle, 60 s boots and 30 s joins, under ``placement``; the one run's JSON figures."""
    trace = tmp_path / "t.swf"
    trace.write_text(HEAD + "".join(f"{i} {s} 0 {r} {c} -1 -1 {c} {q} -1 1 1 1 -1 1 1 -1 -1\n"
                                    for i, (s, r, c, q) in enumerate(rows, 1)))
    ini = tmp_path / "30s.ini"
    ini.write_text("[Polling]\ncycle_interval = 30s\n")
    code = main(["simulate", "--trace", str(trace), "--config", str(ini), "--boot-delay", "60",
                 "--join-delay", "30", "--jobs", "1", "--json", "--cores-per-node", str(cores),
                 "--placement", placement])
    out = capsys.readouterr()
    assert code == 0, out.err
    run: dict[str, Any] = json.loads(out.out)["runs"][0]
    return run
