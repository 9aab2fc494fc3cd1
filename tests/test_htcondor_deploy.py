"""deploy/htcondor as a site installs it, on real HTCondor daemons (:mod:`tests.fixtures.condor_pool`):
the central manager runs ``60-nodemanager-packing.conf``, each VM ``50-nodemanager-execute.conf``
with the pilot-ad cron installed. The multicore-after-drain START policy holds back single-core
jobs only after a drain, and only for its interval; the pilots' ``.pilot.ad`` values reach the
collector and the adapter's victim choice; the spot relay stays off where not asked for.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import time
from typing import Iterator

import pytest

from nodemanager.core.victims import estimate, order_victims
from nodemanager.model import Size
from nodemanager.scheduler.htcondor import HTCondorScheduler
from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings
from tests.fixtures.condor_pool import CondorPool, require_condor

pytestmark = [pytest.mark.htcondor, pytest.mark.slow]

DEPLOY = pathlib.Path(__file__).resolve().parent.parent / "deploy" / "htcondor"
MULTICORE_INTERVAL = 15          # NODEMANAGER_MULTICORE_AFTER_DRAIN, short for the test
JOB_GROUP = "nogroup"            # the primary group of the account the fixture's jobs run as


def _execute_config(pool: CondorPool) -> str:
    """The shipped execute-node file with the site's settings after it. The cloud-attributes
    feature is left out: it asks the cloud's metadata service, and the fixture sets
    CloudInstanceID itself."""
    shipped = "\n".join(line for line in (DEPLOY / "50-nodemanager-execute.conf").read_text().splitlines()
                        if not line.startswith("use feature:CommonCloudAttributes"))
    cron = pool.dir / "nodemanager-pilot-ad"
    return shipped + f"""
NODEMANAGER_HOST = 127.0.0.1
ALLOW_ADMINISTRATOR = *
STARTD_CRON_PILOTAD_EXECUTABLE = {pool._inner(cron)}
STARTD_CRON_PILOTAD_PERIOD = 2s
NODEMANAGER_MULTICORE_AFTER_DRAIN = {MULTICORE_INTERVAL}
"""


def _chroot(pool: CondorPool, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = list(args) if pool.root == "/" else ["env", "-u", "CONDOR_CONFIG", "chroot", pool.root, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def site_pool() -> Iterator[CondorPool]:
    """A pool whose negotiator runs the packing file, with the pilot-ad cron installed and the
    ``condor`` account in the jobs' group, as 50-nodemanager-execute.conf section 3 asks."""
    root = require_condor()
    pool = CondorPool(root)
    added = JOB_GROUP not in _chroot(pool, "id", "-nG", "condor").stdout.split()
    if added:
        _chroot(pool, "gpasswd", "-a", "condor", JOB_GROUP).check_returncode()
    try:
        shutil.copy(DEPLOY / "pilot-ad-cron", pool.dir / "nodemanager-pilot-ad")
        (pool.dir / "nodemanager-pilot-ad").chmod(0o755)
        with pool.client():
            pool.start((DEPLOY / "60-nodemanager-packing.conf").read_text())
            yield pool
    finally:
        pool.stop()
        if added:
            _chroot(pool, "gpasswd", "-d", "condor", JOB_GROUP)


def _job(pool: CondorPool, cluster: int) -> dict:
    [ad] = pool.jobs(f"ClusterId == {cluster}", ["JobStatus", "JobCurrentStartDate", "QDate"])
    return ad


def _pslot(pool: CondorPool, name: str) -> dict:
    [ad] = pool.slots(f'Machine == "{name}" && PartitionableSlot =?= true')
    return ad


def _start_vm(pool: CondorPool, name: str, cpus: int) -> None:
    pool.start_vm(name, cpus=cpus, memory=4096, extra=_execute_config(pool))


def _ready(pool: CondorPool, name: str) -> None:
    pool.wait_vm(name)
    pool.wait_for(lambda: _pslot(pool, name).get("Activity") == "Idle", 60, f"{name} done benchmarking")


def _start_log(pool: CondorPool, name: str) -> str:
    return (pool.dir / f"vm-{name}" / "log" / "StartLog").read_text(errors="replace")


def test_after_a_drain_only_multicore_jobs_match_for_the_interval_and_a_fresh_vm_takes_any(site_pool):
    pool = site_pool
    name = "mc-1"
    _start_vm(pool, name, cpus=8)
    _ready(pool, name)
    here = f'requirements = Machine == "{name}"'

    # a fresh VM (never drained) runs a single-core job at once
    first = pool.submit(600, cpus=1, extra=here)
    pool.wait_running(first, timeout=60)
    ad = _job(pool, first)
    assert ad["JobCurrentStartDate"] - ad["QDate"] < MULTICORE_INTERVAL
    assert "LastDrainStopTime" not in _pslot(pool, name)     # what the policy keys on: no drain yet

    # the job goes; a drain (as the defrag daemon's, resuming on completion) completes
    pool.run("condor_rm", "-pool", pool.collector, "-name", "nm-schedd@nm-central", str(first))
    pool.wait_for(lambda: _pslot(pool, name).get("Cpus") == 8, 60, f"{name} free again")
    import htcondor2
    [startd] = htcondor2.Collector(pool.collector).query(
        htcondor2.AdType.Startd, f'Machine == "{name}" && PartitionableSlot =?= true', ["MyAddress", "Name"])
    htcondor2.Startd(startd).drainJobs(drain_type=htcondor2.DrainType.Graceful, check_expr="true",
                                       on_completion=htcondor2.CompletionType.Resume, reason="defrag")
    stopped = pool.wait_for(lambda: (lambda a: a.get("State") == "Unclaimed" and a.get("LastDrainStopTime"))(
        _pslot(pool, name)), 60, f"{name}'s drain completed")
    window_ends = stopped + MULTICORE_INTERVAL

    single = pool.submit(600, cpus=1, extra=here)
    multi = pool.submit(600, cpus=4, extra=here)
    pool.wait_running(multi, timeout=MULTICORE_INTERVAL)
    assert _job(pool, multi)["JobCurrentStartDate"] < window_ends
    pool.wait_running(single, timeout=MULTICORE_INTERVAL + 30)
    assert _job(pool, single)["JobCurrentStartDate"] >= window_ends     # held back for the whole window
    # the spot relay is off unless the image turns it on: no cron job failing every few seconds
    assert "SPOTNOTICE" not in _start_log(pool, name)
    # docs/htcondor.md's check of the drain right names the startd's daemon name
    assert "DRAIN_JOBS command using" in pool.run("condor_ping", "-pool", pool.collector, "-type", "startd",
                                                  "-name", f"{name}@{name}", "DRAIN_JOBS")


PILOT = """#!/bin/sh
# a pilot: publishes its lease in .pilot.ad in its sandbox (Sfiligoi et al.), then works
now=$(date +%s)
printf 'LAST_JOB_START = %s\\nFIRST_EXP_JOB_END = %s\\nLAST_MAX_JOB_END = %s\\nUSED_FRACTION1k = 1024\\nCAN_POSTPONE_LAST_JOB = False\\n' \\
    "$now" $((now + $1)) $((now + $1)) > .pilot.ad
exec sleep 600
"""


def test_pilot_ads_reach_the_collector_through_the_startd_cron_and_drive_victim_choice(site_pool):
    pool = site_pool
    script = pool.dir / "jobs" / "pilot.sh"
    script.write_text(PILOT)
    script.chmod(0o755)
    soon, late = "pilot-soon", "pilot-late"       # the first pilot's lease ends in 10 min, the other's in 20 h
    for name in (soon, late):
        _start_vm(pool, name, cpus=2)
    for name in (soon, late):
        _ready(pool, name)
    # the pilot that ends soon starts first: by HTCondor's own estimates (badput so far) it is the dearer to stop
    for name, lease in ((soon, 600), (late, 72000)):
        cluster = pool.submit(0, cpus=2, extra=f'requirements = Machine == "{name}"\n'
                                               f"executable = {pool._inner(script)}\narguments = {lease}")
        pool.wait_running(cluster, timeout=60)
    submitted = time.time()

    ads = pool.wait_for(lambda: (lambda a: a if all(x.get("PilotAdCount") == 1 for x in a.values()) else None)(
        {n: _pslot(pool, n) for n in (soon, late)}), 30, "the pilots' attributes in the collector")
    assert ads[soon]["LAST_MAX_JOB_END"] - submitted == pytest.approx(600, abs=60)
    assert ads[soon]["CAN_POSTPONE_LAST_JOB"] is False and ads[soon]["USED_FRACTION1k"] == 1024
    assert abs(ads[late]["PilotAdUpdated"] - submitted) < 60     # the file's modification time

    workers = {w.name: w for w in HTCondorScheduler(Htcondor2Bindings(pool.collector)).poll().workers}
    now = time.time()
    costs = {n: estimate(workers[n], now) for n in (soon, late)}
    assert costs[soon].time_to_go == pytest.approx(ads[soon]["LAST_MAX_JOB_END"] - now, abs=1)
    assert costs[late].time_to_go > 70000 and not costs[late].stuck and costs[late].winding_down
    assert order_victims(costs.items(), horizon=3600) == [soon, late]


def test_a_job_without_file_transfer_runs_on_no_size_but_one_that_mounts_its_file_system(site_pool):
    """condor_submit requires ``TARGET.FileSystemDomain == MY.FileSystemDomain`` of a job with
    ``should_transfer_files = NO``: a size that declares no FileSystemDomain boots nothing for it
    and the reason says what to declare; a size whose VMs mount that file system takes it."""
    pool = site_pool
    cluster = pool.submit(600, extra="should_transfer_files = NO\nwhen_to_transfer_output =\n"
                                     '+FileSystemDomain = "shared.example.org"')   # no fixture VM mounts it

    def demand(*attributes: tuple[str, str]) -> list:
        size = Size("small", cores=2, ram_mb=2048, price=0.1, instance_type="t3.small", attributes=attributes)
        return [d for d in HTCondorScheduler(Htcondor2Bindings(pool.collector), sizes=(size,)).poll().demand]

    try:
        [plain] = pool.wait_for(demand, 30, "the job in the schedd")
        assert plain.sizes == frozenset() and "no size defines FileSystemDomain" in plain.unmatched
        assert "should_transfer_files = NO" in plain.unmatched and "FILESYSTEM_DOMAIN" in plain.unmatched
        [mounted] = demand(("FileSystemDomain", '"shared.example.org"'))
        assert mounted.sizes == frozenset({"small"}) and mounted.unmatched is None
    finally:
        pool.run("condor_rm", "-pool", pool.collector, "-name", "nm-schedd@nm-central", str(cluster))
