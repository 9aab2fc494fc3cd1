"""What a site admin installs by following the docs: our own distribution name (never the unrelated
project that holds `nodemanager` on the package index), and a systemd unit whose program and
configuration paths are the ones the quickstarts create."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

UNIT = REPO / "deploy" / "systemd" / "nodemanager.service"
QUICKSTARTS = ["quickstart-ec2-slurm.md", "quickstart-ec2-htcondor.md"]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _exec_start() -> str:
    (line,) = re.findall(r"^ExecStart=(.*)$", UNIT.read_text(), re.M)
    return line


def test_the_distribution_name_is_ours_and_no_doc_installs_the_other_project() -> None:
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    name = setup["metadata"]["name"]
    assert name != "nodemanager"
    assert f"`{name}`" in (REPO / "README.md").read_text()
    for doc in DOCS:
        text = doc.read_text()
        assert not re.search(r"pip3? install (-\S+ )*nodemanager(\s|$|`)", text), doc.name


def test_slurm_quickstart_creates_what_the_unit_runs() -> None:
    text = (REPO / "docs" / "quickstart-ec2-slurm.md").read_text()
    (venv,) = set(re.findall(r"python3 -m venv (\S+)", text))
    configs = set(re.findall(r"nodemanager check --config (\S+)", text))
    assert len(configs) == 1
    (config,) = configs
    assert f"`{config}`" in text, "the page names the file it writes"
    assert _exec_start() == f"{venv}/bin/nodemanager run --config {config}"


@pytest.mark.parametrize("doc", QUICKSTARTS)
def test_each_quickstart_checks_the_file_the_unit_reads(doc: str) -> None:
    text = (REPO / "docs" / doc).read_text()
    config = _exec_start().split("--config ", 1)[1]
    assert set(re.findall(r"--config ([^\s`]+)", text)) == {config}
    assert "/opt/nodemanager" in text


def test_systemd_accepts_the_unit_as_the_quickstart_installs_it(tmp_path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze not installed (scripts/test installs systemd)")
    program = _exec_start().split()[0]
    venv = program.rsplit("/bin/", 1)[0]
    # the quickstart's virtual environment, made for real under a private prefix
    local_venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(local_venv)], check=True)
    entry = local_venv / "bin" / "nodemanager"
    entry.write_text(f"#!{local_venv}/bin/python\nfrom nodemanager.cli import main\nmain()\n")
    entry.chmod(0o755)
    unit = tmp_path / "nodemanager.service"
    unit.write_text(UNIT.read_text().replace(venv + "/", f"{local_venv}/"))
    proc = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
