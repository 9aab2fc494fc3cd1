"""Clouds differ by one table (nodemanager/cloud/providers.py), not by branches in the adapter: a
row says the create options, the spot market, the tagging and listing calls of one provider."""

from __future__ import annotations

import pathlib
import re

import pytest

from nodemanager.cloud import PROVIDERS, image_required
from nodemanager.cloud.markets import market_create_kwargs, market_problem
from nodemanager.cloud.providers import PROVIDER_TABLE
from nodemanager.configuration.settings import CloudSettings
from nodemanager.model import Size

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPOT = Size("s", cores=4, ram_mb=16000, price=0.1, billing_period=0, min_charge=0, market="spot",
            max_price=0.05)


def test_the_adapter_names_no_provider() -> None:
    for name in ("libcloud_driver.py", "libcloud_options.py", "markets.py", "port.py"):
        text = (ROOT / "nodemanager" / "cloud" / name).read_text()
        assert not re.search(r"provider\s*(==|!=|in)\s", text), name
        assert not re.search(r"""['"](ec2|gce|azure_arm|openstack|dummy)['"]""", text), name


def test_the_drivers_a_site_may_choose_are_the_rows_of_the_table() -> None:
    assert PROVIDERS == ("ec2", "gce", "azure_arm", "openstack", "dummy")
    assert [d for d in PROVIDERS if not image_required(d)] == ["dummy"]


@pytest.mark.parametrize("driver, kwargs, problem", [
    ("ec2", {"ex_spot": True, "ex_spot_max_price": 0.05}, None),
    ("gce", None, "max_price"),
    ("azure_arm", None, "market"),
    ("openstack", None, "market"),
    ("dummy", None, "market"),
])
def test_a_spot_size_is_bought_as_the_providers_row_says(driver, kwargs, problem) -> None:
    found = market_problem(driver, SPOT)
    assert (found[0] if found else None) == problem
    if kwargs is not None:
        assert market_create_kwargs(driver, SPOT) == kwargs
    if problem == "market":
        assert PROVIDER_TABLE[driver].no_spot in found[1]


def test_a_create_option_of_another_provider_is_refused_naming_the_known_ones() -> None:
    from nodemanager.cloud.libcloud_options import parse_options
    with pytest.raises(ValueError, match=r"\[Cloud Create\] resource_group: not an option for driver ec2 "
                                         r"\(known: .*key_name"):
        parse_options(CloudSettings(driver="ec2", create_args={"image": "ami-1", "resource_group": "rg"}))
    opts = parse_options(CloudSettings(driver="azure_arm", create_args={"image": "a:b:c",
                                                                      "resource_group": "rg"}))
    assert opts.create_kwargs == {"ex_resource_group": "rg"}
