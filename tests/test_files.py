"""Files that are not files: a config, matrix or snapshot path naming a FIFO, a directory, a device
or a huge file is refused before reading, with an error naming the file, and never hangs."""

import os
import threading

import pytest

import policy_matrix
from nodemanager import snapshot
from nodemanager.configuration import config
from policy_matrix.files import FileRefused, read_capped


def _loaders():
    return {
        "config": (config.load, config.ConfigError),
        "matrix": (policy_matrix.load, policy_matrix.MatrixError),
        "snapshot": (snapshot.load, snapshot.SnapshotError),
    }


def _refused(load, error, path, timeout=10.0):
    """The error ``load(path)`` raises, failing the test if it raises nothing or does not return."""
    outcome = {}

    def call():
        try:
            load(path)
        except error as exc:
            outcome["error"] = exc
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome["other"] = exc
    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"loading {path} did not return within {timeout:.0f}s (blocked reading it)"
    assert "other" not in outcome, f"{outcome.get('other')!r} instead of a clear error"
    assert "error" in outcome, f"{path} was accepted"
    return str(outcome["error"])


@pytest.mark.parametrize("kind", ["config", "matrix", "snapshot"])
def test_a_fifo_is_refused_at_once_not_read(tmp_path, kind):
    fifo = tmp_path / f"{kind}.fifo"
    os.mkfifo(fifo)
    load, error = _loaders()[kind]
    message = _refused(load, error, str(fifo))
    assert str(fifo) in message and "is a FIFO, not a regular file" in message


@pytest.mark.parametrize("kind", ["config", "matrix", "snapshot"])
def test_a_directory_and_a_device_are_refused(tmp_path, kind):
    load, error = _loaders()[kind]
    message = _refused(load, error, str(tmp_path))
    assert str(tmp_path) in message and "is a directory, not a regular file" in message
    message = _refused(load, error, "/dev/zero")
    assert "/dev/zero" in message and "is a character device, not a regular file" in message


@pytest.mark.parametrize("kind, cap", [("config", config.MAX_BYTES), ("matrix", policy_matrix.MAX_BYTES),
                                       ("snapshot", snapshot.MAX_BYTES)])
def test_a_huge_sparse_file_is_refused_by_its_size_unread(tmp_path, kind, cap):
    big = tmp_path / f"{kind}.big"
    with open(big, "wb") as f:
        f.truncate(2 * 1024 ** 3)                       # 2 GiB, sparse: reading it would need 2 GiB
    load, error = _loaders()[kind]
    message = _refused(load, error, str(big))
    assert str(big) in message and f"file is {2 * 1024 ** 3} bytes" in message
    assert f"at most {cap} bytes" in message


def test_a_symlink_to_a_regular_file_is_read(tmp_path):
    real = tmp_path / "real.ini"
    real.write_text("[Daemon]\nmax_nodes = 3\n")
    link = tmp_path / "link.ini"
    link.symlink_to(real)
    assert config.load(str(link)).core.max_nodes == 3


def test_a_file_of_exactly_the_cap_is_read_one_byte_more_is_refused(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    with pytest.raises(FileRefused, match="at most 10 bytes"):
        read_capped(path, 10)
    assert read_capped(path, 11) == b"x" * 11
