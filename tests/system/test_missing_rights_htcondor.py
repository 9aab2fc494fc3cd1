"""The daemon on a real HTCondor pool whose startds deny it ADMINISTRATOR (the head node's user is
not in their ALLOW_ADMINISTRATOR): the daemon process, libcloud's EC2 driver on moto_server and
real HTCondor daemons. The job runs; the idle VM's drain is refused for lack of rights, and
within a cycle the status page turns red, names the refusal on the node's line and the metric is
1, instead of a refusal retried every few seconds under a green header."""

from __future__ import annotations

import re
import time
import uuid

import pytest
import requests

from tests.fixtures.condor_contract import real_pool  # noqa: F401 - fixture
from tests.fixtures.moto import free_port
from tests.system.test_closed_loop import daemon_config, start_daemon, status, stop_daemon

pytestmark = [pytest.mark.htcondor, pytest.mark.ec2, pytest.mark.slow]

DENY = "DENY_ADMINISTRATOR = unauthenticated@*\n"   # the test client's identity: no drain right


def test_a_drain_the_startd_denies_turns_the_page_red(real_pool, moto_server, tmp_path, monkeypatch):
    import boto3
    pool = real_pool
    cluster = f"cr{uuid.uuid4().hex[:6]}"
    port = free_port()
    config = daemon_config(tmp_path, moto_server.port, cluster, port, f"type = htcondor\ncollector = {pool.collector}\n",
                           cores=2, ram_mb=2048)
    monkeypatch.setenv("CONDOR_CONFIG", str(pool.client_config))
    ec2 = boto3.client("ec2", endpoint_url=moto_server.url, region_name="us-east-1",
                       aws_access_key_id="AKIDCLOSEDLOOPTEST", aws_secret_access_key="x")
    log = tmp_path / "daemon.log"
    pool.submit(3, count=1, cpus=1, memory=500)
    proc = start_daemon(config, log)
    started: list[str] = []
    try:
        refused_at, doc = None, {}
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not (refused_at and doc.get("no_permission")):
            assert proc.poll() is None, log.read_text()[-3000:]
            if not started:
                pages = ec2.get_paginator("describe_instances").paginate(
                    Filters=[{"Name": "tag:nodemanager-cluster", "Values": [cluster]}])
                for inst in (i for p in pages for r in p["Reservations"] for i in r["Instances"]):
                    if inst["State"]["Name"] == "running":
                        name = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}.get("Name") or inst["InstanceId"]
                        pool.start_vm(name, cloud_id=inst["InstanceId"], cpus=2, memory=2048, extra=DENY)
                        started.append(name)
            if refused_at is None and re.search(r"outcome drain \S+, small: refused: no permission", log.read_text()):
                refused_at = time.monotonic()
            doc = status(port) or {}
            time.sleep(0.2)
        assert refused_at is not None and doc.get("no_permission"), log.read_text()[-4000:]
        assert time.monotonic() - refused_at < 3.0
        assert "DRAIN_JOBS (ADMINISTRATOR) not granted" in doc["no_permission"]
        node = next(n for n in doc["nodes"] if n["last_outcome"])
        assert node["last_outcome"].startswith("drain refused: no permission (")
        html = requests.get(f"http://127.0.0.1:{port}/", timeout=5).text
        assert "<span class='bad' id='health'>" in html
        metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        assert 'nodemanager_permission_denied{action="drain"} 1.0' in metrics
        time.sleep(5)                                 # max_backoff is 5 s: a transient error would be retried
        assert len(re.findall(r"outcome drain \S+, small: refused: no permission", log.read_text())) == 1
    finally:
        stop_daemon(proc)
        for name in started:
            if name in pool.masters:
                pool.stop_vm(name, kill=True)
