"""The running daemon notices an edited matrix file by itself (no SIGHUP): a good one is swapped in
after the next cycle, a bad one keeps the last good matrix with every error logged and shown, and
an unchanged file is not re-read."""

import logging
import os

from tests.test_daemon import REPO, daemons, run_for, write_config  # noqa: F401 - daemons is a fixture
from tests.test_daemon_cli import BAD_MATRIX, bad_matrix_errors

DEFAULT = (REPO / "policy_matrix" / "default.matrix").read_text()


def reloads(d, result):
    return d.metrics.registry.get_sample_value("nodemanager_matrix_reloads_total", {"result": result})


def edit(path, text, mtime):
    """Write ``text`` with an explicit mtime (two edits within one kernel tick would share one)."""
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def started_on_a_copy_of_the_default(tmp_path, daemons, caplog):
    """A daemon on ``my.matrix`` (the default matrix), a few cycles in; (daemon, matrix path)."""
    caplog.set_level(logging.INFO, "nodemanager.daemon")
    matrix = tmp_path / "my.matrix"
    edit(matrix, DEFAULT, 1_700_000_000)
    d = daemons(write_config(tmp_path / "nm.ini", matrix=str(matrix))).start()
    run_for(d, 20)
    return d, matrix


def test_an_edited_matrix_is_swapped_in_after_the_next_cycle_without_sighup(tmp_path, daemons, caplog):
    d, matrix = started_on_a_copy_of_the_default(tmp_path, daemons, caplog)
    first, ok_before = d.controller.matrix.sha256, reloads(d, "ok")
    edit(matrix, DEFAULT.replace("busy           | *      | *             | *             -> None",
                                 "busy           | *      | *             | *             -> None  # kept"),
         1_700_000_100)
    run_for(d, 10)
    assert d.controller.matrix.sha256 != first
    assert d.last_report.matrix_hash == d.controller.matrix.sha256
    assert reloads(d, "ok") == ok_before + 1
    assert d.metrics.registry.get_sample_value("nodemanager_matrix_file_mtime_seconds") == 1_700_000_100
    assert f"matrix file {matrix} changed: matrix {matrix} in force" in caplog.text
    run_for(d, 60)                                  # unchanged since: not read again, not counted
    assert reloads(d, "ok") == ok_before + 1


def test_a_bad_edit_keeps_the_last_good_matrix_logs_every_error_once_and_shows_it(tmp_path, daemons, caplog):
    d, matrix = started_on_a_copy_of_the_default(tmp_path, daemons, caplog)
    good = d.controller.matrix.sha256
    edit(matrix, BAD_MATRIX, 1_700_000_100)
    run_for(d, 60)
    assert d.controller.matrix.sha256 == good
    for where in bad_matrix_errors(matrix):
        assert caplog.text.count(where) == 1, where         # every error, logged once, not every cycle
    assert reloads(d, "error") == 1
    assert d.last_report.matrix_error.startswith(f"{matrix}:1:33: unknown action 'Nope'")
    assert "2 more" in d.last_report.matrix_error
    assert d.status_view().report.matrix_error == d.last_report.matrix_error   # the status page's source
    edit(matrix, DEFAULT, 1_700_000_200)               # fixed: the error clears
    run_for(d, 10)
    assert d.last_report.matrix_error is None and d.controller.matrix.sha256 == good
