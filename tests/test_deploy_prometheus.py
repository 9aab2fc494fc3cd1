"""A real Prometheus (Debian package) on loopback scrapes a status server and a running
`nodemanager run` daemon, loads the alert rules, and answers queries for our metrics and for
every dashboard expression."""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Iterator

import pytest
import requests

from tests.conftest import REPO
from tests.test_deploy import METRIC_NAME, PROM, alert_rules, dashboard_exprs

pytestmark = pytest.mark.prometheus


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _prometheus(target_port: int, tmp_path: pathlib.Path) -> Iterator[str]:
    """A Prometheus on a free loopback port scraping 127.0.0.1:target_port every second, with our
    alert rules loaded; yields its URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus not installed (Debian package prometheus; scripts/test installs it)")
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(PROM / "alerts.yml")],
        "scrape_configs": [{"job_name": "nodemanager", "static_configs": [
            {"targets": [f"127.0.0.1:{target_port}"]}]}],
    }))
    tsdb = tmp_path / "tsdb"  # fresh per test: old samples would answer queries (see notes §3)
    with open(tmp_path / "prometheus.log", "w") as log:
        proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait(lambda: requests.get(url + "/-/ready", timeout=1).status_code == 200, proc,
                  tmp_path / "prometheus.log", "prometheus did not start")
            yield url
        finally:
            _stop(proc)


def _wait(ready: Callable[[], bool], proc: subprocess.Popen, log: pathlib.Path, what: str,
          timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except requests.ConnectionError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what}: " + log.read_text()[-3000:])
        time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def prometheus(status_server, tmp_path) -> Iterator[str]:
    with _prometheus(status_server.address[1], tmp_path) as url:
        yield url


def _query(url: str, expr: str) -> dict:
    resp = requests.get(url + "/api/v1/query", params={"query": expr}, timeout=5)
    body = resp.json()
    assert body["status"] == "success", (expr, body)
    return body["data"]


def test_prometheus_scrapes_the_status_server(prometheus: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        result = _query(prometheus, 'nodemanager_nodes_held{job="nodemanager"}')["result"]
        if result or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result, "no sample of nodemanager_nodes_held within 30 s"
    assert float(result[0]["value"][1]) == 1
    tuples = _query(prometheus, 'sum(nodemanager_nodes{worker_state="idle"})')["result"]
    assert float(tuples[0]["value"][1]) == 4
    up = _query(prometheus, 'up{job="nodemanager"}')["result"]
    assert float(up[0]["value"][1]) == 1
    rules = requests.get(prometheus + "/api/v1/rules", timeout=5).json()["data"]["groups"]
    loaded = {r["name"] for g in rules for r in g["rules"]}
    assert loaded == {r["alert"] for r in alert_rules()}
    for rule in (r for g in rules for r in g["rules"]):
        assert rule["health"] == "ok", rule
    for expr in dashboard_exprs():  # every panel's query is valid PromQL
        _query(prometheus, expr.replace("$instance", ".*"))


def _families(text: str) -> set[str]:
    """Metric names in a /metrics page: every declared family (even one with no sample yet, as a
    labelled counter before its first event) and every sample name."""
    from prometheus_client.parser import text_string_to_metric_families

    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)", text, re.M):
        names.add(name)
        if kind == "histogram":
            names.update(name + suffix for suffix in ("_bucket", "_count", "_sum"))
    for family in text_string_to_metric_families(text):
        names.update(s.name for s in family.samples)
    return names


def _poll(prometheus: str, expr: str, timeout: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        result = _query(prometheus, expr)["result"]
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


def test_prometheus_scrapes_a_running_daemon_of_the_embedded_default(tmp_path) -> None:
    """`nodemanager run` with the shipped example config (simulated cloud and pool), polled every
    second: Prometheus scrapes its cycles and nodes, and its status page explains every node."""
    port = _free_port()
    text = (REPO / "config.example.ini").read_text()
    for option, value in (("cloud_interval", "1s"), ("scheduler_interval", "1s"),
                          ("cycle_interval", "1s"), ("port", str(port)),
                          ("token", "daemon-test-token"), ("state_dir", "state")):
        text, n = re.subn(rf"^{option} *=.*$", f"{option} = {value}", text, flags=re.M)
        assert n == 1, option
    config = tmp_path / "nodemanager.ini"
    config.write_text(text)
    config.chmod(0o600)
    log = tmp_path / "daemon.log"
    with open(log, "w") as out:
        daemon = subprocess.Popen([sys.executable, "-m", "nodemanager", "run", "--config",
                                   str(config)], stdout=out, stderr=subprocess.STDOUT,
                                  cwd=tmp_path)
    try:
        status = f"http://127.0.0.1:{port}"
        _wait(lambda: requests.get(status + "/healthz", timeout=1).status_code == 200, daemon,
              log, "the daemon did not become healthy")
        with _prometheus(port, tmp_path) as prometheus:
            cycles = _poll(prometheus, 'nodemanager_cycles_total{job="nodemanager"} > 0')
            assert cycles, "no cycle scraped within 30 s"
            nodes = _poll(prometheus, "sum(nodemanager_nodes) > 0")
            assert nodes, "no node scraped within 30 s"
            assert _query(prometheus, "nodemanager_build_info")["result"]
            for expr in dashboard_exprs():  # every panel's query runs on this daemon's series
                _query(prometheus, expr.replace("$instance", ".*"))
        exposed = _families(requests.get(status + "/metrics", timeout=5).text)
        used = {name for expr in dashboard_exprs() for name in METRIC_NAME.findall(expr)}
        assert used and not used - exposed, f"dashboard metrics this daemon does not expose: {used - exposed}"
        doc = requests.get(status + "/status.json", timeout=5).json()
        assert doc["nodes"] and doc["healthy"]
        for node in doc["nodes"]:
            assert re.search(r"default\.matrix:\d+$", node["rule"]) and node["why"], node
        assert "daemon-test-token" not in log.read_text()
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    assert daemon.returncode == 0, log.read_text()[-3000:]
