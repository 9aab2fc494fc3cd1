"""The simulated negotiator's end-grouping placements (``--placement ends`` / ``ends-oracle``):
a job goes beside the jobs that end when it does, so a node of short jobs is not kept up by a
long one."""

from __future__ import annotations

import json

import pytest

from nodemanager.cli import main

HEAD = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"
# (submit, runtime, cores, requested time): two 4-core nodes boot for a 3-core job of 2.5 hours
# and one of 50 minutes; a 1-core job of 45 minutes, then a 1-core job of 2.2 hours follow
ROWS = [(1000, 9000, 3, 9100), (1000, 3000, 3, 3100), (1300, 2700, 1, 2800), (1600, 8000, 1, 8100)]


@pytest.fixture
def paid(tmp_path, capsys):
    trace = tmp_path / "t.swf"
    trace.write_text(HEAD + "".join(f"{i} {s} 0 {r} {c} -1 -1 {c} {q} -1 1 1 1 -1 1 1 -1 -1\n"
                                    for i, (s, r, c, q) in enumerate(ROWS, 1)))
    ini = tmp_path / "site.ini"
    ini.write_text("[Polling]\ncycle_interval = 30s\n")

    def run(placement: str) -> float:
        code = main(["simulate", "--trace", str(trace), "--config", str(ini), "--boot-delay", "60",
                     "--join-delay", "30", "--jobs", "1", "--json", "--cores-per-node", "4",
                     "--placement", placement])
        out = capsys.readouterr()
        assert code == 0, out.err
        result = json.loads(out.out)["runs"][0]
        assert result["jobs_completed"] == 4 and result["jobs_killed"] == 0
        return float(result["paid_node_hours"])

    return run


def test_grouping_by_ends_gives_the_short_jobs_node_back_before_the_long_ones(paid):
    """Steered, the 45-minute job fills the node kept longest, so the 2.2-hour job lands beside
    the 50-minute one and keeps that node up 1.5 hours more; grouped by ends, the 45-minute job
    goes beside the 50-minute one and the 2.2-hour job beside the 2.5-hour one."""
    steered = paid("steered")
    for placement in ("ends-oracle", "ends"):   # the jobs' limits stand in for a cold start's predictions
        assert steered - paid(placement) > 1.2, (placement, steered)

