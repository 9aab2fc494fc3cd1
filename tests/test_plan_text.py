"""``nodemanager plan``'s table says when a node's state next changes as a clock time and a
duration, never as epoch seconds."""

import json
import re
import time

import pytest

from nodemanager.cli import main

NOW = 1_790_000_000.0  # 2026-09-21 14:13:20 UTC


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_next_change_is_a_clock_time(tmp_path, capsys, utc):
    (tmp_path / "nm.ini").write_text("[Daemon]\nidle_grace = 10m\n\n[Size small]\ncores = 2\nram_mb = 8000\nprice = 0.1\n")
    node = {"id": "i-1", "name": "small-1", "size": "small", "launched_at": NOW - 7200}
    worker = {"name": "small-1", "scheduler": "slurm", "state": "idle", "cloud_id": "i-1", "last_heard": NOW - 5,
              "registered_at": NOW - 7100, "state_since": NOW - 400, "cpus": 2, "cpus_busy": 0, "ram_mb": 8000,
              "running_jobs": 0}
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": NOW, "polled_at": {"cloud": NOW - 5, "scheduler": NOW - 5},
        "cloud_nodes": [node], "workers": [worker], "demand": []}))
    assert main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config", str(tmp_path / "nm.ini")]) == 0
    out = capsys.readouterr().out
    why = next(line for line in out.splitlines() if line.startswith("  i-1: "))
    assert why.endswith("(next: idle grace ends 14:16:40 (in 3m 20s))"), why
    assert not re.search(r"\b1\d{9}\b", out)
