"""Parsing of SLURM's JSON replies (no daemons): states, hostlists, demand, bad records.

The live cross-check of :func:`short_state` against ``sinfo %t`` is in test_slurm_adapter.py; the
cases here are states a test cluster cannot easily reach (maintenance, reboot, power saving).
"""

from __future__ import annotations

import json

import pytest

from nodemanager.scheduler.slurm_hostlist import array_task_count, expand_hostlist
from nodemanager.scheduler.slurm_demand import demand_from_jobs
from nodemanager.scheduler.slurm_json import (RecordError, cloud_id_of, drain_reason, parse_jobs,
                                              parse_nodes, request_id_of)
from nodemanager.scheduler.slurm_state import short_state


@pytest.mark.parametrize("base, flags, expected", [
    ("mixed", ["DRAIN", "NOT_RESPONDING"], "drng*"),
    ("idle", ["DRAIN", "NOT_RESPONDING"], "drain*"),
    ("down", ["DRAIN"], "drain"),                       # DOWN keeps the drain flag: sinfo says drain
    ("idle", ["COMPLETING"], "comp"),
    ("allocated", ["COMPLETING"], "alloc+"),
    ("idle", ["CLOUD", "POWERED_DOWN"], "idle~"),
    ("idle", ["CLOUD", "NOT_RESPONDING", "POWERING_UP"], "idle#"),
    ("idle", ["POWER_DOWN"], "idle!"),
    ("idle", ["MAINTENANCE"], "maint"),
    ("allocated", ["MAINTENANCE"], "alloc$"),
    ("idle", ["REBOOT_REQUESTED"], "boot"),
    ("idle", ["RESERVED"], "resv"),
    ("idle", ["PLANNED"], "plnd"),
    ("future", [], "futr"),
    ("unknown", ["NOT_RESPONDING"], "unk*"),
    ("idle", ["FAIL"], "fail"),
    ("allocated", ["FAIL"], "failg"),
])
def test_short_state_follows_slurms_compact_names(base, flags, expected):
    assert short_state(base, flags) == expected


def test_hostlists_expand_ranges_padding_and_lists():
    assert expand_hostlist("node[1-3,05],gpu1") == ("node1", "node2", "node3", "node05", "gpu1")
    assert expand_hostlist("r[1-2]n[1-2]") == ("r1n1", "r1n2", "r2n1", "r2n2")
    assert expand_hostlist("") == ()
    with pytest.raises(ValueError, match="bad range"):
        expand_hostlist("node[a-b]")


def test_array_task_counts():
    assert array_task_count("4-20%3") == 17
    assert array_task_count("1,3,5-7") == 5
    assert array_task_count("0-10:5") == 3


def test_drain_reason_round_trips_our_request_id_and_ignores_others():
    text = drain_reason("idle\n  exceeded", "ab12cd34")
    assert text == "nodemanager: idle exceeded [req=ab12cd34]"
    assert request_id_of(text) == "ab12cd34"
    assert request_id_of("admin: bad disk [req=ab12cd34]") is None
    assert request_id_of("nodemanager: destroyed") is None
    assert request_id_of(None) is None


def test_cloud_id_convention():
    assert cloud_id_of("", "instance-id=i-0abc zone=a") == "i-0abc"
    assert cloud_id_of("owner=x,instance-id=vm-7") == "vm-7"
    assert cloud_id_of("my-instance-id=nope") is None


def _node(**kw):
    rec = {"name": "n1", "state": "idle", "state_flags": [], "cpus": 4, "alloc_cpus": 0,
           "real_memory": 8000, "last_busy": 1000, "slurmd_start_time": 900, "reason": ""}
    rec.update(kw)
    return rec


def test_bad_node_fields_are_named_and_other_nodes_still_parse():
    doc = {"nodes": [_node(name="good"), _node(name="badnum", last_busy="yesterday"),
                     _node(name="nostate", state=None), {"state": "idle"}, "junk"]}
    nodes, errors = parse_nodes(doc)
    assert [n.name for n in nodes] == ["good", "badnum"]
    assert nodes[1].last_busy == 0.0
    text = [str(e) for e in errors]
    assert "node badnum: field 'last_busy' is not a number: 'yesterday'" in text
    assert any(t.startswith("node nostate: field 'state'") for t in text)
    assert any(t.startswith("node #3: field 'name'") for t in text)
    assert any(t.startswith("node #4") for t in text)


def test_unusable_replies_raise_naming_the_command():
    with pytest.raises(ValueError, match=r"sinfo --json: reply has no 'nodes' list"):
        parse_nodes({"meta": {}})
    with pytest.raises(ValueError, match=r"squeue --json: SLURM reported an error: boom \(errno 5\)"):
        parse_jobs({"errors": [{"error": "boom", "errno": 5}], "jobs": []})
    with pytest.raises(ValueError, match="not a JSON object"):
        parse_nodes([1, 2])


def _job(job_id, **kw):
    rec = {"job_id": job_id, "job_state": "PENDING", "nodes": "", "cpus": 1, "node_count": 1,
           "memory_per_node": None, "memory_per_cpu": 100, "state_reason": "Resources",
           "partition": "debug", "submit_time": 500 + job_id, "requeue": True, "time_limit": None,
           "array_task_string": "", "array_task_id": None}
    rec.update(kw)
    return rec


def test_demand_groups_pending_jobs_per_node_need():
    doc = {"jobs": [
        _job(1, cpus=4, node_count=2, memory_per_cpu=200),      # 2 nodes × (2 cpus, 400 MB)
        _job(2, cpus=2, node_count=1, memory_per_cpu=None, memory_per_node=400),
        _job(3, array_task_string="1-3"),                        # 3 tasks × (1 cpu, 100 MB)
        _job(4, state_reason="JobHeldUser"),                    # held: not demand
        _job(5, state_reason="Dependency"),
        _job(6, state_reason="JobArrayTaskLimit", array_task_string="4-20%3"),
        _job(7, job_state="RUNNING", nodes="n[1-2]", state_reason="None"),
    ]}
    jobs, errors = parse_jobs(doc)
    assert errors == []
    demand = {(d.cpus, d.ram_mb): (d.count, d.oldest_submit) for d in demand_from_jobs(jobs)}
    assert demand == {(1, 100): (3, 503), (2, 400): (3, 501)}
    assert jobs[-1].nodes == ("n1", "n2")



def test_unset_memory_never_becomes_a_negative_demand():
    # older plugins send -1 or NO_VAL for "not set": the other field decides, or none at all
    jobs, errors = parse_jobs({"jobs": [
        _job(1, memory_per_node=-1, memory_per_cpu=100),
        _job(2, memory_per_node=0xFFFFFFFE, memory_per_cpu=None),
    ]})
    assert errors == []
    demand = {(d.cpus, d.ram_mb): d.count for d in demand_from_jobs(jobs)}
    assert demand == {(1, 100): 1, (1, 0): 1}


def test_partition_filter_limits_demand():
    jobs, _ = parse_jobs({"jobs": [_job(1, partition="cloud"), _job(2, partition="local")]})
    assert [d.count for d in demand_from_jobs(jobs, frozenset({"cloud"}))] == [1]


def test_newer_slurm_state_lists_and_number_objects_are_understood():
    rec = _node(state=["MIXED", "DRAIN"], state_flags=None,
                last_busy={"set": True, "infinite": False, "number": 1234},
                alloc_cpus={"set": False, "infinite": False, "number": 0})
    (node,), errors = parse_nodes({"nodes": [rec]})
    assert errors == []
    assert (node.state, node.last_busy, node.alloc_cpus) == ("drng", 1234.0, 0)


# -- hostile values: a bad job is no demand, a bad node field is not used --------

HOSTILE = ["Infinity", "-Infinity", "NaN", "1e400", "1" + "0" * 400, "-4", "true", '"4"', "[1]",
           '{"set": true, "infinite": false, "number": 1e400}', str(2**40)]


@pytest.mark.parametrize("field, text", [
    (field, text) for field in ("cpus", "node_count", "memory_per_node", "memory_per_cpu") for text in HOSTILE
    # a negative memory is SLURM's "unset" (-1): the other field decides (test_unset_memory...)
    if not (field.startswith("memory") and text.startswith("-"))])
def test_a_pending_job_with_an_unusable_size_is_left_out_of_demand(field, text):
    # what squeue --json could carry, decoded as the adapter does (json accepts Infinity and NaN)
    value = json.loads(text)
    jobs, errors = parse_jobs({"jobs": [_job(1), _job(2, **{field: value}), _job(3, cpus=2)]})
    assert [j.job_id for j in jobs] == [1, 2, 3]
    assert [(d.cpus, d.count) for d in demand_from_jobs(jobs)] == [(1, 1), (2, 1)]
    (e,) = errors
    assert (e.kind, e.name, e.field) == ("job", "2", field)
    assert str(e).startswith(f"job 2: field '{field}' ") and str(e).endswith("the job is left out of demand")


def test_unusable_node_fields_get_their_default_and_never_become_infinite_capacity():
    nodes, errors = parse_nodes({"nodes": [
        _node(name="inf", cpus=json.loads("Infinity")), _node(name="nan", alloc_cpus=float("nan")),
        _node(name="huge", real_memory=10**400), _node(name="neg", cpus=-8), _node(name="ok")]})
    assert {n.name: (n.cpus, n.alloc_cpus, n.real_memory) for n in nodes} == {
        "inf": (0, 0, 8000), "nan": (4, 0, 8000), "huge": (4, 0, 0), "neg": (0, 0, 8000), "ok": (4, 0, 8000)}
    assert {(e.name, e.field, e.reason) for e in errors} == {
        ("inf", "cpus", "not_finite"), ("nan", "alloc_cpus", "not_finite"),
        ("huge", "real_memory", "out_of_range"), ("neg", "cpus", "out_of_range")}


def test_a_hostlist_or_array_of_absurd_size_is_refused_not_expanded():
    jobs, errors = parse_jobs({"jobs": [
        _job(1, job_state="RUNNING", nodes="n[0-99999999999]"),
        _job(2, array_task_string="0-99999999999"), _job(3)]})
    assert jobs[0].nodes == ()
    assert [d.count for d in demand_from_jobs(jobs)] == [1]
    assert [(e.name, e.field) for e in errors] == [("1", "nodes"), ("2", "array_task_string")]
    with pytest.raises(ValueError, match="hostlist names more than"):
        expand_hostlist("a[1-60000],b[1-60000]")


def test_a_record_that_breaks_the_parser_is_an_error_naming_it():
    class Hostile(dict):
        """A record whose field access fails: no decoder makes one, the parser must still name it."""

        def get(self, key, default=None):
            if key == "cpus":
                raise KeyError(key)
            return super().get(key, default)

    with pytest.raises(RecordError, match=r"squeue --json: job 7: cannot be read \(KeyError"):
        parse_jobs({"jobs": [Hostile(_job(7))]})
    with pytest.raises(RecordError, match=r"sinfo --json: node n9: cannot be read") as exc:
        parse_nodes({"nodes": [Hostile(_node(name="n9"))]})
    assert (exc.value.kind, exc.value.name) == ("node", "n9")


@pytest.mark.parametrize("limit, limited", [(10, True), (0xFFFFFFFF, False), (0xFFFFFFFE, False),
                                            (None, False), ({"set": True, "infinite": True, "number": 0}, False)])
def test_a_running_job_without_a_time_limit_has_no_end_time(limit, limited):
    """SLURM puts start + 1 year in end_time for a job without a limit; an INFINITE or NO_VAL
    time_limit (22.05 prints them as integers) is no limit, so no end time is believed."""
    rec = _job(7, job_state="RUNNING", nodes="node2", start_time=1000, end_time=1000 + 365 * 86400,
               time_limit=limit)
    jobs, problems = parse_jobs({"jobs": [rec]})
    assert problems == [] and [j.end_time for j in jobs] == [1000 + 365 * 86400 if limited else None]
