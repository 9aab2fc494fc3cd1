"""scripts/relayout.py: a branch written against the old flat layout is brought to the folders by
running the script; a second run changes nothing, and this tree names no old module."""

from __future__ import annotations

import subprocess
import sys
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "relayout.py"

OLD_CODE = '''\
import logging

from nodemanager import config, snapshot as sj
from nodemanager.controller import Controller
from nodemanager.status_document import StatusView
import nodemanager.metrics

log = logging.getLogger("nodemanager.status")


def test_x(monkeypatch):
    from nodemanager import config_values as cv
    monkeypatch.setattr("nodemanager.actuate.time.time", lambda: 0.0)
    return nodemanager.metrics.Metrics, cv
'''
NEW_CODE = '''\
import logging

from nodemanager import snapshot as sj
from nodemanager.configuration import config
from nodemanager.cycle.controller import Controller
from nodemanager.console.status_document import StatusView
import nodemanager.console.metrics

log = logging.getLogger("nodemanager.status")


def test_x(monkeypatch):
    from nodemanager.configuration import values as cv
    monkeypatch.setattr("nodemanager.cycle.actuate.time.time", lambda: 0.0)
    return nodemanager.console.metrics.Metrics, cv
'''
OLD_DOC = "See `nodemanager/controller.py`, `nodemanager/console.py` and :mod:`nodemanager.whynot`.\n"
NEW_DOC = ("See `nodemanager/cycle/controller.py`, `nodemanager/console/page.py` and "
           ":mod:`nodemanager.console.whynot`.\n")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_old_imports_are_rewritten_once_and_a_second_run_changes_nothing(tmp_path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_old.py").write_text(OLD_CODE)
    (tmp_path / "README.md").write_text(OLD_DOC)
    (tmp_path / "setup.cfg").write_text("[mypy-nodemanager.config]\nignore_errors = True\n")
    assert run("--root", str(tmp_path), "--check").returncode == 1
    first = run("--root", str(tmp_path))
    assert first.returncode == 0
    assert sorted(first.stdout.split()) == ["README.md", "setup.cfg", "tests/test_old.py"]
    assert (tmp_path / "tests" / "test_old.py").read_text() == NEW_CODE
    assert (tmp_path / "README.md").read_text() == NEW_DOC
    assert (tmp_path / "setup.cfg").read_text() == "[mypy-nodemanager.configuration.config]\nignore_errors = True\n"
    second = run("--root", str(tmp_path))
    assert (second.returncode, second.stdout) == (0, "")
    assert (tmp_path / "tests" / "test_old.py").read_text() == NEW_CODE


def test_an_old_install_s_build_metadata_is_left_alone(tmp_path) -> None:
    stale = tmp_path / "nodemanager.egg-info"
    stale.mkdir()
    (stale / "SOURCES.txt").write_text("nodemanager/controller.py\nnodemanager/whynot.py\n")
    assert (run("--root", str(tmp_path), "--check").returncode, run("--root", str(tmp_path)).stdout) == (0, "")
    assert (stale / "SOURCES.txt").read_text() == "nodemanager/controller.py\nnodemanager/whynot.py\n"


def test_this_tree_names_no_old_module() -> None:
    check = run("--root", str(ROOT), "--check")
    assert (check.returncode, check.stdout) == (0, "")


def test_every_new_module_exists() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import relayout
    finally:
        sys.path.remove(str(SCRIPT.parent))
    for new in relayout.MOVES.values():
        assert (ROOT / "nodemanager" / (new.replace(".", "/") + ".py")).is_file(), new
    for old in relayout.MOVES:
        assert not (ROOT / "nodemanager" / f"{old}.py").exists(), old
