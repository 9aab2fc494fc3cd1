"""MatrixSource: re-read on change, atomic swap, last good table kept on error."""

from __future__ import annotations

import hashlib
import os

import pytest

import policy_matrix
from policy_matrix import Action, MatrixError, MatrixSource, StateTuple

IDLE_OPEN = StateTuple("idle", "open", "boot wait", "idle exceeded")
GOOD = "idle | open | * | idle exceeded -> START_DRAIN\n* | * | * | * -> None\n"
OTHER = "idle | * | * | idle exceeded -> START_SHUTDOWN\n* | * | * | * -> None\n"


def write(path, text: str | bytes, bump: int) -> None:
    data = text.encode() if isinstance(text, str) else text
    path.write_bytes(data)
    # Distinct mtimes without sleeping: coarse file system clocks would otherwise hide the change.
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump * 1_000_000_000))


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "site.matrix"
    write(p, GOOD, 0)
    return p


def test_unchanged_file_is_not_reparsed(path):
    source = MatrixSource(str(path))
    first = source.current
    assert source.refresh() is False
    assert source.current is first
    assert source.sha256 == hashlib.sha256(GOOD.encode()).hexdigest()


def test_changed_file_is_swapped_in(path):
    source = MatrixSource(path)
    write(path, OTHER, 1)
    assert source.refresh() is True
    assert source.current.lookup(IDLE_OPEN).action is Action.START_SHUTDOWN
    assert source.sha256 == hashlib.sha256(OTHER.encode()).hexdigest()
    assert source.last_error is None


def test_touched_but_identical_file_is_not_a_change(path):
    source = MatrixSource(path)
    write(path, GOOD, 1)
    assert source.refresh() is False
    assert source.last_error is None


def test_bad_edit_keeps_last_good_and_reports_error_and_hash(path):
    source = MatrixSource(path)
    good = source.current
    bad = "idle | open | * | idle exceed -> START_DRAIN\n* | * | * | * -> None\n"
    write(path, bad, 1)
    assert source.refresh() is False
    assert source.current is good
    assert isinstance(source.last_error, MatrixError)
    assert (source.last_error.line, source.last_error.column) == (1, 19)
    assert "did you mean 'idle exceeded'?" in str(source.last_error)
    assert source.last_error_hash == hashlib.sha256(bad.encode()).hexdigest()
    assert source.sha256 == good.sha256
    write(path, OTHER, 2)
    assert source.refresh() is True
    assert source.last_error is None and source.last_error_hash is None


def test_deleted_file_keeps_last_good(path):
    source = MatrixSource(path)
    path.unlink()
    assert source.refresh() is False
    assert "cannot read" in str(source.last_error)
    assert source.current.lookup(IDLE_OPEN).action is Action.START_DRAIN


def test_none_means_the_default_matrix():
    source = MatrixSource(None)
    assert source.sha256 == policy_matrix.load_default().sha256
    assert source.refresh() is False


def test_bad_file_at_start_raises(tmp_path):
    p = tmp_path / "bad.matrix"
    p.write_bytes(b"\x00")
    with pytest.raises(MatrixError, match="binary content"):
        MatrixSource(p)


def test_strict_source_rejects_shadowed_rules(path):
    source = MatrixSource(path, strict=True)
    write(path, GOOD + "busy | * | * | * -> START_DRAIN\n", 1)
    assert source.refresh() is False
    assert "rule never applies" in str(source.last_error)
