"""Replays of a sweep run as Dask tasks, on a local cluster of worker processes or on a running
scheduler's workers, and give the same figures as one process."""

import json

import pytest

from nodemanager.cli import main
from nodemanager.sim.workloads import shaped_workload, write_swf

pytestmark = pytest.mark.slow


def _figures(out):
    got = json.loads(out)
    rows = got["runs"] + got["sweep"]
    for r in rows:
        r.pop("wall_seconds")
    return rows


def test_a_sweep_on_a_dask_cluster_gives_the_figures_of_one_process(tmp_path, capsys):
    from distributed import Client, LocalCluster

    trace = tmp_path / "w.swf"
    with open(trace, "w") as out:
        write_swf(out, shaped_workload("bursts", 0.5, 24, 5))
    args = ["simulate", "--trace", str(trace), "--sweep", "idle_grace=60,900", "--json"]
    assert main([*args, "--jobs", "1"]) == 0
    alone = _figures(capsys.readouterr().out)
    assert len(alone) == 3

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        assert main([*args, "--scheduler", cluster.scheduler_address]) == 0
        on_dask = _figures(capsys.readouterr().out)
        # the replays ran on both worker processes, the jobs shipped to each
        keys = client.run(lambda dask_worker: sorted({str(e[0]).split("-")[0] for e in dask_worker.state.log}))
        assert all({"Shared", "_replay_one"} <= set(k) for k in keys.values()) and len(keys) == 2
    assert on_dask == alone

    assert main([*args, "--jobs", "2"]) == 0           # a local cluster of two worker processes
    assert _figures(capsys.readouterr().out) == alone


def test_the_daemon_does_not_import_dask():
    """Dask is imported by a sweep's replays only, never by the daemon's start or the simulate command's."""
    import subprocess
    import sys

    code = ("import sys, nodemanager.cli, nodemanager.commands.run, nodemanager.commands.simulate, "
            "nodemanager.sim.replay_many; print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
