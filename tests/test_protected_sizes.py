"""Protected mode: a size whose VMs fail to join N times in a row is not booted
for a back-off that grows, reset by a join; the snapshot, the status page and the metric say so."""

import dataclasses
import logging

from prometheus_client import generate_latest

from nodemanager.core.protected import BootRecord, observe_boots, protected_sizes
from nodemanager.console.metrics import Metrics
from nodemanager.model import NodeExplanation, StateTuple
from policy_matrix.vocabulary import Action
from tests.fixtures.daemon import sim_settings
from tests.test_controller import Loop, outcomes


def _never_joining(**core):
    s = sim_settings(join_delay="1d")  # the VMs boot but their startds never join
    return dataclasses.replace(s, core=dataclasses.replace(s.core, **core))


def test_a_size_whose_vms_never_join_is_protected_instead_of_booted_in_a_loop(caplog):
    caplog.set_level(logging.WARNING, "nodemanager.decisions")
    unprotected = Loop(_never_joining(protect_after_failed_boots=0))
    unprotected.run(3600)
    looping = len(outcomes(unprotected, "boot"))
    loop = Loop(_never_joining())
    loop.run(3600)
    boots = len(outcomes(loop, "boot"))
    # 3 VMs per wave: the first wave fails (protected 10 min), the second too (then 80 min)
    assert boots == 6 and looping >= 5 * boots
    last = loop.reports[-1]
    assert set(last.snapshot.protected_sizes) == {"small"}
    assert "6 boot(s) in a row did not join" in last.snapshot.protected_sizes["small"]
    assert any("protected" in n for n in last.plan.notes)
    assert [u.reason for u in last.plan.unmet] == ["backoff"]
    warnings = [r.getMessage() for r in caplog.records if "protected" in r.getMessage()]
    assert len(warnings) == 2 and warnings[0].startswith("size small protected: 3 boot(s)")
    metrics = Metrics(clock=lambda: last.snapshot.now)
    metrics.observe(last)
    assert 'nodemanager_size_protected{size="small"} 1.0' in generate_latest(metrics.registry).decode()


def _e(node_id, state, grace, size="gpu"):
    return NodeExplanation(node_id, node_id, size, StateTuple(state, "open", grace, "idle wait"),
                           "m:1", Action.NONE, None, None, "")


def test_failures_count_once_per_vm_grow_the_backoff_and_a_join_resets():
    r: dict[str, BootRecord] = {}
    r = observe_boots(r, [_e("a", "unpaired", "boot wait")], 0.0, 2, 600.0, 3600.0)
    r = observe_boots(r, [_e("a", "unpaired", "boot exceeded")], 10.0, 2, 600.0, 3600.0)
    r = observe_boots(r, [_e("a", "unpaired", "boot exceeded")], 20.0, 2, 600.0, 3600.0)
    assert r["gpu"].failures == 1 and protected_sizes(r, 20.0) == {}
    r = observe_boots(r, [_e("b", "unpaired", "boot exceeded")], 30.0, 2, 600.0, 3600.0)
    assert set(protected_sizes(r, 629.0)) == {"gpu"} and protected_sizes(r, 631.0) == {}
    r = observe_boots(r, [_e("c", "unpaired", "boot exceeded")], 700.0, 2, 600.0, 3600.0)
    assert r["gpu"].until == 700.0 + 1200.0              # doubled
    for i in range(5):
        r = observe_boots(r, [_e(f"d{i}", "unpaired", "boot exceeded")], 800.0, 2, 600.0, 3600.0)
    assert r["gpu"].until == 800.0 + 3600.0              # capped
    r = observe_boots(r, [_e("e", "unpaired", "boot wait")], 900.0, 2, 600.0, 3600.0)
    r = observe_boots(r, [_e("e", "idle", "boot wait")], 910.0, 2, 600.0, 3600.0)
    assert "gpu" not in r and protected_sizes(r, 910.0) == {}   # a join resets it
