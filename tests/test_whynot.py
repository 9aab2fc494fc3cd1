"""Why not? One typed, bounded reason for each node kept and each queued demand not booted for,
the same for the page, ``nodemanager why`` and the ``nodemanager_why_not`` metric."""

from __future__ import annotations

import policy_matrix
import pytest

from nodemanager.core import plan
from nodemanager.model import CycleReport
from nodemanager.console.whynot import DEMAND_REASONS, NODE_REASONS, of_report
from tests.core_world import Demand, node, pool, settings, snap
from tests.fixtures.observability import sample_report

MATRIX = policy_matrix.load_default()


def _report(s, st=None) -> CycleReport:
    return CycleReport(snapshot=s, plan=plan(s, st or settings(), MATRIX))


def _demand(report: CycleReport) -> list[tuple[str, str]]:
    return [(w.key, w.reason) for w in of_report(report).demand]


def test_max_nodes_binds_queued_demand() -> None:
    nodes, workers = pool({"busy": "alloc", "down": "down*"})
    r = _report(snap(nodes, workers, demand=[Demand(cpus=4, count=5)]), settings(max_nodes=4))
    assert _demand(r) == [("5 job(s) of 4 cpus, 0 MB", "max_nodes")]
    assert r.plan.unmet[0].jobs == 3   # 2 of the 5 get the 2 nodes left under the cap
    assert "max_nodes 4 reached (4 nodes incl. booting)" in of_report(r).demand[0].text


@pytest.mark.parametrize("kw, st, reason", [
    ({"quota": 3}, {}, "quota"),
    ({}, {"max_total_price": 0.6}, "max_total_price"),
    ({"blocked_sizes": frozenset({"small", "hourly", "large"})}, {}, "backoff"),
    ({"paused": "maintenance"}, {}, "paused"),
])
def test_each_boot_limit_is_named(kw, st, reason) -> None:
    r = _report(snap(demand=[Demand(cpus=4, count=5)], **kw), settings(**st))
    assert {w.reason for w in of_report(r).demand} == {reason}, r.plan.notes


def test_a_job_no_size_fits_is_no_size() -> None:
    assert _demand(_report(snap(demand=[Demand(cpus=64, count=1)]))) == \
        [("1 job(s) of 64 cpus, 0 MB", "no_size")]


def test_met_demand_has_no_why_not() -> None:
    assert of_report(_report(snap(demand=[Demand(cpus=4, count=2)]))).demand == ()


def test_each_kept_node_gets_one_reason_and_a_node_given_back_none() -> None:
    report = sample_report()
    why = of_report(report)
    nodes = {e.node_id: why.node(e) for e in report.plan.nodes}
    assert {k: w.reason for k, w in nodes.items() if w} == {
        "i-busy": "matrix", "i-grace": "matrix", "i-boot": "matrix", "i-held": "held",
        "i-min": "min_nodes"}   # i-idle drains, i-down is destroyed, i-drain is draining
    assert nodes["i-idle"] is None and nodes["i-drain"] is None
    assert nodes["i-min"].text == (
        "nm-small-5 is kept: min_nodes: draining it would leave fewer than min_nodes=6 nodes "
        "(rule default.matrix:30 says START_DRAIN)")
    assert nodes["i-busy"].text.startswith(
        "nm-small-1 is kept: rule default.matrix:12 says None for (busy, closed")


def test_reasons_are_bounded_and_counted_once_per_report() -> None:
    nodes, workers = pool({"a": "idle", "b": "idle"})
    r = _report(snap(nodes + [node("c", age=60)], workers, demand=[Demand(cpus=64, count=1)]),
                settings(min_nodes=3))
    assert of_report(r) is of_report(r)   # computed once
    counts = of_report(r).counts()
    assert set(counts) == {("node", x) for x in NODE_REASONS} | {("demand", x) for x in DEMAND_REASONS}
    assert counts[("node", "min_nodes")] == 2 and counts[("demand", "no_size")] == 1
    assert sum(counts.values()) == len(of_report(r).reasons) + len(of_report(r).demand) == 4
