"""The log as a site ships it: ``log_format = json`` writes one object per line with the
decision's fields, ``log_file`` a copy rotated by size; both through ``nodemanager run`` on the
embedded default, and a bad value refused at its line."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time

import pytest

from nodemanager.commands.run import setup_logging
from nodemanager.configuration.config import ConfigError, load
from tests.test_daemon import write_config
from tests.test_daemon_cli import Proc

LOGGING = "log_format = json\nlog_file = nm.log\nlog_file_max_mb = 1\nlog_file_keep = 2\n"


def _config(tmp_path, options: str = LOGGING) -> str:
    """The example configuration with ``options`` in place of its own log options."""
    cfg = write_config(tmp_path / "nm.ini", port="-1")
    given = {line.split("=")[0].strip() for line in options.splitlines()}
    lines = [line for line in open(cfg).read().splitlines() if line.split("=")[0].strip() not in given]
    at = lines.index("log_level = info") + 1
    open(cfg, "w").write("\n".join(lines[:at] + options.splitlines() + lines[at:]) + "\n")
    return cfg


@pytest.fixture
def root_handlers():
    """setup_logging adds handlers to the root logger: take them off again."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for h in root.handlers[:]:
        if h not in before:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


def _objects(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_daemon_writes_json_lines_with_the_decisions_fields_to_stderr_and_its_file(tmp_path):
    proc = Proc("run", "--config", _config(tmp_path))
    try:
        proc.wait_for('"request_id": "')                     # a boot's outcome, with its request
        deadline = time.monotonic() + 30
        decisions: list[dict] = []
        while not decisions and time.monotonic() < deadline:
            time.sleep(0.5)
            decisions = [o for o in _objects(tmp_path / "nm.log") if o.get("tuple")]
        proc.p.send_signal(signal.SIGTERM)
        assert proc.p.wait(timeout=30) == 0
    finally:
        if proc.p.poll() is None:
            proc.p.kill()
            proc.p.wait()
    stderr = [json.loads(line) for line in proc.seen]          # every stderr line is one object
    logged = _objects(tmp_path / "nm.log")
    assert [o["message"] for o in logged[:len(stderr)]] == [o["message"] for o in stderr]
    d = decisions[0]
    assert {"time", "level", "logger", "message", "node", "tuple", "rule", "action", "reason",
            "request_id"} <= set(d)
    assert d["logger"] == "nodemanager.decisions" and d["level"] == "INFO"
    assert d["message"].startswith(f"node {d['node']} -> ") and d["tuple"] in d["message"]
    assert d["rule"].startswith("default.matrix:") and d["reason"]
    [boot] = [o for o in logged if o.get("action") == "boot" and o.get("result") == "ok"][:1]
    assert f"(request {boot['request_id']})" in boot["message"] and "." not in boot["request_id"]


def test_the_log_file_is_rotated_at_its_size_and_keeps_its_count(tmp_path, root_handlers):
    settings = load(_config(tmp_path))
    assert settings.log.file == str(tmp_path / "nm.log")     # beside the config file
    setup_logging("info", stream=open(tmp_path / "stderr", "w"), log=settings.log)
    words = "x" * 1000
    for k in range(2600):                                      # about 2.6 MiB of records
        logging.getLogger("nodemanager.test").info("record %d %s", k, words)
    files = sorted(p.name for p in tmp_path.glob("nm.log*"))
    assert files == ["nm.log", "nm.log.1", "nm.log.2"]
    assert all(p.stat().st_size <= 1024 * 1024 for p in tmp_path.glob("nm.log*"))
    assert _objects(tmp_path / "nm.log")[-1]["message"].startswith("record 2599 ")


@pytest.mark.parametrize("option, words", [("log_format = yaml", "expected one of text, json"),
                                           ("log_file_max_mb = 0", "must be from 1 to 10240"),
                                           ("log_file_keep = 1000", "must be from 1 to 100")])
def test_a_bad_log_option_is_refused_at_its_line(tmp_path, option, words):
    cfg = _config(tmp_path, option + "\n")
    with pytest.raises(ConfigError) as err:
        load(cfg)
    line = open(cfg).read().splitlines().index(option) + 1
    assert f":{line}" in str(err.value) and words in str(err.value)
    r = subprocess.run([sys.executable, "-m", "nodemanager", "check", "--config", cfg],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and words in r.stdout + r.stderr
