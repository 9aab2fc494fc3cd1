"""One instance only: a second `nodemanager run` for the same cluster, or one whose status port is
taken, stops before any cloud or scheduler call with one line saying why."""

import os
import signal
import socket
import subprocess
import sys

import pytest

from nodemanager.cycle.lock import InstanceLock, InstanceRunning, LockError, lock_path
from tests.fixtures.moto import EC2_IMAGE
from tests.test_daemon_cli import private_config, running, stops_cleanly

EXIT_RUNNING = 75


def ec2_config(path, proxy_port, *, status_port=-1, cluster="pool1", state_dir="state"):
    """A real-cloud config (libcloud EC2 on the test proxy, SLURM) sharing ``cluster`` and
    ``state_dir`` with the simulated one from ``write_config``: the same cluster to the lock."""
    path.write_text(f"""[Cloud]
driver = ec2
cluster = {cluster}
key = AKIDNODEMANAGERTEST
secret = moto-secret-not-real
region = us-east-1
host = 127.0.0.1
port = {proxy_port}
secure = no
[Cloud Create]
image = {EC2_IMAGE}
[Scheduler]
type = slurm
[Polling]
cloud_interval = 1s
[Manage]
port = {status_port}
state_dir = {state_dir}
[Size small]
cores = 2
ram_mb = 1000
price = 0.1
""")
    path.chmod(0o600)
    return str(path)


def run_briefly(config, timeout=60.0):
    """`nodemanager run --config config` that must exit by itself; (exit code, output)."""
    proc = subprocess.Popen([sys.executable, "-m", "nodemanager", "run", "--config", config],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"it kept running instead of refusing to start:\n{out[-1500:]}")
    return proc.returncode, out


@pytest.fixture
def first(tmp_path):
    """A running daemon (embedded default, cluster "pool1", state_dir tmp_path/state)."""
    config = private_config(tmp_path, "first.ini")
    with open(config) as f:
        text = f.read().replace("\ncluster = demo\n", "\ncluster = pool1\n")
    with open(config, "w") as f:
        f.write(text)
    with running("run", "--config", config) as proc:
        yield proc


def test_a_second_instance_with_the_same_config_refuses_and_names_the_first(tmp_path, first):
    code, out = run_briefly(str(tmp_path / "first.ini"))
    assert code == EXIT_RUNNING, out
    assert f"pid {first.p.pid} on {socket.gethostname()} since " in out
    assert str(tmp_path / "state" / "pool1.lock") in out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
    assert "boot" not in out and "started" not in out       # its simulated world never ran
    assert first.p.poll() is None                            # and the first one runs on


def test_a_second_instance_makes_no_cloud_call(tmp_path, first, ec2_proxy):
    code, out = run_briefly(ec2_config(tmp_path / "second.ini", ec2_proxy.port))
    assert code == EXIT_RUNNING, out
    assert ec2_proxy.actions == [], f"the refused instance called EC2: {ec2_proxy.actions}"


def test_a_taken_status_port_is_a_config_error_before_any_cloud_call(tmp_path, ec2_proxy):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out = run_briefly(ec2_config(tmp_path / "nm.ini", ec2_proxy.port, status_port=port))
    assert code == 2, out
    assert "[Manage] port" in out and f"127.0.0.1:{port}" in out and "Traceback" not in out
    assert ec2_proxy.actions == [], f"it called EC2 before finding the port taken: {ec2_proxy.actions}"


def test_the_lock_of_a_killed_instance_does_not_block_the_next(tmp_path, first):
    first.p.send_signal(signal.SIGKILL)
    first.p.wait()
    assert (tmp_path / "state" / "pool1.lock").read_text().startswith(f"{first.p.pid} ")  # stale file
    with running("run", "--config", str(tmp_path / "first.ini")) as nxt:
        assert stops_cleanly(nxt)


def test_a_state_dir_that_cannot_be_made_is_a_config_error(tmp_path, ec2_proxy):
    (tmp_path / "file").write_text("not a directory")
    code, out = run_briefly(ec2_config(tmp_path / "nm.ini", ec2_proxy.port, state_dir="file/state"))
    assert code == 2, out
    assert "[Manage] state_dir" in out and str(tmp_path / "file" / "state") in out
    assert ec2_proxy.actions == []


def test_a_dry_run_takes_no_lock(tmp_path, first, ec2_proxy):
    """A dry run never acts, so it may run beside the daemon to try a config (docs/operations.md)."""
    with running("run", "--dry-run", "--config", ec2_config(tmp_path / "dry.ini", ec2_proxy.port)) as proc:
        assert stops_cleanly(proc)


# -- the lock itself ------------------------------------------------------------------------------

def test_the_lock_names_its_holder_and_is_free_again_after_release(tmp_path):
    held = InstanceLock.acquire(str(tmp_path / "s"), "demo", clock=lambda: 1_700_000_000.0)
    assert oct(os.stat(tmp_path / "s").st_mode & 0o777) == "0o700"
    with pytest.raises(InstanceRunning) as refused:
        InstanceLock.acquire(str(tmp_path / "s"), "demo")     # a lock is per open file: also in-process
    assert refused.value.holder == held.holder
    assert f"pid {os.getpid()} on {socket.gethostname()} since 2023-11-14 22:13:20 UTC" in str(refused.value)
    InstanceLock.acquire(str(tmp_path / "s"), "other").release()  # another cluster: its own lock
    held.release()
    InstanceLock.acquire(str(tmp_path / "s"), "demo").release()


def test_a_cluster_name_cannot_put_the_lock_elsewhere(tmp_path):
    assert lock_path(str(tmp_path), "../x/y") == str(tmp_path / ".._x_y.lock")


def test_an_unusable_state_dir_is_a_lock_error(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(LockError, match=str(tmp_path / "f" / "d")):
        InstanceLock.acquire(str(tmp_path / "f" / "d"), "demo")
