"""The simulated negotiator's end-grouping placements (``--placement ends`` / ``ends-oracle``):
a job goes beside the jobs that end when it does, so a node of short jobs is not kept up by a
long one."""

from __future__ import annotations

from tests.sim_cli import replay_rows

# (submit, runtime, cores, requested time): two 4-core nodes boot for a 3-core job of 2.5 hours
# and one of 50 minutes; a 1-core job of 45 minutes, then a 1-core job of 2.2 hours follow
ROWS = [(1000, 9000, 3, 9100), (1000, 3000, 3, 3100), (1300, 2700, 1, 2800), (1600, 8000, 1, 8100)]


def test_grouping_by_ends_gives_the_short_jobs_node_back_before_the_long_ones(tmp_path, capsys):
    """Steered, the 45-minute job fills the node kept longest, so the 2.2-hour job lands beside
    the 50-minute one and keeps that node up 1.5 hours more; grouped by ends, the 45-minute job
    goes beside the 50-minute one and the 2.2-hour job beside the 2.5-hour one."""
    def paid(placement: str) -> float:
        run = replay_rows(tmp_path, capsys, ROWS, placement)
        assert run["jobs_completed"] == 4 and run["jobs_killed"] == 0
        return float(run["paid_node_hours"])

    steered = paid("steered")
    for placement in ("ends-oracle", "ends"):   # the jobs' limits stand in for a cold start's predictions
        assert steered - paid(placement) > 1.2, (placement, steered)
