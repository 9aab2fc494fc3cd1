"""Property-based fuzzing of everything the daemon reads from outside (the config and matrix
parsers have their own fuzzers: test_config_fuzz.py, test_matrix_fuzz.py):

* snapshot JSON: a bad input is a SnapshotError naming the JSON field, never a traceback; a good
  one plans without error;
* SLURM ``sinfo --json`` / ``squeue --json`` replies: parsed, with bad fields named, or a
  ValueError for an unusable reply; demand and workers come out of whatever parsed;
* HTCondor slot ads: turned into workers (bad ads skipped) and classified, never an exception;
* hostile values (INF, NaN, overflows, huge or negative numbers, wrong types, ClassAd
  ``undefined``/``error``, SLURM's ``{"set", "infinite", "number"}`` objects) in either
  scheduler's jobs and nodes: the poll succeeds, never with an infinite or negative demand or
  capacity; anything else is the adapter's own error naming the record;
* cloud replies: libcloud exceptions of any shape become a classified CloudError with no secret
  in it; libcloud nodes of any shape map to CloudNodes;
* the daemon keeps its last good state: polls that raise keep the previous listing/poll, and
  nothing is drained or destroyed once that is stale.

Bounded example counts, so the whole file runs in seconds.
"""

from __future__ import annotations

import copy
import json
import math
import pathlib
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodemanager.cloud.port import CloudError, ErrorKind
from nodemanager.core import plan
from nodemanager.core.classify import classify_worker
from nodemanager.model import Snapshot
from nodemanager.scheduler.records import MAX_COUNT
from nodemanager.scheduler.slurm_demand import demand_from_jobs
from nodemanager.scheduler.slurm_json import parse_jobs, parse_nodes
from nodemanager.configuration.settings import CoreSettings
from nodemanager.snapshot import SnapshotError, from_json
from tests.fixtures.daemon import SIZES

REPO = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = json.loads((REPO / "docs" / "example-snapshot.json").read_text())
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# Values a hostile or broken scheduler reply carries where numbers belong.
hostile_numbers = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308, 10**30, 10**400, -1, -(2**63), 2**31, 2**53 + 1,
                     0xFFFFFFFE, True, "4", "Infinity"]),
    st.builds(lambda s, i, n: {"set": s, "infinite": i, "number": n}, st.booleans(), st.booleans(),
              st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True))))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), hostile_numbers)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


def paths(doc, prefix=()):
    """Every path (tuple of keys/indices) into a JSON document."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, prefix + (i,))


@st.composite
def mutated(draw, base):
    """``base`` with one to three places replaced by arbitrary JSON (or deleted)."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        all_paths = [p for p in paths(doc) if p]
        if not all_paths:
            break
        path = draw(st.sampled_from(all_paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return doc


# -- snapshot JSON ----------------------------------------------------------------------------

def _core_for(snap: Snapshot) -> CoreSettings:
    from nodemanager.model import Size
    names = {n.size for n in snap.cloud_nodes} | {d.size for d in snap.demand if d.size}
    extra = tuple(Size(n, cores=4, ram_mb=8000, price=0.1) for n in sorted(names) if n not in {s.name for s in SIZES})
    return CoreSettings(sizes=SIZES + extra, max_nodes=20)


def _matrix():
    import policy_matrix
    return policy_matrix.load_default()


MATRIX = _matrix()


@FUZZ
@given(mutated(EXAMPLE))
def test_snapshot_json_gives_a_snapshot_or_an_error_naming_the_field(doc):
    try:
        snap = from_json(doc)
    except SnapshotError as exc:
        text = str(exc)
        assert re.match(r"^[a-z_]+(\[\d+\])?(\.[A-Za-z_]+)*(\[\d+\])?", text) or text.startswith("snapshot"), text
        assert "Traceback" not in text
        return
    # whatever parsed is something the core can plan on
    plan(snap, _core_for(snap), MATRIX)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=60))
def test_snapshot_text_that_is_not_json_is_a_clear_error(text):
    from nodemanager.snapshot import loads
    try:
        loads(text, source="snap.json")
    except SnapshotError as exc:
        assert "snap.json" in str(exc) or str(exc)


# -- SLURM replies ----------------------------------------------------------------------------

SINFO = {"meta": {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"release": "22.05.8"}}, "errors": [],
         "nodes": [{"name": f"n{i}", "state": s, "state_flags": f, "cpus": 4, "alloc_cpus": a,
                    "real_memory": 8000, "alloc_memory": 0, "last_busy": 1000, "slurmd_start_time": 900,
                    "reason": r, "reason_changed_at": 950, "comment": f"instance-id=i-{i}",
                    "partitions": ["debug"], "address": "127.0.0.1", "hostname": f"n{i}"}
                   for i, (s, f, a, r) in enumerate([("idle", [], 0, ""), ("mixed", ["DRAIN"], 2, "nodemanager: x [req=ab]"),
                                                     ("down", ["NOT_RESPONDING"], 0, "Not responding")])]}
SQUEUE = {"errors": [], "jobs": [
    {"job_id": 1, "job_state": "PENDING", "nodes": "", "cpus": 1, "node_count": 1, "memory_per_node": None,
     "memory_per_cpu": 100, "state_reason": "Resources", "partition": "debug", "submit_time": 501,
     "requeue": True, "time_limit": None, "array_task_string": "", "array_task_id": None},
    {"job_id": 2, "job_state": "RUNNING", "nodes": "n[1-2]", "cpus": 2, "node_count": 2, "memory_per_node": 400,
     "memory_per_cpu": None, "state_reason": "None", "partition": "debug", "submit_time": 502,
     "requeue": True, "time_limit": 60, "array_task_string": "", "array_task_id": None, "end_time": 5000},
]}


@FUZZ
@given(mutated(SINFO), mutated(SQUEUE))
def test_slurm_replies_parse_with_named_errors_or_fail_as_a_whole(nodes_doc, jobs_doc):
    try:
        nodes, errors = parse_nodes(nodes_doc)
        jobs, job_errors = parse_jobs(jobs_doc)
    except ValueError as exc:
        assert "sinfo --json" in str(exc) or "squeue --json" in str(exc), str(exc)
        return
    for e in errors + job_errors:
        assert str(e).startswith(("node ", "job ")), str(e)
    _sane_demand(demand_from_jobs(jobs))
    for n in nodes:
        assert all(0 <= v <= MAX_COUNT for v in (n.cpus, n.alloc_cpus, n.real_memory, n.alloc_memory))


def _sane_demand(demand):
    for d in demand:
        # SLURM's per-node memory may be memory_per_cpu x cores: a product of two bounded counts
        assert 1 <= d.count and 0 <= d.cpus <= MAX_COUNT and 0 <= d.ram_mb <= MAX_COUNT**2, d
        assert all(type(v) is int for v in (d.count, d.cpus, d.ram_mb, d.scratch_mb)), d
        assert 0 <= d.scratch_mb <= MAX_COUNT
        assert d.oldest_submit is None or math.isfinite(d.oldest_submit)


SIZE_FIELDS = ["cpus", "node_count", "memory_per_node", "memory_per_cpu", "submit_time", "array_task_string"]


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(SIZE_FIELDS), hostile_numbers), min_size=1, max_size=4))
def test_hostile_numbers_in_a_pending_job_never_make_a_bad_demand(changes):
    doc = copy.deepcopy(SQUEUE)
    for field, value in changes:
        doc["jobs"][0][field] = value
    # through the decoder too: Python's json reads back Infinity/NaN and 400-digit integers
    jobs, errors = parse_jobs(json.loads(json.dumps(doc)))
    _sane_demand(demand_from_jobs(jobs))
    assert all(str(e).startswith("job 1: ") for e in errors)


# -- HTCondor ads -----------------------------------------------------------------------------

def _pslot_ad() -> dict:
    from nodemanager.sim.startd import SimStartd
    st_ = SimStartd("vm1.example", 4, 8000, 1000.0, attrs={"CloudInstanceID": "i-1"})
    return json.loads(json.dumps(st_.pslot_ad(1000.0), default=str))


PSLOT = _pslot_ad()


@FUZZ
@given(st.lists(mutated(PSLOT), min_size=1, max_size=3))
def test_htcondor_ads_become_workers_or_are_skipped_never_raise(ads):
    from nodemanager.scheduler.htcondor import HTCondorScheduler
    from nodemanager.sim.pool import SimPool
    from nodemanager.sim.pool_bindings import PoolBindings
    adapter = HTCondorScheduler(PoolBindings(SimPool(lambda: 1000.0)), clock=lambda: 1000.0)
    for w in adapter.workers_from_ads(ads):
        c = classify_worker(w, 1000.0, 600.0)
        assert c[0] in ("idle", "busy", "down", "unpaired")
        assert 0 <= w.cpus <= MAX_COUNT and 0 <= w.cpus_busy <= MAX_COUNT and 0 <= w.ram_mb <= MAX_COUNT


# ClassAd expressions a job or slot ad may hold where a number belongs
classad_hostile = st.one_of(
    st.sampled_from(['real("INF")', 'real("-INF")', 'real("NaN")', "1e400", "-1", 'int(real("INF"))',
                     "9223372036854775807", "2147483648", "true", '"8"', "undefined", "error", "1/0",
                     "size(1)", "{1, 2}", "[a = 1]", "ifThenElse(x > 1, 2, real(\"INF\"))", "MY.Missing * 2"]),
    st.integers(-2**40, 2**40).map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr))
SLOT_NUMBERS = ["Cpus", "TotalSlotCpus", "Memory", "TotalSlotMemory", "NumDynamicSlots", "EnteredCurrentState",
                "DaemonStartTime", "LastHeardFrom", "ExpectedMachineGracefulDrainingCompletion",
                "ExpectedMachineGracefulDrainingBadput", "MyCurrentTime"]


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["RequestCpus", "RequestMemory", "RequestDisk", "QDate"]),
                          classad_hostile), max_size=4),
       st.lists(st.tuples(st.sampled_from(SLOT_NUMBERS), classad_hostile), max_size=4))
def test_hostile_classad_values_never_fail_an_htcondor_poll(job_attrs, slot_attrs):
    """Through the simulated collector and schedd, so the real classad2 evaluates every value."""
    import classad2

    from tests.fixtures.htcondor import CondorWorld
    world = CondorWorld()
    world.add("a.example", attrs={"CloudInstanceID": "i-a", **{k: classad2.ExprTree(v) for k, v in slot_attrs}})
    world.sim.submit(RequestCpus=1, RequestMemory=100)
    world.sim.submit(**{k: classad2.ExprTree(v) for k, v in job_attrs})
    poll = world.htc.poll()
    _sane_demand(poll.demand)
    assert 1 <= sum(d.count for d in poll.demand) <= 2
    (w,) = poll.workers
    assert 0 <= w.cpus <= MAX_COUNT and 0 <= w.cpus_busy <= MAX_COUNT and 0 <= w.ram_mb <= MAX_COUNT
    assert classify_worker(w, world.clock(), 600.0).state in ("idle", "busy", "down", "unpaired")


# -- cloud replies ----------------------------------------------------------------------------

SECRET = "s3cr3t-KEY-do-not-leak"


@FUZZ
@given(st.integers(100, 599), st.text(max_size=80), st.dictionaries(
    st.sampled_from(["Retry-After", "retry-after", "X-Other", "Content-Type"]),
    st.text(max_size=12), max_size=3), st.sampled_from(["list_nodes", "create_node", "destroy_node"]))
def test_any_http_error_is_classified_and_scrubbed(code, message, headers, call):
    from libcloud.common.exceptions import BaseHTTPError
    from nodemanager.cloud.errors import classify
    err = classify(BaseHTTPError(code, f"{message} key={SECRET}", headers=headers), call, secrets=[SECRET])
    assert isinstance(err, CloudError) and isinstance(err.kind, ErrorKind)
    assert SECRET not in str(err)
    assert err.retry_after is None or (err.retry_after >= 0 and math.isfinite(err.retry_after))
    if code == 429:
        assert err.kind is ErrorKind.RATE_LIMIT
    if code >= 500 and code != 501:
        assert err.kind in (ErrorKind.TRANSIENT, ErrorKind.RATE_LIMIT, ErrorKind.QUOTA, ErrorKind.CAPACITY)


EC2_BODY = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{code}</Code>"
            "<Message>{message}</Message></Error></Errors><RequestID>r-1</RequestID></Response>")
EC2_CODES = {"InsufficientInstanceCapacity": ErrorKind.CAPACITY, "InstanceLimitExceeded": ErrorKind.QUOTA,
             "VcpuLimitExceeded": ErrorKind.QUOTA, "RequestLimitExceeded": ErrorKind.RATE_LIMIT,
             "InvalidInstanceID.NotFound": ErrorKind.NOT_FOUND, "AuthFailure": ErrorKind.PERMANENT}
xml_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30).map(
    lambda t: t.replace("&", "&amp;").replace("<", "&lt;"))


def _ec2_exception(status: int, body: str) -> BaseException:
    """What libcloud's EC2 driver raises for an error reply with this status and body."""
    from libcloud.common.exceptions import exception_from_message
    from libcloud.compute.drivers.ec2 import EC2Response

    resp = object.__new__(EC2Response)
    resp.status, resp.body, resp.headers = status, body, {}
    try:
        message = resp.parse_error()
    except Exception as exc:  # noqa: BLE001 - the driver raises for some codes; that is the reply
        return exc
    return exception_from_message(code=status, message=str(message), headers={})


@FUZZ
@given(st.sampled_from(sorted(EC2_CODES)) | xml_text, xml_text, st.sampled_from([400, 401, 403, 429, 500, 503]),
       st.booleans())
def test_ec2_error_replies_are_classified(code, message, status, garbage):
    """EC2 error bodies (well-formed or not) through libcloud's own parser, then classified."""
    from nodemanager.cloud.errors import classify
    body = (message + code) if garbage else EC2_BODY.format(code=code, message=message)
    err = classify(_ec2_exception(status, body), "create_node", secrets=[SECRET])
    assert isinstance(err, CloudError) and isinstance(err.kind, ErrorKind)
    if not garbage and code in EC2_CODES and status != 429:
        assert err.kind is EC2_CODES[code], (code, status, str(err))


node_extra = st.dictionaries(st.sampled_from(["launch_time", "status", "private_dns", "instance_type", "tags",
                                               "created", "creationTimestamp", "hostname"]),
                             json_values, max_size=5)


@FUZZ
@given(node_extra, st.one_of(st.none(), st.text(max_size=10), st.integers()),
       st.lists(st.text(max_size=15), max_size=2))
def test_any_libcloud_node_maps_to_a_cloud_node(extra, state, ips):
    from libcloud.compute.base import Node

    from nodemanager.cloud.libcloud_driver import LibcloudCloud
    from nodemanager.cloud.port import TAG_CLUSTER
    from nodemanager.configuration.settings import CloudSettings
    cloud = LibcloudCloud(CloudSettings(driver="dummy", cluster="fz"))
    node = Node(id="n-1", name="fz-small-1", state=state, public_ips=[], private_ips=ips, driver=cloud._driver,
                extra=extra)
    mapped = cloud._to_cloud_node(node, {TAG_CLUSTER: "fz"})
    assert mapped.id == "n-1" and isinstance(mapped.state, str)
    assert isinstance(mapped.launched_at, float) and math.isfinite(mapped.launched_at)


# -- the daemon keeps its last good state -----------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=30, max_size=120), st.integers(0, 10))
def test_failed_polls_keep_the_last_good_state_and_freeze_when_stale(outcomes, seed):
    """Any sequence of good and failing cloud/scheduler polls (a reply that does not parse is a
    failed poll): the controller plans on the last good inputs, never raises, and drains or
    destroys nothing once they are stale (the invariant checker audits every call)."""
    from nodemanager.sim.invariants import CheckedRun
    from tests.fixtures.daemon import sim_settings
    run = CheckedRun(sim_settings(), seed=seed, step=15.0)
    for cloud_ok, sched_ok in outcomes:
        if not cloud_ok:
            run.faulty_cloud.fail_next("list_nodes", "http500")
        if not sched_ok:
            now = run.clock()
            run.faulty_scheduler.outage(now, now + 1)
        before = run.poll
        report = run.cycle()
        if not sched_ok and before is not None:
            assert run.poll is before                 # the previous poll is kept, not replaced
        if report is not None and report.plan.frozen is None:
            assert report.snapshot.now - min(report.snapshot.polled_at.values()) <= run.settings.core.poll_stale_after
        run.clock.advance(run.step)
    assert run.inv.violations == []
