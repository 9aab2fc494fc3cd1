"""EC2 spot through the adapter, against moto_server: what RunInstances carries for ``[Cloud
Create] spot`` / ``spot_max_price`` and what the cloud reports back.

What moto serves: ``InstanceMarketOptions.MarketType=spot`` makes a spot instance
(``instanceLifecycle`` ``spot`` in DescribeInstances). What it lacks: it ignores ``MaxPrice``
(no price check, no spot request id), and never interrupts or reclaims a spot instance.
"""

from __future__ import annotations

import pytest
from libcloud.compute.providers import get_driver

from nodemanager.cloud import TAG_REQUEST
from nodemanager.cloud.ec2compat import tolerant_ec2_driver
from nodemanager.model import Size

pytestmark = pytest.mark.ec2

SMALL = Size("small", cores=2, ram_mb=2048, instance_type="t3.small")


def _lifecycle(proxy, node_id: str) -> str | None:
    """The instance's ``instanceLifecycle`` as DescribeInstances reports it to another client."""
    driver = tolerant_ec2_driver(get_driver("ec2"))("AKIDOTHER", "other-secret", region="us-east-1",
                                                    host="127.0.0.1", port=proxy.port, secure=False,
                                                    signature_version="4")
    [seen] = driver.list_nodes(ex_node_ids=[node_id])
    return seen.extra.get("instance_lifecycle")


def _run_instances(proxy) -> list[dict[str, str]]:
    return [{k: v[0] for k, v in p.items()} for p in proxy.params.get("RunInstances", [])]


def test_spot_create_asks_for_the_spot_market_with_the_max_price(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud(create_args={"spot": "yes", "spot_max_price": "0.0416"})
    node = cloud.create_node(SMALL, "spot-1", {TAG_REQUEST: "r-spot"})
    [sent] = _run_instances(ec2_proxy)
    assert sent["InstanceMarketOptions.MarketType"] == "spot"
    assert float(sent["InstanceMarketOptions.SpotOptions.MaxPrice"]) == 0.0416
    assert sent["ClientToken"] == "r-spot"
    [listed] = cloud.list_nodes()
    assert listed.id == node.id and listed.state == "running"
    assert _lifecycle(ec2_proxy, node.id) == "spot"


def test_on_demand_create_sends_no_market_options(ec2_cloud, ec2_proxy):
    cloud = ec2_cloud(create_args={"spot": "no", "spot_max_price": "0.5"})
    node = cloud.create_node(SMALL, "od-1", {TAG_REQUEST: "r-od"})
    [sent] = _run_instances(ec2_proxy)
    assert not any(k.startswith("InstanceMarketOptions") for k in sent)
    assert _lifecycle(ec2_proxy, node.id) != "spot"


def test_a_spot_size_buys_the_spot_market_beside_an_on_demand_size(ec2_cloud, ec2_proxy):
    """[Size NAME] market = spot: each size is bought on its own market, through one
    adapter; max_price becomes SpotOptions.MaxPrice, and no max price leaves it out (AWS then
    charges the spot price, capped at on-demand)."""
    cloud = ec2_cloud()
    spot = Size("small-spot", cores=2, ram_mb=2048, instance_type="t3.small", market="spot",
                max_price=0.02)
    cheap = Size("small-spot-any", cores=2, ram_mb=2048, instance_type="t3.small", market="spot")
    nodes = [cloud.create_node(s, s.name, {TAG_REQUEST: f"r-{s.name}"}) for s in (spot, cheap, SMALL)]
    sent = _run_instances(ec2_proxy)
    assert sent[0]["InstanceMarketOptions.MarketType"] == "spot"
    assert float(sent[0]["InstanceMarketOptions.SpotOptions.MaxPrice"]) == 0.02
    assert sent[1]["InstanceMarketOptions.MarketType"] == "spot"
    assert not any(k.startswith("InstanceMarketOptions.SpotOptions") for k in sent[1])
    assert not any(k.startswith("InstanceMarketOptions") for k in sent[2])
    assert [_lifecycle(ec2_proxy, n.id) for n in nodes] == ["spot", "spot", None]
