"""``nodemanager check``'s SLURM rights line on a site with slurmdbd, where an admin level gives a
user the right to drain. slurmdbd does not run here, so ``sacctmgr`` is a script answering as
slurmdbd's ``sacctmgr -n -P show user NAME format=User,AdminLevel`` does; the site without
slurmdbd is tested against a real slurmctld in tests/system/test_missing_rights_slurm.py."""

import stat

import pytest

from nodemanager.preflight.slurm import rights_check
from nodemanager.scheduler.slurm_options import SlurmOptions

DBD = {"SlurmUser": "slurm(64030)", "AccountingStorageType": "accounting_storage/slurmdbd"}


def options(tmp_path, reply: str) -> SlurmOptions:
    tool = tmp_path / "sacctmgr"
    tool.write_text(f"#!/bin/sh\nprintf '%s' '{reply}'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return SlurmOptions(bin_dir=str(tmp_path))


@pytest.mark.parametrize("level", ["Operator", "Administrator"])
def test_an_admin_level_gives_the_right(tmp_path, level):
    c = rights_check(DBD, options(tmp_path, f"nodemanager|{level}\n"), user="nodemanager")
    assert c.ok is True and c.detail == f"nodemanager has AdminLevel={level}"


def test_no_admin_level_fails_naming_the_sacctmgr_fix(tmp_path):
    c = rights_check(DBD, options(tmp_path, "nodemanager|None\n"), user="nodemanager")
    assert c.ok is False and "AdminLevel=None" in c.detail and "Invalid user id" in c.detail
    assert "sacctmgr modify user nodemanager set AdminLevel=Operator" in c.fix
    c = rights_check(DBD, options(tmp_path, ""), user="nodemanager")
    assert c.ok is False and "no SLURM user of that name" in c.detail


def test_slurm_user_and_root_need_no_level(tmp_path):
    assert rights_check(DBD, options(tmp_path, ""), user="slurm").ok is True
    assert rights_check(DBD, options(tmp_path, ""), user="root").ok is True


def test_without_slurmdbd_only_root_and_slurm_user_may(tmp_path):
    conf = {"SlurmUser": "root(0)", "AccountingStorageType": "accounting_storage/none"}
    c = rights_check(conf, options(tmp_path, "nodemanager|Operator\n"), user="nodemanager")
    assert c.ok is False and "without slurmdbd" in c.detail and "run the daemon as root (SlurmUser)" in c.fix
