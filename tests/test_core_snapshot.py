"""Snapshot JSON (errors name the field) and the `nodemanager plan` command."""

import json
import pathlib
import subprocess
import sys

import pytest

from nodemanager import snapshot as sj
from nodemanager.cli import main

REPO = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "example-snapshot.json"
EXAMPLE_INI = REPO / "docs" / "example-plan.ini"

MINIMAL = {"now": 1000, "polled_at": {"cloud": 990, "scheduler": 995},
           "cloud_nodes": [{"id": "i-1", "name": "n1", "size": "small", "launched_at": 10}],
           "workers": [{"name": "n1", "scheduler": "slurm", "state": "idle", "last_heard": 990,
                        "state_since": 100}],
           "demand": [{"cpus": 2, "ram_mb": 1000, "count": 3}],
           "in_flight": [{"node": "i-1", "action": "drain", "since": 900}]}


def with_(path, value, base=MINIMAL):
    data = json.loads(json.dumps(base))
    *parents, last = path
    target = data
    for p in parents:
        target = target[p]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return data


@pytest.mark.parametrize("path, value, message", [
    (("workers", 0, "last_heard"), "soon", "workers[0].last_heard: expected a number"),
    (("workers", 0, "scheduler"), "pbs", "workers[0].scheduler: expected one of slurm"),
    (("workers", 0, "name"), KeyError, "workers[0].name: missing"),
    (("workers", 0, "lastheard"), 5, "workers[0].lastheard: unknown field"),
    (("cloud_nodes", 0, "launched_at"), None, "cloud_nodes[0].launched_at: expected a number"),
    (("cloud_nodes", 0, "size"), 3, "cloud_nodes[0].size: expected a non-empty string"),
    (("demand", 0, "count"), 1.5, "demand[0].count: expected a whole number"),
    (("demand", 0, "cpus"), 0, "demand[0].cpus: expected a number >= 1"),
    (("in_flight", 0, "action"), "reboot", "in_flight[0].action: expected one of drain"),
    (("polled_at", "cloud"), True, "polled_at.cloud: expected a number"),
    (("now",), KeyError, "now: missing"),
    (("workers",), {}, "workers: expected a list"),
])
def test_malformed_snapshot_names_the_field(path, value, message):
    if value is None:
        data = with_(path, KeyError)
        message = message.replace("expected a number", "missing")
    else:
        data = with_(path, value)
    with pytest.raises(sj.SnapshotError) as e:
        sj.from_json(data)
    assert str(e.value).startswith(message)


def test_duplicate_node_id_is_refused():
    data = with_(("cloud_nodes",), MINIMAL["cloud_nodes"] * 2)
    with pytest.raises(sj.SnapshotError, match=r"cloud_nodes\[1\]\.id: duplicate id 'i-1'"):
        sj.from_json(data)


def test_not_json_names_file_and_line(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"now": 1,\n "polled_at": }')
    with pytest.raises(sj.SnapshotError, match=r"bad\.json: line 2 column 15: not valid JSON"):
        sj.load(str(f))


def test_htcondor_worker_fields_come_from_the_ad():
    data = with_(("workers", 0), {"name": "n1", "scheduler": "htcondor", "ad": {
        "State": "Unclaimed", "Activity": "Idle", "CloudInstanceID": "i-1", "LastHeardFrom": 990,
        "EnteredCurrentState": 500, "DaemonStartTime": 20, "TotalSlotCpus": 8, "Cpus": 6,
        "TotalSlotMemory": 30000, "NumDynamicSlots": 1}})
    w = sj.from_json(data).workers[0]
    assert (w.state, w.cloud_id, w.last_heard, w.state_since, w.registered_at) == (
        "Unclaimed/Idle p-slot, 1 dynamic slot busy", "i-1", 990, 500, 20)
    assert (w.cpus, w.cpus_busy, w.ram_mb, w.running_jobs) == (8, 2, 30000, 1)


def test_round_trip():
    s = sj.loads(EXAMPLE.read_text())
    assert sj.loads(sj.dumps(s)) == s


def test_break_even_idle_graces_round_trip_and_a_bad_one_is_named():
    """A daemon's snapshot.json carries each size's break-even grace, so a re-plan of it
    (``nodemanager plan --live``) gives idle nodes the grace the daemon gave them."""
    from dataclasses import replace
    s = replace(sj.loads(EXAMPLE.read_text()), idle_graces={"small": (60.0, " (idle grace 60s (the floor))")})
    back = sj.loads(sj.dumps(s))
    assert dict(back.idle_graces) == {"small": (60.0, " (idle grace 60s (the floor))")}
    data = json.loads(sj.dumps(s))
    data["idle_graces"]["small"] = [-5, "x"]
    with pytest.raises(sj.SnapshotError, match=r"idle_graces\.small\[0\]: must not be negative"):
        sj.from_json(data)


def test_running_jobs_and_their_predicted_ends_round_trip_and_an_end_without_a_job_is_named():
    """A daemon's snapshot.json taken with runtime prediction carries each worker's named jobs and
    their predicted ends, so a re-plan of it expects the ends the daemon expected."""
    from dataclasses import replace

    from nodemanager.core.runtime_prediction import expected_end_times
    from nodemanager.model import RunningJob
    s = sj.loads(EXAMPLE.read_text())
    jobs = (RunningJob(job_id="7", user="alice", start=1000.0, name="fit", limit=3600.0),
            RunningJob(job_id="8", user="bob", start=1100.0))
    w = replace(s.workers[0], jobs=jobs, predicted_end_times=(1600.0, 1900.0))
    s = replace(s, workers=(w, *s.workers[1:]))
    back = sj.loads(sj.dumps(s))
    assert back == s and expected_end_times(back.workers[0], 1200.0) == (1600.0, 1900.0)
    data = json.loads(sj.dumps(s))
    data["workers"][0]["predicted_end_times"] = [1600]
    with pytest.raises(sj.SnapshotError, match=r"^workers\[0\]\.predicted_end_times: 1 ends for 2 jobs"):
        sj.from_json(data)
    data["workers"][0]["jobs"][1]["start"] = "soon"
    with pytest.raises(sj.SnapshotError, match=r"^workers\[0\]\.jobs\[1\]\.start: expected a number"):
        sj.from_json(data)


def test_example_snapshot_loads():
    s = sj.load(str(EXAMPLE))
    assert len(s.cloud_nodes) == 9 and {w.scheduler for w in s.workers} == {"slurm", "htcondor"}


def test_plan_command_json_output(capsys):
    assert main(["plan", "--snapshot", str(EXAMPLE), "--config", str(EXAMPLE_INI),
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    nodes = {n["id"]: n for n in out["nodes"]}
    assert set(nodes) == {"i-0a01", "i-0a02", "i-0a03", "i-0a04", "i-0a05", "i-0b01", "i-0b02",
                          "i-0b03", "i-0c01"}
    assert set(nodes["i-0a01"]) >= {"id", "name", "tuple", "rule", "matrix_action", "action",
                                    "blocked_by", "reason"}
    assert nodes["i-0a01"]["tuple"] == {"worker_state": "idle", "window": "open",
                                        "boot_grace": "boot exceeded", "idle_grace": "idle exceeded"}
    assert nodes["i-0a01"]["matrix_action"] == "START_DRAIN"
    assert nodes["i-0a01"]["rule"].rsplit(":", 1)[0].endswith("default.matrix")
    assert nodes["i-0a03"]["action"] == "destroy"        # down* and not heard from
    assert nodes["i-0a04"]["action"] is None             # booting
    assert nodes["i-0b02"]["action"] == "cancel_drain"   # our drained node; 16-core demand wants it
    assert nodes["i-0c01"]["tuple"]["window"] == "open"      # gpu: minute 55 of the hour
    assert all(n["action"] in (None, "drain", "destroy", "cancel_drain") for n in nodes.values())
    assert isinstance(out["boots"], list)


def test_plan_command_table_and_now_override(capsys):
    assert main(["plan", "--snapshot", str(EXAMPLE), "--now", "1767225900"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["NODE", "NAME", "SIZE", "STATE"]
    assert "i-0b01" in out


def test_plan_command_other_matrix(tmp_path, capsys):
    m = tmp_path / "nothing.matrix"
    m.write_text("* | * | * | * -> None\n")
    assert main(["plan", "--snapshot", str(EXAMPLE), "--matrix", str(m), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {n["matrix_action"] for n in out["nodes"]} == {None}
    assert all(n["rule"].endswith("nothing.matrix:1") for n in out["nodes"])


def test_plan_command_errors_name_the_place(tmp_path, capsys):
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps(with_(("workers", 0, "last_heard"), "x")))
    assert main(["plan", "--snapshot", str(bad)]) == 1
    assert f"{bad}: workers[0].last_heard: expected a number" in capsys.readouterr().err
    ini = tmp_path / "c.ini"
    ini.write_text("[Daemon]\nidle_grace = soon\n")
    assert main(["plan", "--snapshot", str(EXAMPLE), "--config", str(ini)]) == 1
    err = capsys.readouterr().err
    assert "idle_grace" in err and "Traceback" not in err
    m = tmp_path / "bad.matrix"
    m.write_text("idle | open | * | * -> MAYBE\n")
    assert main(["plan", "--snapshot", str(EXAMPLE), "--matrix", str(m)]) == 1
    assert "bad.matrix:1" in capsys.readouterr().err
    assert main(["plan", "--snapshot", str(tmp_path / "missing.json")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_plan_command_reads_stdin():
    r = subprocess.run([sys.executable, "-m", "nodemanager", "plan", "--snapshot", "-",
                        "--format", "json"], input=json.dumps(MINIMAL), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["nodes"][0]["id"] == "i-1"


def test_plan_command_applies_the_configs_drain_escalation(tmp_path, capsys):
    pytest.importorskip("classad2")
    snap = with_(("workers", 0, "state"), "drng")
    snap["workers"][0].update(running_jobs=1, cpus=4, cpus_busy=4)
    f = tmp_path / "s.json"
    f.write_text(json.dumps(snap))
    ini = tmp_path / "c.ini"
    ini.write_text("[Drain]\ndeadline = 60\n")
    assert main(["plan", "--snapshot", str(f), "--config", str(ini), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(i["kind"], i["schedule"]) for i in out["items"]] == [("escalate", "fast")]
    ini.write_text("[Drain]\ndeadline = 600\n")
    assert main(["plan", "--snapshot", str(f), "--config", str(ini), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == []


def test_plan_command_does_not_pair_a_worker_heard_before_the_vm_was_launched(tmp_path, capsys):
    """Issue 12 item 10: without ``registered_at`` a 100-second-old VM was paired with a record
    last heard before its launch (a recycled name), classed down and destroyed."""
    now = 1767225600
    snapshot = {"now": now, "polled_at": {"cloud": now - 20, "scheduler": now - 10},
                "cloud_nodes": [{"id": "i-2", "name": "cn-2", "size": "small", "launched_at": now - 100}],
                "workers": [{"name": "cn-2", "scheduler": "slurm", "state": "down",
                             "last_heard": now - 600, "cpus": 4}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snapshot))
    assert main(["plan", "--snapshot", str(path), "--format", "json"]) == 0
    [n] = json.loads(capsys.readouterr().out)["nodes"]
    assert n["action"] is None and n["tuple"]["worker_state"] == "unpaired"
    assert "before this VM was launched" in n["reason"]


def _text_with(field_json: str, token: str) -> str:
    """The example snapshot's text with the first ``field_json`` value replaced by a raw JSON token."""
    text = EXAMPLE.read_text()
    head, sep, tail = text.partition(field_json)
    assert sep, field_json
    value_end = min(i for i in (tail.find(","), tail.find("\n")) if i >= 0)
    return head + sep + " " + token + tail[value_end:]


@pytest.mark.parametrize("field, token, message", [
    ('"now":', "9" * 5000, "now: a number of 5000 digits is not a time"),
    ('"now":', "9" * 400, "now: a number of 400 digits is not a time"),
    ('"launched_at":', "NaN", "cloud_nodes[0].launched_at: NaN is not a time"),
    ('"launched_at":', "-Infinity", "cloud_nodes[0].launched_at: -Infinity is not a time"),
    ('"scheduler":', "1e999", "polled_at.scheduler: 1e999 is not a time"),
    ('"launched_at":', "-5",
     "cloud_nodes[0].launched_at: -5 is not a time (seconds since 1970, before 2200)"),
    ('"launched_at":', "99999999999", "cloud_nodes[0].launched_at: 99999999999 is not a time"),
    ('"cpus":', "1" * 40, "a number of 40 digits is not a usable count"),
    ('"cpus":', "1e15", "1000000000000000 is not a usable count (at most 1e+12)"),
    ('"TotalSlotCpus":', "1" * 4400,
     "workers[3].ad.TotalSlotCpus: a number of 4400 digits is not a usable value"),
], ids=["now-5000-digits", "now-400-digits", "nan", "minus-infinity", "1e999", "negative-time",
        "year-5138", "count-40-digits", "count-1e15", "ad-4400-digits"])
def test_plan_names_the_field_of_an_unusable_number(tmp_path, capsys, field, token, message):
    f = tmp_path / "snapshot.json"
    f.write_text(_text_with(field, token))
    assert main(["plan", "--snapshot", str(f)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"nodemanager plan: error: {f}: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("where", ["outside", "in_ad"])
def test_plan_reports_deep_nesting_by_line_and_column(tmp_path, capsys, where):
    f = tmp_path / "snapshot.json"
    if where == "outside":
        f.write_text("[" * 100_000 + "]" * 100_000)
    else:  # deep enough to stop the reader or the check of the ad after it
        f.write_text(_text_with('"TotalSlotCpus":', "[" * 990 + "]" * 990))
    assert main(["plan", "--snapshot", str(f)]) == 1
    err = capsys.readouterr().err
    assert "nested deeper than 200 levels" in err and "Traceback" not in err
    if where == "outside":
        assert f"{f}: line 1 column 201: nested" in err


def test_plan_now_option_is_checked_like_a_snapshot_time(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--snapshot", str(EXAMPLE), "--now", "9" * 400])
    assert e.value.code == 2
    assert "argument --now: now: a number of 400 digits is not a time" in capsys.readouterr().err


def test_an_integer_beyond_a_float_in_a_snapshot_document_is_named_not_an_overflow():
    """from_json on a parsed document (not text) with an int past a float's range (the fuzzer)."""
    doc = json.loads(EXAMPLE.read_text())
    doc["now"] = 10 ** 310
    with pytest.raises(sj.SnapshotError, match="now: a number of 311 digits is not a time"):
        sj.from_json(doc)


def test_docs_plan_sample_table_is_what_plan_prints(capsys):
    """docs/plan.md's sample is the real output of the command it shows (rule lines included)."""
    doc = (EXAMPLE.parent / "plan.md").read_text()
    (table,) = [b for b in doc.split("```") if b.lstrip("\n").startswith("NODE ")]
    config = str(EXAMPLE.parent / "example-plan.ini")
    assert main(["plan", "--snapshot", str(EXAMPLE), "--config", config]) == 0
    printed = capsys.readouterr().out.splitlines()
    shown = table.strip("\n").splitlines()
    assert printed[:len(shown)] == shown
