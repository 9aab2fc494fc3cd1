"""``[Size] price_override`` and ``licence_price``: the price a site really pays per node-hour (a
reservation or savings plan rate, a licence per VM) is the one size choice, ``max_total_price``,
the spend metrics and the simulator's money use; the configured price stays visible."""

from __future__ import annotations

import json

import pytest

from nodemanager.cli import main
from nodemanager.configuration import ConfigError, loads
from nodemanager.console.limits_page import limits_html
from nodemanager.console.metrics import Metrics
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.model import CycleReport, Plan, Snapshot

NOW = 1767225600

SIZES = """[Daemon]
max_nodes = 20
max_total_price = {cap}

[Size small]
cores = 2
ram_mb = 8000
price = 0.10
{small}

[Size big]
cores = 8
ram_mb = 32000
price = 0.35
{big}
"""


def _boots(tmp_path, capsys, small="", big="", cap=0, jobs=8):
    (tmp_path / "nm.ini").write_text(SIZES.format(cap=cap, small=small, big=big))
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": NOW, "polled_at": {"cloud": NOW - 5, "scheduler": NOW - 5},
        "demand": [{"cpus": 2, "ram_mb": 1000, "count": jobs}]}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config", str(tmp_path / "nm.ini"),
                 "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return sorted((b["size"], b["count"]) for b in json.loads(out)["boots"])


def test_a_reservation_rate_and_a_licence_change_which_size_boots(tmp_path, capsys):
    # list prices: 8 jobs on two big nodes (0.70/h) beat eight small ones (0.80/h)
    assert _boots(tmp_path, capsys) == [("big", 2)]
    # small nodes bought under a reservation at 0.06/h: eight of them (0.48/h) win
    assert _boots(tmp_path, capsys, small="price_override = 0.06") == [("small", 8)]
    # a per-VM licence (0.05/h) weighs more on many small nodes: 0.88/h against two big ones' 0.80/h
    assert _boots(tmp_path, capsys, small="price_override = 0.06\nlicence_price = 0.05",
                  big="licence_price = 0.05") == [("big", 2)]


def test_the_price_cap_counts_the_overridden_price(tmp_path, capsys):
    only_small = "max_nodes = 0"   # keeps the choice to small nodes: big ones would be cheaper
    assert _boots(tmp_path, capsys, big=only_small + "\nprice_override = 9", cap=0.2) == [("small", 2)]
    assert _boots(tmp_path, capsys, small="price_override = 0.05", big="price_override = 9", cap=0.2) \
        == [("small", 4)]


def test_status_page_and_metrics_show_the_effective_and_configured_price():
    core = loads(SIZES.format(cap=0, small="price_override = 0.06\nlicence_price = 0.02", big="")).core
    small = core.size("small")
    assert (small.price, small.list_price) == (pytest.approx(0.08), 0.10)
    assert core.size("big").list_price is None
    metrics = Metrics(sizes=core.sizes)
    price = metrics.registry.get_sample_value
    assert price("nodemanager_size_price_per_hour", {"size": "small", "kind": "effective"}) == pytest.approx(0.08)
    assert price("nodemanager_size_price_per_hour", {"size": "small", "kind": "list"}) == 0.10
    assert price("nodemanager_size_price_per_hour", {"size": "big", "kind": "effective"}) == 0.35
    report = CycleReport(snapshot=Snapshot(now=NOW, polled_at={}), plan=Plan(now=NOW))
    doc = status_document(StatusView(report=report, last_cycle_at=NOW, core=core), None, NOW)
    assert doc["price_overrides"] == [{"size": "small", "price": pytest.approx(0.08), "list_price": 0.10}]
    assert "size small: 0.08/h as decisions and spend count it (configured price 0.1/h" in limits_html(doc)


def _money(tmp_path, capsys, extra):
    head = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"
    (tmp_path / "t.swf").write_text(head + "".join(
        f"{i} 1000 0 3600 2 -1 -1 2 900 -1 1 1 1 -1 1 1 -1 -1\n" for i in (1, 2)))
    (tmp_path / "sim.ini").write_text("[Polling]\ncycle_interval = 30s\n[Size small]\ncores = 2\n"
                                      "ram_mb = 8000\nprice = 0.10\n" + extra)
    code = main(["simulate", "--trace", str(tmp_path / "t.swf"), "--config", str(tmp_path / "sim.ini"),
                 "--boot-delay", "60", "--join-delay", "30", "--jobs", "1", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    run = json.loads(out.out)["runs"][0]
    return run["paid_node_hours"], run["money"]


def test_the_simulator_counts_money_at_the_overridden_price(tmp_path, capsys):
    hours, money = _money(tmp_path, capsys, "")
    assert money == pytest.approx(hours * 0.10, abs=1e-3)
    hours2, money2 = _money(tmp_path, capsys, "price_override = 0.05\nlicence_price = 0.02\n")
    assert hours2 == hours and money2 == pytest.approx(hours * 0.07, abs=1e-3)


def test_a_negative_override_is_an_error_naming_the_line():
    with pytest.raises(ConfigError) as err:
        loads("[Size small]\ncores = 2\nram_mb = 8000\nprice_override = -1\n", "nm.ini")
    assert "nm.ini:4: [Size small] price_override:" in str(err.value)
