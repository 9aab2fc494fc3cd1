"""The SLURM adapter classifies a ``sinfo --json`` record from its JSON state and flags directly:
the same verdict the Arvados policy matrix page gives the ``sinfo %t`` text, and whose drain it is."""

from __future__ import annotations

import itertools

import pytest

from nodemanager.model import Worker
from nodemanager.scheduler import classified
from nodemanager.scheduler.slurm_classify import classify_node, classify_slurm
from nodemanager.scheduler.slurm_json import parse_nodes
from nodemanager.scheduler.slurm_state import short_state
from policy_matrix.vocabulary import BUSY, DOWN, IDLE

BASES = ("idle", "allocated", "mixed", "down", "future", "unknown", "error", "weird", "")
FLAGS = ("DRAIN", "COMPLETING", "NOT_RESPONDING", "MAINTENANCE", "REBOOT_REQUESTED",
         "REBOOT_ISSUED", "POWERING_UP", "POWERING_DOWN", "POWERED_DOWN", "POWER_DOWN", "FAIL",
         "PLANNED", "PERFCTRS", "RESERVED", "NO_RESPOND")


def node(base: str, flags: tuple[str, ...], reason: str = ""):
    rec = {"name": "c1", "state": base or "?", "state_flags": list(flags), "reason": reason, "cpus": 4}
    nodes, problems = parse_nodes({"nodes": [rec]})
    assert problems == []
    return nodes[0]


@pytest.mark.parametrize("base", BASES)
def test_json_state_and_flags_classify_as_the_sinfo_text_does(base):
    for k in range(3):
        for flags in itertools.combinations(FLAGS, k):
            n = node(base, flags)
            for jobs in (0, 2):
                got = classify_node(n, running_jobs=jobs, state_since=5.0)
                want = classify_slurm(short_state(n.base_state, n.flags), running_jobs=jobs)
                assert (got.state, got.why) == (want.state, want.why), (base, flags, jobs)
                assert got.idle_since == (5.0 if got.state == IDLE else None)


@pytest.mark.parametrize("flags, reason, theirs", [
    (("DRAIN",), "admin: bad dimm", "admin: bad dimm"),
    (("DRAIN",), "", "no reason given"),
    (("DRAIN",), "nodemanager: idle [req=3]", None),
    ((), "admin: bad dimm", None),                      # a reason without a drain is no drain
])
def test_the_adapter_says_whose_drain_it_is(flags, reason, theirs):
    assert classify_node(node("idle", flags, reason), running_jobs=0, state_since=0).foreign_drain == theirs


def test_a_snapshot_drain_state_with_a_reason_is_someone_elses_drain_only_for_slurm():
    slurm = classified(Worker("c1", "slurm", state="drain", drain_reason="admin"))
    other = classified(Worker("c1", "simulated", state="drain", drain_reason="admin"))
    assert (slurm.classified.state, slurm.classified.foreign_drain) == (DOWN, "admin")
    assert (other.classified.state, other.classified.foreign_drain) == (DOWN, None)
    assert classified(Worker("c1", "slurm", state="mix", running_jobs=1)).classified.state == BUSY
