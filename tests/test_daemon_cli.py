"""`nodemanager run` as a process: signals (SIGHUP reload, SIGTERM clean stop) and config errors."""

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from tests.test_daemon import REPO, write_config

BAD_MATRIX = ("unpaired | * | boot wait | * -> Nope\n"
              "busy | sometimes | * | * -> None\n"
              "idle | * | * | * -> START_DRAINN\n")


def bad_matrix_errors(path):
    """What the daemon must log, each with file:line:col, for ``BAD_MATRIX`` saved at ``path``."""
    return (f"{path}:1:33: unknown action 'Nope'", f"{path}:2:8: unknown window 'sometimes'",
            f"{path}:3:21: unknown action 'START_DRAINN'")


class Proc:
    def __init__(self, *args):
        self.p = subprocess.Popen([sys.executable, "-m", "nodemanager", *args], stderr=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stderr:
            self.lines.put(line)

    def wait_for(self, text, timeout=30.0):
        """Wait until a line containing ``text`` was logged (at any time so far)."""
        for line in self.seen:
            if text in line:
                return line
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not logged; got:\n{''.join(self.seen[-20:])}")


def test_sighup_reloads_and_sigterm_stops_cleanly(tmp_path):
    cfg = write_config(tmp_path / "nm.ini", port="0")
    os.chmod(cfg, 0o600)
    proc = Proc("run", "--config", cfg)
    try:
        proc.wait_for("outcome boot")                       # the embedded default at work
        proc.wait_for("nodemanager.daemon: started")
        write_config(tmp_path / "nm.ini", port="0", idle_grace="bad")
        proc.p.send_signal(signal.SIGHUP)
        proc.wait_for("reload rejected")
        proc.seen.clear()
        write_config(tmp_path / "nm.ini", port="0", idle_grace="2m")
        proc.p.send_signal(signal.SIGHUP)
        proc.wait_for("reload: configuration")
        proc.p.send_signal(signal.SIGTERM)
        proc.wait_for("stopped cleanly")
        assert proc.p.wait(timeout=30) == 0
    finally:
        if proc.p.poll() is None:
            proc.p.kill()
            proc.p.wait()


def test_bad_config_is_refused_before_anything_starts(tmp_path):
    cfg = write_config(tmp_path / "nm.ini", idle_grace="soon")
    r = subprocess.run([sys.executable, "-m", "nodemanager", "run", "--config", cfg],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "[Daemon] idle_grace" in r.stderr and "Traceback" not in r.stderr


def test_mismatched_simulated_ports_are_refused(tmp_path):
    cfg = write_config(tmp_path / "nm.ini")
    with open(cfg) as f:
        content = f.read().replace("type = simulated", "type = slurm")
    content = "\n".join(line for line in content.splitlines()
                        if not line.split("=")[0].strip() in ("boot_delay", "join_delay", "burst_every",
                                                               "burst_size", "job_runtime", "job_cpus", "seed"))
    with open(cfg, "w") as f:
        f.write(content)
    r = subprocess.run([sys.executable, "-m", "nodemanager", "run", "--config", cfg],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "simulated" in r.stderr and "Traceback" not in r.stderr


@contextlib.contextmanager
def running(*args, ready="nodemanager.daemon: started"):
    """`nodemanager ARGS`, once it logged ``ready``; killed at the end if it still runs."""
    proc = Proc(*args)
    try:
        proc.wait_for(ready)
        yield proc
    finally:
        if proc.p.poll() is None:
            proc.p.kill()
            proc.p.wait()


def stops_cleanly(proc, timeout=30.0):
    """SIGTERM: True when the process exits 0 within ``timeout`` seconds."""
    proc.p.send_signal(signal.SIGTERM)
    return proc.p.wait(timeout=timeout) == 0


def private_config(tmp_path, name="nm.ini", **kw):
    """``write_config`` with mode 600 (no credentials warning) and a status port of its own."""
    cfg = write_config(tmp_path / name, **{"port": "0", **kw})
    os.chmod(cfg, 0o600)
    return cfg


def test_sighup_with_a_fifo_config_is_refused_and_sigterm_still_stops_within_10s(tmp_path):
    cfg = private_config(tmp_path)
    with running("run", "--config", cfg) as proc:
        os.replace(cfg, tmp_path / "saved.ini")
        os.mkfifo(cfg)                                      # nobody ever writes to it
        proc.p.send_signal(signal.SIGHUP)
        proc.wait_for("is a FIFO, not a regular file", timeout=10)
        assert stops_cleanly(proc, timeout=10)


def test_sighup_with_a_2gb_config_keeps_the_running_configuration(tmp_path):
    import urllib.request
    cfg = private_config(tmp_path)
    with running("run", "--config", cfg, ready="status page at") as proc:
        url = proc.wait_for("status page at").split("status page at ")[1].strip()
        os.truncate(cfg, 2 * 1024 ** 3)                     # sparse: 2 GiB of nothing
        proc.p.send_signal(signal.SIGHUP)
        proc.wait_for("reload rejected", timeout=10)
        proc.wait_for(f"nm.ini: [-]: file is {2 * 1024 ** 3} bytes; a config file may be at most 1048576 bytes")
        proc.seen.clear()
        proc.wait_for("nodemanager.decisions: cycle:")     # still deciding, on the old configuration
        with urllib.request.urlopen(url + "/healthz", timeout=10) as r:
            assert r.status == 200
        assert stops_cleanly(proc)


def test_sighup_with_a_matrix_of_three_errors_logs_all_three(tmp_path):
    matrix = tmp_path / "my.matrix"
    matrix.write_text((REPO / "policy_matrix" / "default.matrix").read_text())
    with running("run", "--config", private_config(tmp_path, matrix=str(matrix))) as proc:
        matrix.write_text(BAD_MATRIX)
        proc.p.send_signal(signal.SIGHUP)
        for where in bad_matrix_errors(matrix):
            proc.wait_for(where, timeout=10)
        assert stops_cleanly(proc)
