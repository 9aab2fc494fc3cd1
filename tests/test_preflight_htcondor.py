"""`nodemanager check` against a real HTCondor central manager and the local EC2 endpoint: the
collector reachable and READ granted there (what every poll needs), or the check fails saying
which of the two is missing."""

from __future__ import annotations

import json

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
