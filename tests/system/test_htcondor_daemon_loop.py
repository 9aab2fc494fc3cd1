"""The closed loop as a site runs it on HTCondor: the daemon process (``python -m nodemanager run``)
with `[Scheduler] type = htcondor`, libcloud's EC2 driver against moto_server, and a real pool of
HTCondor daemons (:mod:`tests.fixtures.condor_pool`). The test plays the hypervisor: for every
running instance of the cluster it starts a startd named for it and advertising its instance id,
and it kills that startd when the instance is terminated.

Checked: every job ran once to its end, no instance is left running, each VM was destroyed only
after our drain of it finished, and the status page and the log named the tuple,
matched rule and action of each decision.
"""

from __future__ import annotations

import pathlib
import re
import time
import uuid

import pytest

from tests.fixtures.condor_contract import real_pool  # noqa: F401 - fixture
from tests.fixtures.moto import free_port
from tests.system.test_closed_loop import daemon_config, start_daemon, status, stop_daemon

pytestmark = [pytest.mark.htcondor, pytest.mark.ec2, pytest.mark.slow]

JOBS, JOB_SECONDS = 3, 12
DEADLINE = 240.0


def test_the_daemon_boots_drains_and_destroys_vms_of_a_real_pool_and_says_why(real_pool, moto_server, tmp_path,
                                                                              monkeypatch):
    import boto3
    pool = real_pool
    cluster = f"cc{uuid.uuid4().hex[:6]}"
    port = free_port()
    config = daemon_config(tmp_path, moto_server.port, cluster, port, f"type = htcondor\ncollector = {pool.collector}\n",
                           cores=2, ram_mb=2048)
    monkeypatch.setenv("CONDOR_CONFIG", str(pool.client_config))   # the daemon's bindings reach the pool
    ec2 = boto3.client("ec2", endpoint_url=moto_server.url, region_name="us-east-1",
                       aws_access_key_id="AKIDCLOSEDLOOPTEST", aws_secret_access_key="x")
    log = tmp_path / "daemon.log"
    job_cluster = pool.submit(JOB_SECONDS, count=JOBS, cpus=1, memory=500)
    proc = start_daemon(config, log)
    started: dict[str, str] = {}                     # instance id -> its startd's name
    seen: dict[str, dict] = {}                       # node id -> what the status page said of it
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            assert proc.poll() is None, f"daemon exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"loop not finished:\n{log.read_text()[-4000:]}"
            live = set()
            pages = ec2.get_paginator("describe_instances").paginate(
                Filters=[{"Name": "tag:nodemanager-cluster", "Values": [cluster]}])
            for inst in (i for page in pages for r in page["Reservations"] for i in r["Instances"]):
                iid, state = inst["InstanceId"], inst["State"]["Name"]
                name = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}.get("Name") or iid
                if state in ("pending", "running"):
                    live.add(iid)
                if state == "running" and iid not in started:
                    started[iid] = name
                    pool.start_vm(name, cloud_id=iid, cpus=2, memory=2048)
            for iid, name in started.items():         # a destroyed VM's startd dies with it
                if iid not in live and name in pool.masters:
                    pool.stop_vm(name, kill=True)
            for n in (status(port) or {}).get("nodes", []):
                e = seen.setdefault(n["node_id"], {"actions": set()})
                e.update({k: n[k] for k in ("tuple_text", "rule", "why")})
                if n["planned_action"]:
                    e["actions"].add(n["planned_action"])
            done = pool.jobs(f"ClusterId == {job_cluster} && JobStatus == 4", ["JobStatus"])
            if started and not live and len(done) == JOBS:
                break
            time.sleep(1.0)
        # a drain planned and finished between two looks at the page is in the node's history
        final = status(port) or {}
        for n in [*final.get("nodes", []), *final.get("recent", [])]:
            for ev in n.get("events", []):   # the page gives each event as {"at", "kind", "text"}
                planned = re.search(r"\) \S+\.matrix:\d+ \S+ -> (\w+)", ev["text"]) if ev["kind"] == "decision" else None
                if planned and planned.group(1) != "none" and n["node_id"] in seen:
                    seen[n["node_id"]]["actions"].add(planned.group(1))
    finally:
        stop_daemon(proc)
    text = log.read_text()

    ads = pool.jobs(f"ClusterId == {job_cluster}", ["ProcId", "JobStatus", "NumJobStarts"])
    assert len(ads) == JOBS and all(j["JobStatus"] == 4 and j.get("NumJobStarts") == 1 for j in ads), ads
    assert "Traceback" not in text and "closed-loop-secret-not-real" not in text
    # each VM destroyed once, after our drain of it finished (the destroy decision says so)
    destroyed = re.findall(r"outcome destroy (\S+), \S+: ok", text)
    assert sorted(destroyed) == sorted(started), (destroyed, started)
    lines = text.splitlines()
    for iid, name in started.items():
        drains = [i for i, line in enumerate(lines) if f"node {name} " in line and "-> drain" in line]
        destroys = [i for i, line in enumerate(lines)
                    if f"node {name} " in line and "-> destroy: our drain" in line and "finished" in line]
        assert drains and destroys and drains[0] < destroys[0], (name, text[-3000:])
        # the log's decision lines name node, tuple, matched rule and action
        assert all(re.search(r" -> \S+: .+; \(.*\).* rule \S+\.matrix:\d+ says \S+", lines[i]) for i in drains + destroys)
    # the status page explained every VM: tuple, matched rule, a drain and a destroy planned (the
    # page's node table, or the node's history there)
    assert set(started) <= set(seen), (started, seen)
    for node_id, e in seen.items():
        assert e["tuple_text"].startswith("(") and ".matrix:" in e["rule"] and e["why"], (node_id, e)
        assert {"drain", "destroy"} <= e["actions"], (node_id, e)
