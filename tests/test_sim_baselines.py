"""The simulator's peer baselines decide with shipped matrix files an operator can read, check
and diff, not with copies inside the code."""

from __future__ import annotations

import configparser
import fnmatch
import os
import pathlib

from nodemanager.cli import main
from nodemanager.configuration.config import loads
from nodemanager.sim import baselines as B

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_each_baseline_decides_with_its_shipped_matrix_file(capsys):
    for policy in B.baselines(loads(""), 4):
        path = os.path.join(B.MATRIX_DIR, f"{policy.baseline}.matrix")
        assert policy.matrix.source == path, policy.name
        assert main(["matrix", "check", path]) == 0, capsys.readouterr()
        # the file's rules are what the replay looks up: every rule location points into it
        assert {m.rule.file for _, m in policy.matrix.entries()} == {path}


def test_the_baseline_matrix_files_are_installed_with_the_package():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    globs = [g.strip() for g in cfg["options.package_data"]["nodemanager"].split(",")]
    package = ROOT / "nodemanager"
    files = sorted(str(p.relative_to(package)) for p in pathlib.Path(B.MATRIX_DIR).glob("*.matrix"))
    assert len(files) == 6
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)] == []
