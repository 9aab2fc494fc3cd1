"""An administrator drains a node and forgets it, against the real parts: the real daemon process,
a real slurmctld (``scontrol update State=DRAIN Reason="admin: bad disk"``), libcloud's EC2
driver on moto_server, and the status page. The idle VM is left alone, reads idle and drained by
someone else (how long ago, their reason), and once idle past idle_grace + paid_idle_after it is
listed as paid idle with what keeps it and its cost, the header turns amber and the metric counts
it."""

from __future__ import annotations

import re
import time

import pytest
import requests

from tests.fixtures.moto import free_port
from tests.system.test_closed_loop import harness, start_daemon, status, stop_daemon, write_config

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

ADMIN = "admin: bad disk"


@pytest.fixture
def parts(moto_server):
    yield from harness(moto_server, nodes=2)


def test_a_forgotten_admin_drain_is_idle_left_alone_and_flagged_as_paid_idle(parts, moto_server, tmp_path):
    cluster, slurm, hv = parts
    port = free_port()
    config = write_config(tmp_path, moto_server.port, cluster, slurm, port)
    config.write_text(config.read_text().replace("idle_grace = 10s\n", "idle_grace = 10s\npaid_idle_after = 8s\n"))
    job = int(slurm.run("sbatch", "--parsable", "-n1", "--wrap", "sleep 6").stdout.split(";")[0])
    log = tmp_path / "daemon.log"
    proc = start_daemon(config, log)
    try:
        slurm.wait_job(job, "RUNNING", timeout=90)
        node = slurm.run("squeue", "-h", "-j", str(job), "-o", "%N").stdout.strip()
        slurm.set_node(node, "State=DRAIN", f"Reason={ADMIN}")     # while its job runs
        slurm.wait_state(node, "drain", timeout=30)                  # the job ended: drained, idle
        row, doc = None, None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            doc = status(port) or {}
            row = next((n for n in doc.get("nodes", []) if n["worker"] == node), None)
            if row and doc.get("paid_idle"):
                break
            time.sleep(0.5)
        assert row is not None and doc, log.read_text()[-3000:]
        assert row["tuple"]["worker_state"] == "idle" and row["blocked_by"] == "foreign_drain"
        assert re.search(rf"drained by someone else \d[^:]* ago: {ADMIN}", row["why"]), row["why"]
        assert row["planned_action"] is None
        flagged = doc["paid_idle"]
        assert [p["name"] for p in flagged] == [row["name"]], flagged
        assert flagged[0]["kept_because"].startswith("foreign_drain: ") and ADMIN in flagged[0]["kept_because"]
        assert flagged[0]["cost_so_far"] > 0 and flagged[0]["idle_for_seconds"] >= 18
        html = requests.get(f"http://127.0.0.1:{port}/", timeout=5).text
        assert "id='paid-idle'" in html and "paid idle for" in html
        assert "<span class='warn' id='health'>" in html
        metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        assert 'nodemanager_paid_idle_nodes{kept_because="foreign_drain"} 1.0' in metrics
        # theirs is never touched: still running, still drained with their reason
        assert row["node_id"] in {i for i, inst in hv.instances().items() if inst["State"]["Name"] == "running"}
        assert slurm.states()[node] == "drain"
        assert not re.search(rf"outcome (drain|cancel_drain|escalate|destroy) {row['node_id']}", log.read_text())
    finally:
        stop_daemon(proc)
