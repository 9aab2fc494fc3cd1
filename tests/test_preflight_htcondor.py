"""`nodemanager check` against a real HTCondor central manager and the local EC2 endpoint: the
collector reachable and READ granted there (what every poll needs), or the check fails saying
which of the two is missing."""

from __future__ import annotations

import json
import pathlib

import pytest

from nodemanager.cli import main
from tests.fixtures.condor_contract import real_pool  # noqa: F401 - fixture
from tests.test_preflight import _ec2_config

pytestmark = [pytest.mark.htcondor, pytest.mark.ec2]


def _checks(ec2_proxy, tmp_path, capsys, collector: str) -> tuple[int, dict[str, dict]]:
    config = _ec2_config(tmp_path, ec2_proxy.port)
    config.write_text(config.read_text().replace("collector = 127.0.0.1:1", f"collector = {collector}"))
    code = main(["check", "--config", str(config), "--format", "json"])
    return code, {c["name"]: c for c in json.loads(capsys.readouterr().out)}


def test_a_reachable_collector_granting_read_passes(real_pool, ec2_proxy, tmp_path, capsys):
    code, checks = _checks(ec2_proxy, tmp_path, capsys, real_pool.collector)
    assert code == 0, {n: c["detail"] for n, c in checks.items() if c["ok"] is not True}
    assert checks["htcondor collector"]["detail"] == f"{real_pool.collector}: reachable"
    assert checks["htcondor READ at the collector"]["detail"].startswith(f"{real_pool.collector}: READ granted to ")


def test_an_unreachable_collector_fails(ec2_proxy, tmp_path, capsys):
    code, checks = _checks(ec2_proxy, tmp_path, capsys, "127.0.0.1:1")
    assert code == 1
    assert checks["htcondor collector"] == {
        "name": "htcondor collector", "ok": False, "detail": "127.0.0.1:1: not reachable: Connection refused",
        "fix": "set [Scheduler] collector (host:port) to the pool's collector, and let this host reach it"}
    assert "htcondor READ at the collector" not in checks


def test_a_collector_refusing_read_fails_naming_the_level(real_pool, ec2_proxy, tmp_path, capsys):
    config = real_pool.dir / "cm" / "condor.config"
    before = config.read_text()
    config.write_text(before + "DENY_READ = unauthenticated@*\n")  # this client's CLAIMTOBE identity
    real_pool.run("condor_reconfig", "-daemon", "collector")
    try:
        real_pool.wait_for(lambda: _checks(ec2_proxy, tmp_path, capsys, real_pool.collector)[1][
            "htcondor READ at the collector"]["ok"] is False, 20, "READ refused")
        code, checks = _checks(ec2_proxy, tmp_path, capsys, real_pool.collector)
    finally:
        config.write_text(before)
        real_pool.run("condor_reconfig", "-daemon", "collector")
    assert code == 1
    read = checks["htcondor READ at the collector"]
    assert read["detail"].startswith(f"{real_pool.collector}: READ refused")
    assert read["fix"].startswith("allow this host and user READ at the collector (ALLOW_READ)")
    assert checks["htcondor collector"]["ok"] is True


def _steering_checks(real_pool, ec2_proxy, tmp_path, capsys) -> tuple[int, dict[str, dict]]:
    config = _ec2_config(tmp_path, ec2_proxy.port)
    text = config.read_text().replace("collector = 127.0.0.1:1", f"collector = {real_pool.collector}")
    config.write_text(text + "[Daemon]\nsteering = yes\n")
    code = main(["check", "--config", str(config), "--format", "json"])
    return code, {c["name"]: c for c in json.loads(capsys.readouterr().out)}


def test_steering_warns_until_the_negotiator_ranks_by_the_keep_rank(real_pool, ec2_proxy, tmp_path, capsys):
    """With [Daemon] steering on, a negotiator without the shipped rank places jobs as before:
    the check warns (and says what to install); once the central manager has the file, it passes."""
    code, checks = _steering_checks(real_pool, ec2_proxy, tmp_path, capsys)
    steer = checks["htcondor steering"]
    assert code == 0 and steer["ok"] is None
    assert "does not read NodeManagerKeepRank: jobs are placed as without steering" in steer["detail"]
    assert steer["fix"].startswith("install deploy/htcondor/70-nodemanager-steering.conf on the central manager")
    config = real_pool.dir / "cm" / "condor.config"
    before = config.read_text()
    shipped = pathlib.Path(__file__).parent.parent / "deploy" / "htcondor" / "70-nodemanager-steering.conf"
    config.write_text(before + shipped.read_text())
    real_pool.run("condor_reconfig", "-daemon", "negotiator")
    try:
        real_pool.wait_for(lambda: _steering_checks(real_pool, ec2_proxy, tmp_path, capsys)[1][
            "htcondor steering"]["ok"] is True, 20, "the negotiator ranks by NodeManagerKeepRank")
    finally:
        config.write_text(before)
        real_pool.run("condor_reconfig", "-daemon", "negotiator")


def test_without_steering_there_is_no_steering_check(real_pool, ec2_proxy, tmp_path, capsys):
    _, checks = _checks(ec2_proxy, tmp_path, capsys, real_pool.collector)
    assert "htcondor steering" not in checks


def test_the_drain_right_at_our_startds_and_read_at_the_schedd_are_asked(real_pool, ec2_proxy, tmp_path, capsys):
    """Without ADMINISTRATOR at a startd every drain is refused and idle VMs stay paid: check
    asks a startd of ours for DRAIN_JOBS (as condor_ping does) and the schedd for READ."""
    code, checks = _checks(ec2_proxy, tmp_path, capsys, real_pool.collector)
    assert checks["htcondor READ at the schedds"]["ok"] is True
    assert checks["htcondor READ at the schedds"]["detail"].startswith("nm-schedd@nm-central: READ granted to ")
    assert checks["htcondor DRAIN_JOBS at the startds"]["ok"] is None       # no VM of ours yet: undecided
    name = "pf-1"
    real_pool.start_vm(name, extra="DENY_ADMINISTRATOR = unauthenticated@*\n")   # this client's identity
    config = real_pool._host_path(real_pool.vm_config[name])
    try:
        real_pool.wait_vm(name)
        code, checks = _checks(ec2_proxy, tmp_path, capsys, real_pool.collector)
        assert code == 1
        drain = checks["htcondor DRAIN_JOBS at the startds"]
        assert drain["ok"] is False and drain["detail"].startswith(f"{name}: DRAIN_JOBS refused"), drain
        assert drain["fix"].startswith("allow this host and user ADMINISTRATOR at the execute nodes' startds")
        config.write_text(config.read_text().replace("DENY_ADMINISTRATOR = unauthenticated@*\n", ""))
        real_pool.restart_vm(name)
        real_pool.wait_for(lambda: _checks(ec2_proxy, tmp_path, capsys, real_pool.collector)[1][
            "htcondor DRAIN_JOBS at the startds"]["ok"] is True, 60, "DRAIN_JOBS granted after the fix")
        real_pool.stop_vm(name, kill=True)           # a dead VM's ad stays: it answers nothing, refuses nothing
        drain = _checks(ec2_proxy, tmp_path, capsys, real_pool.collector)[1]["htcondor DRAIN_JOBS at the startds"]
        assert drain["ok"] is None and drain["detail"].startswith(f"{name}: DRAIN_JOBS not answered"), drain
    finally:
        if name in real_pool.masters:
            real_pool.stop_vm(name, kill=True)
