"""Configuration mistakes fail loudly: a size without a price, example placeholders on a real cloud,
`nodemanager check` asking the cloud itself (EC2 DryRun) whether each size would boot."""

from __future__ import annotations

import json
import re

import pytest

from nodemanager.cli import main
from nodemanager.configuration.config import load, loads
from tests.conftest import REPO
from tests.test_config_errors import _problems
from tests.test_preflight import _ec2_config

EC2 = "[Cloud]\ndriver = ec2\ncluster = site\n[Cloud Create]\nimage = ami-12c6146b\n"


def test_a_size_without_a_price_is_refused_on_a_real_cloud_and_price_0_is_allowed():
    assert _problems(EC2 + "[Size big]\ncores = 8\nram_mb = 16000\n") == [
        "site.ini:6: [Size big]: missing required option price: the hourly price the cloud charges "
        "(price = 0 for a size that costs nothing), else every decision and cap would take it as free"]
    free = loads(EC2 + "[Size big]\ncores = 8\nram_mb = 16000\nprice = 0\n")
    assert free.core.sizes[0].price == 0
    overridden = loads(EC2 + "[Size big]\ncores = 8\nram_mb = 16000\nprice_override = 0.2\n")
    assert overridden.core.sizes[0].price == 0.2
    loads("[Size big]\ncores = 8\nram_mb = 16000\n")  # the simulated cloud bills nothing


def test_check_fails_on_a_size_without_a_price_naming_it(tmp_path, capsys):
    config = tmp_path / "nm.ini"
    config.write_text(EC2 + "[Size big]\ncores = 8\nram_mb = 16000\n")
    assert main(["check", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert f"[FAIL] config: {config}:6: [Size big]: missing required option price" in out, out


@pytest.mark.parametrize("section, option, value", [
    ("Cloud Create", "image", "ami-0123456789abcdef0"), ("Cloud Create", "image", "<your-ami>"),
    ("Cloud Create", "key_name", "cluster-key"), ("Cloud", "cluster", "demo"),
    ("Cloud", "region", "<your-region>"), ("Size big", "image", "ami-0123456789abcdef0")])
def test_example_values_are_refused_on_a_real_cloud_at_their_line(section, option, value):
    text = EC2.replace("cluster = site\n", "" if option == "cluster" else "cluster = site\n")
    text += "[Size big]\ncores = 8\nram_mb = 16000\nprice = 0.1\n"
    if option == "image" and section == "Cloud Create":
        text = text.replace("image = ami-12c6146b", f"image = {value}")
    else:
        text = text.replace(f"[{section}]\n", f"[{section}]\n{option} = {value}\n")
    line = text.splitlines().index(f"{option} = {value}") + 1
    problems = _problems(text)
    assert f"site.ini:{line}: [{section}] {option}: {value!r} is the example's placeholder, not this " \
           "site's value: set the real one" in problems


def test_a_placeholder_secret_is_refused_without_being_quoted():
    text = EC2.replace("cluster = site\n", "cluster = site\nkey = <access-key-id>\n")
    problems = _problems(text + "[Size big]\ncores = 8\nram_mb = 16000\nprice = 0.1\n")
    assert problems == ["site.ini:4: [Cloud] key: the value is the example's placeholder, not this "
                        "site's value: set the real one"]


def test_the_example_config_still_runs_on_the_simulated_cloud():
    settings = load(str(REPO / "config.example.ini"))
    assert settings.cloud.driver == "simulated" and settings.cloud.cluster == "demo"
    text = (REPO / "config.example.ini").read_text().replace("# image = ami-0123456789abcdef0",
                                                            "image = ami-0123456789abcdef0")
    loads(text)  # the placeholder image is fine where nothing is billed


@pytest.mark.ec2
def test_check_asks_ec2_whether_each_size_would_boot(ec2_proxy, tmp_path, capsys):
    config = _ec2_config(tmp_path, ec2_proxy.port)
    config.write_text(config.read_text() + "[Size m5.large]\ncores = 2\nram_mb = 8000\nprice = 0.1\n")
    main(["check", "--config", str(config), "--format", "json"])  # the scheduler fails: none runs here
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    for size in ("t3.large", "m5.large"):
        assert checks[f"cloud dry run: boot {size}"]["ok"] is True, checks
        assert "DryRunOperation" in checks[f"cloud dry run: boot {size}"]["detail"]


@pytest.mark.ec2
def test_check_reports_what_ec2_refuses_in_a_boot(ec2_proxy, tmp_path, capsys):
    """EC2's answer to the dry run of one size's boot (here: an instance type the region does not
    offer) fails that size's check, in EC2's words; the other size passes."""
    config = _ec2_config(tmp_path, ec2_proxy.port)
    config.write_text(config.read_text() + "[Size m5.large]\ncores = 2\nram_mb = 8000\nprice = 0.1\n")
    ec2_proxy.fail("RunInstances", 400, "Unsupported", times=0, instance_type="m5.large",
                   message="The requested configuration is currently not supported.")
    assert main(["check", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^\[ok  \] cloud dry run: boot t3\.large: the cloud would boot it", out, re.M), out
    assert re.search(r"^\[FAIL\] cloud dry run: boot m5\.large: the cloud refuses it: refused: "
                     r"Unsupported: The requested configuration is currently not supported", out, re.M), out
    assert "fix: correct what the cloud names in [Cloud Create] or [Size m5.large]" in out
