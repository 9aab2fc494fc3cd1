"""The deploy kit: promtool checks and alert unit tests, the systemd unit, the Grafana dashboard,
the HTCondor execute-node snippet, and the docs listing every metric and alert."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nodemanager.ha.wiring import HighAvailability
from nodemanager.console.metrics import Metrics
from nodemanager.model import Outcome
from nodemanager.configuration.settings import HASettings
from nodemanager.store.metrics import StoreCollector
from nodemanager.store.sqlite import MEMORY, SqliteStore
from nodemanager.store.writer import StoreWriter
from tests.conftest import REPO
from tests.fixtures.observability import SIZES, T0, sample_report

DEPLOY = REPO / "deploy"
PROM = DEPLOY / "prometheus"
METRIC_NAME = re.compile(r"\bnodemanager_[a-z0-9_]+")


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not installed (Debian package prometheus; scripts/test installs it)")
    return path


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)


def exposed_names() -> set[str]:
    """Every sample name a daemon exposes, after a cycle and one call of each kind."""
    m = Metrics(sizes=SIZES, clock=lambda: T0)
    m.observe(sample_report(T0))
    report = sample_report(T0 + 30)
    booted = Outcome("boot", "nm-small-6", "ok", "created", T0 + 31, size="small")
    m.observe(dataclasses.replace(report, outcomes=report.outcomes + (booted,)))
    m.observe_call("cloud", "list_nodes", 0.1, "rate_limit")
    m.observe_matrix_reload(True, "0" * 64)
    m.registry.register(HighAvailability(HASettings(election_key="/k", admin_key="/a")).collector())
    m.registry.register(StoreCollector(StoreWriter(SqliteStore(MEMORY)).health))
    text = generate_latest(m.registry).decode()
    names = set()
    for fam in text_string_to_metric_families(text):
        names.add(fam.name)
        names.update(s.name for s in fam.samples)
    return names


def alert_rules() -> list[dict]:
    doc = yaml.safe_load((PROM / "alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def dashboard_exprs() -> list[str]:
    dash = json.loads((DEPLOY / "grafana" / "nodemanager.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


@pytest.mark.prometheus
def test_promtool_accepts_the_config_and_rules() -> None:
    promtool = _binary("promtool")
    proc = _run(promtool, "check", "config", str(PROM / "prometheus.yml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run(promtool, "check", "rules", str(PROM / "alerts.yml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in proc.stdout


@pytest.mark.prometheus
def test_promtool_alert_unit_tests_pass() -> None:
    tests = sorted((PROM / "tests").glob("*.yml"))
    assert tests
    proc = _run(_binary("promtool"), "test", "rules", *map(str, tests))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.prometheus
def test_promtool_unit_tests_catch_a_wrong_expectation(tmp_path) -> None:
    """The alert tests can fail: the same test with one wrong number does."""
    text = (PROM / "tests" / "alerts_test.yml").read_text()
    broken = tmp_path / "broken_test.yml"
    broken.write_text(text.replace("../alerts.yml", str(PROM / "alerts.yml"))
                      .replace("4 boots of size large", "5 boots of size large"))
    proc = _run(_binary("promtool"), "test", "rules", str(broken))
    assert proc.returncode == 1 and "NodeManagerBootFailures" in proc.stdout + proc.stderr


def test_every_alert_named_in_the_issue_exists_and_has_a_test() -> None:
    names = {r["alert"] for r in alert_rules()}
    assert {"NodeManagerDown", "NodeManagerPollStale", "NodeManagerActionsFrozen",
            "NodeManagerDrainStuck", "NodeManagerBootFailures", "NodeManagerSpendHigh",
            "NodeManagerMatrixReloadFailed"} <= names
    tested = set(re.findall(r"alertname: (\w+)", (PROM / "tests" / "alerts_test.yml").read_text()))
    assert names <= tested
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["runbook"].startswith("docs/operations.md#")


def test_alerts_and_dashboard_use_only_metrics_that_exist() -> None:
    exposed = exposed_names()
    used = set()
    for expr in [r["expr"] for r in alert_rules()] + dashboard_exprs():
        used.update(METRIC_NAME.findall(expr))
    assert used and not used - exposed, used - exposed


def test_runbook_anchors_exist() -> None:
    ops = (REPO / "docs" / "operations.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", ops, re.M)}
    for rule in alert_rules():
        assert rule["annotations"]["runbook"].split("#")[1] in anchors, rule["alert"]


def test_docs_list_every_metric_and_alert() -> None:
    doc = (REPO / "docs" / "metrics.md").read_text()
    families = {n for n in exposed_names()
                if not n.endswith(("_created", "_bucket", "_count", "_sum"))}
    missing = {n for n in families if f"`{n}`" not in doc and f"`{n.removesuffix('_total')}" not in doc}
    assert not missing, missing
    for rule in alert_rules():
        assert f"`{rule['alert']}`" in doc


def test_dashboard_has_the_panels_operators_asked_for() -> None:
    dash = json.loads((DEPLOY / "grafana" / "nodemanager.json").read_text())
    titles = {p["title"] for p in dash["panels"]}
    assert {"Nodes by tuple", "Spend per hour by activity", "Paid nodes by activity", "Drains",
            "Demand", "Call errors"} <= titles
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for expr in dashboard_exprs():
        assert 'instance=~"$instance"' in expr


def test_systemd_unit_is_valid_and_hardened(tmp_path) -> None:
    unit = (DEPLOY / "systemd" / "nodemanager.service").read_text()
    options = dict(re.findall(r"^(\w+)=(.*)$", unit, re.M))
    assert options["User"] == "nodemanager" and options["Restart"] == "on-failure"
    assert options["ExecReload"] == "/bin/kill -HUP $MAINPID"
    for hardening in ("NoNewPrivileges", "ProtectSystem", "PrivateTmp", "ProtectHome",
                      "CapabilityBoundingSet", "RestrictAddressFamilies", "SystemCallFilter"):
        assert hardening in options
    assert options["ProtectSystem"] == "strict"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze not installed")
    binary = shutil.which("nodemanager") or sys.executable
    local = tmp_path / "nodemanager.service"
    local.write_text(unit.replace("/opt/nodemanager/bin/nodemanager", binary))
    proc = _run(analyze, "verify", str(local))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sysusers = (DEPLOY / "systemd" / "nodemanager.sysusers").read_text()
    assert re.search(r"^u nodemanager ", sysusers, re.M)


def _condor_param(tmp_path, *names: str, before: str = "") -> dict[str, str]:
    """The values HTCondor itself computes for the execute-node snippet (in a child process, so the
    bindings' global configuration of this test process is untouched)."""
    config = tmp_path / "condor_config"
    config.write_text(before + textwrap.dedent(f"""\
        NEGOTIATOR_INTERVAL = 60
        LIBEXEC = /usr/libexec/condor
        EXECUTE = {tmp_path}/execute
        START = TRUE
        include : {DEPLOY / 'htcondor' / '50-nodemanager-execute.conf'}
        """))
    code = ("import htcondor2, json, sys; "
            "print(json.dumps({n: htcondor2.param.get(n) for n in sys.argv[1:]}))")
    env = {**os.environ, "CONDOR_CONFIG": str(config)}
    proc = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_htcondor_snippet_gives_graceful_drains_pairing_and_pilot_cron(tmp_path) -> None:
    p = _condor_param(tmp_path, "MAXJOBRETIREMENTTIME", "STARTD_CRON_JOBLIST",
                      "STARTD_CRON_PILOTAD_EXECUTABLE", "STARTD_CRON_PILOTAD_ARGS", "STARTD_ATTRS",
                      "JOB_EXECDIR_PERMISSIONS", "START")
    assert eval(p["MAXJOBRETIREMENTTIME"]) > 0  # an arithmetic literal like 6 * 3600
    jobs = p["STARTD_CRON_JOBLIST"].split()
    assert "PILOTAD" in jobs and len(jobs) > 1  # the cloud attributes feature adds its own job
    assert p["STARTD_CRON_PILOTAD_EXECUTABLE"] == "/usr/libexec/condor/nodemanager-pilot-ad"
    assert p["STARTD_CRON_PILOTAD_ARGS"] == f"{tmp_path}/execute"
    assert "NodeManagerCluster" in p["STARTD_ATTRS"]
    assert p["JOB_EXECDIR_PERMISSIONS"] == "group"   # the cron runs as condor, in the pilots' groups
    assert "SPOTNOTICE" not in jobs and "ReclaimNoticeDeadline" not in p["START"]   # spot: opt-in


def test_htcondor_spot_relay_runs_only_where_the_image_turns_it_on(tmp_path) -> None:
    p = _condor_param(tmp_path, "STARTD_CRON_JOBLIST", "START", before="NODEMANAGER_SPOT = true\n")
    assert "SPOTNOTICE" in p["STARTD_CRON_JOBLIST"].split()
    assert "ReclaimNoticeDeadline =?= undefined" in p["START"]


@pytest.mark.parametrize("request_cpus, cpus, seconds_since_drain, matches", [
    (1, 16, 30, False),    # just drained: a single-core job may not take the slot
    (4, 16, 30, True),     # a multicore job may
    (1, 16, 500, True),    # the interval (120 s by default) later anyone may
    (1, 2, 30, True),      # fewer than 4 cores left: single-core jobs fit again
    (1, 16, None, True),   # never drained (a fresh VM): any job at once
])
def test_htcondor_start_policy_prefers_multicore_after_a_drain(
        tmp_path, request_cpus: int, cpus: int, seconds_since_drain: int | None, matches: bool) -> None:
    import classad2
    start = _condor_param(tmp_path, "START")["START"]
    slot = classad2.ClassAd({"PartitionableSlot": True, "State": "Unclaimed", "Cpus": cpus,
                             "EnteredCurrentState": 1_000_000 - 5})   # a state change is no drain
    if seconds_since_drain is not None:
        slot["LastDrainStopTime"] = 1_000_000 - seconds_since_drain
    job = classad2.ClassAd({"RequestCpus": request_cpus})
    # pin time(). The negotiator looks RequestCpus up in the job when the slot lacks it;
    # classad2's evaluation needs the TARGET scope spelled out.
    expr = classad2.ExprTree(re.sub(r"\bRequestCpus\b", "TARGET.RequestCpus",
                                    start.replace("time()", "1000000")))
    assert expr.eval(slot, job) is matches


def test_pilot_ad_cron_publishes_only_safe_values(tmp_path) -> None:
    import classad2
    script = DEPLOY / "htcondor" / "pilot-ad-cron"
    execute = tmp_path / "execute"
    (execute / "dir_1").mkdir(parents=True)
    (execute / "dir_2").mkdir()
    (execute / "dir_1" / ".pilot.ad").write_text(
        "LAST_JOB_START = 1000\nLAST_MAX_JOB_END = 9000\nUSED_FRACTION1k = 512\n"
        "CAN_POSTPONE_LAST_JOB = False\nSTART = true || evil()\nPRIORITY_FACTOR = 2 + 2\n")
    (execute / "dir_2" / ".pilot.ad").write_text(
        "last_job_start = 2000\nLAST_MAX_JOB_END = 7000\nADD_UNCOM_TIME1k = 10\n"
        "CAN_POSTPONE_LAST_JOB = True\n")
    os.utime(execute / "dir_1" / ".pilot.ad", (5000, 5000))
    os.utime(execute / "dir_2" / ".pilot.ad", (6000, 6000))
    proc = subprocess.run([sys.executable, str(script), str(execute)], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    ad = classad2.parseOne(proc.stdout)
    assert ad["LAST_JOB_START"] == 2000 and ad["LAST_MAX_JOB_END"] == 9000
    assert ad["USED_FRACTION1k"] == 512 and ad["ADD_UNCOM_TIME1k"] == 10
    assert ad["CAN_POSTPONE_LAST_JOB"] is True
    assert ad["PilotAdUpdated"] == 5000 and ad["PilotAdCount"] == 2
    assert "START" not in ad and ad.eval("PRIORITY_FACTOR") is classad2.Value.Undefined
    empty = subprocess.run([sys.executable, str(script), str(tmp_path / "none")],
                           capture_output=True, text=True, timeout=30)
    ad = classad2.parseOne(empty.stdout)
    assert ad["PilotAdCount"] == 0 and ad.eval("LAST_MAX_JOB_END") is classad2.Value.Undefined



def test_dashboard_is_a_valid_grafana_model() -> None:
    """What Grafana needs to import the file and draw every panel: known panel types on the
    24-column grid without overlaps, queries with ref ids on the templated Prometheus source, and
    every $variable a query uses defined in templating (a broken model imports as blank panels)."""
    dash = json.loads((DEPLOY / "grafana" / "nodemanager.json").read_text())
    assert isinstance(dash["schemaVersion"], int) and dash["uid"] and dash["title"]
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "instance"} <= variables
    cells: dict[tuple[int, int], str] = {}
    for panel in dash["panels"]:
        assert panel["type"] in {"row", "stat", "timeseries", "gauge", "table", "bargauge", "text"}
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) and grid[k] >= 0 for k in "xywh"), panel["title"]
        assert grid["w"] > 0 and grid["h"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\$\{?(\w+)", target["expr"]))
            assert used <= variables, (panel["title"], used - variables)


def test_systemd_unit_caps_memory_well_above_the_measured_peak() -> None:
    """A runaway (a huge file, a leak) is stopped by the kernel before it starves the head node;
    the cap leaves room above the 470 MB measured at 50,000 nodes (BENCHMARKS.md)."""
    unit = (DEPLOY / "systemd" / "nodemanager.service").read_text()
    options = dict(re.findall(r"^(\w+)=(.*)$", unit, re.M))
    size = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    high, hard = (int(options[o][:-1]) * size[options[o][-1]] for o in ("MemoryHigh", "MemoryMax"))
    assert 2 * 470 * 10 ** 6 <= high < hard
    assert options["StateDirectory"] == "nodemanager"         # where the instance lock lives


def test_htcondor_packing_snippet_is_depth_first_and_ranks_the_fullest_slot_first(tmp_path) -> None:
    import classad2
    config = tmp_path / "condor_config"
    config.write_text(f"include : {DEPLOY / 'htcondor' / '60-nodemanager-packing.conf'}\n")
    code = ("import htcondor2, json, sys; "
            "print(json.dumps({n: htcondor2.param.get(n) for n in sys.argv[1:]}))")
    proc = subprocess.run([sys.executable, "-c", code, "NEGOTIATOR_DEPTH_FIRST",
                           "NEGOTIATOR_PRE_JOB_RANK"], capture_output=True, text=True,
                          env={**os.environ, "CONDOR_CONFIG": str(config)}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    p = json.loads(proc.stdout)
    assert str(p["NEGOTIATOR_DEPTH_FIRST"]).lower() == "true"
    rank = classad2.ExprTree(p["NEGOTIATOR_PRE_JOB_RANK"])
    job = classad2.ClassAd({"RequestCpus": 1})
    # on a partitionable slot Cpus and Memory are what is left: 2 free cores beat 8
    full, empty = ({"PartitionableSlot": True, "Rank": 0, "Cpus": c, "Memory": 1000 * c}
                   for c in (2, 8))
    assert rank.eval(classad2.ClassAd(full), job) > rank.eval(classad2.ClassAd(empty), job)
