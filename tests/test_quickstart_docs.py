"""Both quickstarts' configuration blocks load as they are written (with a site's values in the
placeholders), and every file they tell the operator to copy exists in the repository."""

from __future__ import annotations

import re

import pytest

from nodemanager.configuration import config
from tests.conftest import REPO

SITE = {"<your-region>": "eu-west-1", "<access-key-id>": "AKIDEXAMPLE",
        "<secret-access-key>": "example-secret", "<your-ami>": "ami-12c6146b"}


@pytest.mark.parametrize("doc", ["quickstart-ec2-slurm.md", "quickstart-ec2-htcondor.md"])
def test_quickstart_config_loads_and_its_files_exist(doc, tmp_path):
    text = (REPO / "docs" / doc).read_text()
    (block,) = re.findall(r"```ini\n(.*?)```", text, re.S)
    for placeholder, value in SITE.items():
        block = block.replace(placeholder, value)
    assert not re.search(r"<[a-z-]+>", block)
    path = tmp_path / "nodemanager.ini"
    path.write_text(block)
    settings = config.load(str(path))
    assert settings.cloud.driver == "ec2" and settings.core.sizes
    assert settings.cloud.create_args["user_data_file"].startswith("/etc/nodemanager/")
    for shipped in set(re.findall(r"\b(deploy/[\w./-]+\w)", text)):
        assert (REPO / shipped).exists(), shipped
