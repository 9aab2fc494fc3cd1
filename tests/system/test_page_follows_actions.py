"""The status page follows the daemon's own boots and destroys at once, not at the next cloud
listing: against the real daemon process, a real slurmctld and libcloud's EC2 driver on
moto_server, with the cloud polled every 30 s and cycles every second. A VM just created is paid
for (spend) before any listing shows it; a VM just destroyed is no longer paid and reads
"destroyed by us" at once; the next listing confirms it (the node leaves the table)."""

from __future__ import annotations

import re
import time

import pytest
import requests

from tests.fixtures.moto import free_port
from tests.system.test_closed_loop import harness, start_daemon, status, stop_daemon, write_config

pytestmark = [pytest.mark.slurm, pytest.mark.ec2]

PRICE = 0.02          # the closed loop configuration's small size
AT_ONCE = 3.0         # seconds: a cycle (1 s) and our look at the page, far below the 30 s listing


@pytest.fixture
def parts(moto_server):
    yield from harness(moto_server, nodes=2)


def _after(log, pattern: str, proc, deadline: float) -> tuple[str, float]:
    """The first match of ``pattern`` in the daemon's log, and when this test saw it."""
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        m = re.search(pattern, log.read_text())
        if m:
            return m.group(1), time.monotonic()
        time.sleep(0.1)
    pytest.fail(f"{pattern!r} not in the log:\n{log.read_text()[-3000:]}")


def _page_within(port: int, ok, since: float, what: str) -> dict:
    doc: dict = {}
    while time.monotonic() - since < AT_ONCE:
        doc = status(port) or {}
        if doc and ok(doc):
            return doc
        time.sleep(0.1)
    pytest.fail(f"the page did not show {what} within {AT_ONCE}s: {doc.get('summary')}, "
                f"{[(n['node_id'], n['why']) for n in doc.get('nodes', [])]}")


def _metrics(port: int) -> str:
    return requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text


def test_a_boot_and_a_destroy_show_on_the_page_and_in_spend_at_once(parts, moto_server, tmp_path):
    cluster, slurm, hv = parts
    port = free_port()
    config = write_config(tmp_path, moto_server.port, cluster, slurm, port)
    text = config.read_text().replace("cloud_interval = 1s", "cloud_interval = 30s")
    config.write_text(text.replace("poll_stale_after = 30s", "poll_stale_after = 120s"))
    slurm.run("sbatch", "--parsable", "-n1", "--wrap", "sleep 2")
    log = tmp_path / "daemon.log"
    proc = start_daemon(config, log)
    try:
        vm, booted = _after(log, r"outcome boot (i-\w+), small: ok", proc, time.monotonic() + 60)
        doc = _page_within(port, lambda d: d["summary"]["spend"]["per_hour"] == PRICE, booted, "the boot in spend")
        assert vm not in {n["node_id"] for n in doc["nodes"]}       # no listing has shown it yet
        assert doc["summary"]["booting"] == 1
        assert f'nodemanager_estimated_spend_per_hour{{size="small"}} {PRICE}' in _metrics(port)

        vm, destroyed = _after(log, r"outcome destroy (i-\w+), small: ok", proc, time.monotonic() + 120)

        def gone_at_once(d: dict) -> bool:
            row = next((n for n in d["nodes"] if n["node_id"] == vm), None)
            return row is not None and row["why"].startswith("destroyed by us")
        doc = _page_within(port, gone_at_once, destroyed, "the destroy")
        assert doc["summary"]["spend"]["per_hour"] == 0
        assert f'nodemanager_estimated_spend_per_hour{{size="small"}} {PRICE}' not in _metrics(port)
        assert "the next cloud listing confirms it" in next(n for n in doc["nodes"] if n["node_id"] == vm)["why"]

        deadline = time.monotonic() + 45                            # the next listing confirms it
        while time.monotonic() < deadline:
            doc = status(port) or {}
            if doc and vm not in {n["node_id"] for n in doc["nodes"]}:
                break
            time.sleep(0.5)
        assert vm not in {n["node_id"] for n in doc["nodes"]}
        assert vm in {r["node_id"] for r in doc["recent"]} and doc["summary"]["spend"]["per_hour"] == 0
    finally:
        stop_daemon(proc)
