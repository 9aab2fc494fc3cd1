"""A real HTCondor pool's own `condor_history -json` replays with `simulate --history --format
condor`: jobs that ran replay with their real times and sizes; one removed before it ran is
counted, not replayed."""

import json

import pytest

from nodemanager.cli import main
from tests.fixtures.condor_pool import CondorPool, require_condor

pytestmark = [pytest.mark.htcondor, pytest.mark.slow]


def test_real_condor_history_replays(tmp_path, capsys):
    pool = CondorPool(require_condor())
    try:
        with pool.client():
            pool.start()
            pool.start_vm("vm-a", cpus=2, memory=2048)
            pool.wait_vm("vm-a")
            done = pool.submit(2, count=2, cpus=1, memory=300)
            removed = pool.submit(300, cpus=1, memory=100, extra="allowed_job_duration = 600")
            never = pool.submit(5, cpus=4)            # wider than the VM: never starts
            pool.wait_running(removed)
            pool.run("condor_rm", "-pool", pool.collector, "-name", "nm-schedd@nm-central", str(removed))
            pool.run("condor_rm", "-pool", pool.collector, "-name", "nm-schedd@nm-central", str(never))

            def history():
                text = pool.run("condor_history", "-pool", pool.collector, "-name", "nm-schedd@nm-central", "-json")
                return text if text.strip() and len(json.loads(text)) >= 4 else None

            text = pool.wait_for(history, 120, "the four jobs in condor_history")
    finally:
        pool.stop()
    path = tmp_path / "history.json"
    path.write_text(text)
    assert main(["simulate", "--history", str(path), "--format", "condor", "--json", "--jobs", "1"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["jobs"] == 3                                    # two completed, one removed while running
    assert got["skipped_jobs"] == {"never started": 1}
    run = got["runs"][0]
    assert run["jobs_completed"] == 3 and run["jobs_killed"] == 0 and run["boots"] >= 1

    from nodemanager.sim.history import read_history

    jobs, _ = read_history(str(path), "condor")
    assert sorted((j.cores, j.mem_mb, j.requested_time) for j in jobs) == [(1, 100, 600), (1, 300, -1), (1, 300, -1)]
    assert all(0 < j.runtime < 120 for j in jobs)
