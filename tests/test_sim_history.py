"""`nodemanager simulate --history FILE --format sacct|condor`: a site's own job history replays as
the same jobs written as SWF would, and every line it cannot replay is counted and named."""

import io
import json

import pytest

from nodemanager.cli import main
from nodemanager.sim.history.write import AT, WRITERS
from nodemanager.sim.workloads import shaped_workload, write_swf

FIGURES = ("paid_node_hours", "boots", "destroys", "wait_p50", "wait_p95", "jobs_completed", "money")


def simulate(args, capsys):
    code = main(["simulate", *args, "--cores-per-node", "8", "--jobs", "1"])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def workload():
    return shaped_workload("bursts", 0.5, 24, 3)


@pytest.mark.parametrize("fmt,written", [("sacct", "sacct"), ("condor", "condor"), ("condor", "condor-af")])
def test_a_site_history_replays_as_the_same_jobs_in_swf(tmp_path, capsys, workload, fmt, written):
    """The same jobs written as sacct lines, condor_history -json or -af output, and SWF give the
    same replay: every figure equal."""
    swf, hist = tmp_path / "w.swf", tmp_path / f"w.{written}"
    with open(swf, "w") as out:
        write_swf(out, workload)
    with open(hist, "w") as out:
        WRITERS[written](out, [j for j, _ in workload], AT)
    code, out, err = simulate(["--trace", str(swf), "--json"], capsys)
    assert code == 0, err
    want = json.loads(out)
    code, out, err = simulate(["--history", str(hist), "--format", fmt, "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["jobs"] == want["jobs"] == len(workload)
    assert {k: got["runs"][0][k] for k in FIGURES} == {k: want["runs"][0][k] for k in FIGURES}
    # a job's .batch step is counted, never replayed twice
    assert got["skipped_jobs"] == ({"a job step (its job's line is replayed)": len(workload)}
                                   if fmt == "sacct" else {})
    assert got["skipped_lines"] == []


SACCT_HEAD = "JobID|Submit|Start|End|AllocCPUS|ReqMem|NNodes|Timelimit|User|Account|Partition|State"
SACCT = [
    SACCT_HEAD,                                                                                     # 1
    "10|2026-11-01T00:00:00|2026-11-01T00:01:00|2026-11-01T01:01:00|4|8000M|1|02:00:00|ann|phys|batch|COMPLETED",  # 2 ok
    "10.batch|2026-11-01T00:00:00|2026-11-01T00:01:00|2026-11-01T01:01:00|4||1||||batch|COMPLETED",  # 3 step
    "11_1|2026-11-01T00:10:00|2026-11-01T00:10:00|2026-11-01T00:40:00|2|1G|1|1-00:00:00|bob|bio|batch|COMPLETED",  # 4 array task ok
    "11_[2-20]|2026-11-01T00:10:00|Unknown|Unknown|0|1G|1|1-00:00:00|bob|bio|batch|PENDING",          # 5 pending array
    "12|2026-11-01T00:20:00|None|2026-11-01T00:25:00|0|1G|1|01:00:00|bob|bio|batch|CANCELLED by 1000",  # 6 never ran
    "13|2026-11-01T00:30:00|2026-11-01T00:31:00|2026-11-01T00:50:00|8|1G|1|UNLIMITED|ann|phys|batch|CANCELLED by 1000",  # 7 ran, cancelled
    "14|2026-11-01T00:40:00|2026-11-01T00:41:00|2026-11-01T00:45:00|1|500Mc|1|10:00|ann|phys|batch|REQUEUED",  # 8 earlier run
    "14|2026-11-01T00:40:00|2026-11-01T00:50:00|2026-11-01T01:10:00|1|500Mc|1|10:00|ann|phys|batch|COMPLETED",  # 9 later run
    "15|2026-11-01T01:00:00|2026-11-01T00:59:30|2026-11-01T01:20:00|2|1G|1|01:00:00|ann|phys|batch|COMPLETED",  # 10 skew
    "16|2026-11-01T01:00:00|2026-11-01T02:00:00|2026-11-01T01:00:00|2|1G|1|01:00:00|ann|phys|batch|COMPLETED",  # 11 ends first
    "17|2026-11-01T01:00:00|2026-11-01T01:00:00|2026-11-01T02:00:00|NaN|1G|1|01:00:00|ann|phys|batch|COMPLETED",  # 12 NaN
    "18|2026-11-01T01:00:00|2026-11-01T01:00:00|2026-11-01T02:00:00|-4|1G|1|01:00:00|ann|phys|batch|COMPLETED",  # 13 negative
    "19|2026-11-01T01:00:00|2026-11-01T01:00:00|2026-11-01T02:00:00|99999999999|1G|1|01:00:00|ann|phys|batch|COMPLETED",  # 14 huge
    "20|2026-11-01T01:00:00|2026-11-01T01:00:00|2029-11-01T02:00:00|1|1G|1|01:00:00|ann|phys|batch|COMPLETED",  # 15 3 years
    "21|2026-11-01T01:00:00|2026-11-01T01:00:00",                                                     # 16 missing fields
    "22|2026-13-45T01:00:00|2026-11-01T01:00:00|2026-11-01T02:00:00|1|1G|1|01:00:00|ann|phys|batch|COMPLETED",  # 17 bad time
    "23|2026-11-01T01:00:00|2026-11-01T01:00:00|Unknown|1|1G|1|01:00:00|ann|phys|batch|RUNNING",        # 18 running
    "24|2026-11-01T01:00:00|2026-11-01T01:00:00|2026-11-01T02:00:00|1|lots|1|01:00:00|ann|phys|batch|COMPLETED",  # 19 bad mem
]


def test_sacct_rules_and_hostile_lines_are_counted_and_named(tmp_path, capsys):
    """Each kind of record gets its stated rule; every line that cannot be replayed (including one
    not UTF-8 and one of 100 MB) is counted by reason and named with its line number."""
    path = tmp_path / "site.sacct"
    with open(path, "wb") as f:
        f.write("\n".join(SACCT).encode() + b"\n")
        f.write(b"25|2026-11-01T01:00:00|2026-11-01T01:00:00|2026-11-01T02:00:00|1|1G|1|01:00:00|\xff\xfe|x|b|COMPLETED\n")  # 20
        f.write(b"26|" + b"9" * (100 * 1024 * 1024) + b"\n")                                      # 21: 100 MB
        f.write(SACCT[1].replace("10|", "27|").encode() + b"\n")                                  # 22 ok
    code, out, err = simulate(["--history", str(path), "--format", "sacct", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    # replayed: 10, 11_1, 13 (ran, then cancelled), both runs of 14, 15 (start before submit), 27
    assert got["jobs"] == 7
    assert got["skipped_jobs"] == {
        "a job step (its job's line is replayed)": 1, "never started (array tasks still pending)": 1,
        "never started": 1, "ends before it starts": 1, "bad AllocCPUS": 2, "cores outside 1-1000000": 1,
        "ran longer than 365 days": 1, "not 12 fields": 1, "bad Submit time": 1,
        "still running (no end time)": 1, "bad ReqMem": 1, "not UTF-8": 1, "line longer than 1 MiB": 1}
    assert [(s["line"], s["reason"]) for s in got["skipped_lines"]] == [
        (5, "never started (array tasks still pending)"), (6, "never started"), (11, "ends before it starts"),
        (12, "bad AllocCPUS"), (13, "bad AllocCPUS"), (14, "cores outside 1-1000000"),
        (15, "ran longer than 365 days"), (16, "not 12 fields"), (17, "bad Submit time"),
        (18, "still running (no end time)"), (19, "bad ReqMem"), (20, "not UTF-8"),
        (21, "line longer than 1 MiB")]
    code, out, err = simulate(["--history", str(path), "--format", "sacct"], capsys)
    assert f"{path}:20 (not UTF-8)" in out and f"{path}:21 (line longer than 1 MiB)" in out
    assert "1 record(s) replayed under a rule: started before its submit time" in out
    assert "1 record(s) replayed under a rule: a requeued job's later run" in out


def test_sacct_rules_give_the_jobs_their_times_and_sizes(tmp_path):
    from nodemanager.sim.history import read_history

    path = tmp_path / "site.sacct"
    path.write_text("\n".join(SACCT[:10]) + "\n")
    jobs, log = read_history(str(path), "sacct")
    t0 = 1_793_491_200.0  # 2026-11-01T00:00:00Z
    got = [(j.submit - t0, j.runtime, j.cores, j.mem_mb, j.requested_time) for j in jobs]
    assert got == [
        (0, 3600, 4, 8000, 7200),          # waited a minute: the replay re-decides the wait
        (600, 1800, 2, 1024, 86400),       # an array task is a job
        (1800, 1140, 8, 1024, -1),         # cancelled while running: ran until then
        (2400, 240, 1, 500, 600),          # the run a requeue ended (500M per CPU)
        (2700, 1200, 1, 500, 600),         # its later run, submitted when the first ended
        (3570, 1230, 2, 1024, 3600),       # started 30 s before its submit: submitted at its start
    ]


def test_a_history_without_the_needed_fields_is_refused_naming_the_file(tmp_path, capsys):
    path = tmp_path / "site.sacct"
    path.write_text("JobID|Submit|End|AllocCPUS\n1|2026-11-01T00:00:00|2026-11-01T00:00:00|1\n")
    code, out, err = simulate(["--history", str(path), "--format", "sacct"], capsys)
    assert code == 1 and f"{path}:1: the header lacks start" in err
    code, out, err = simulate(["--history", str(path)], capsys)
    assert code == 1 and "--format is needed" in err


CONDOR_OK = {"ClusterId": 1, "ProcId": 0, "QDate": 1793491200, "JobStartDate": 1793491260,
             "JobCurrentStartDate": 1793491260, "CompletionDate": 1793494860, "EnteredCurrentStatus": 1793494860,
             "JobStatus": 4, "RequestCpus": 2, "RequestMemory": 2048, "Owner": "ann", "AcctGroup": "phys",
             "AllowedJobDuration": 7200, "Cmd": "/bin/sim"}


def _ad(**change):
    ad = {**CONDOR_OK, **change}
    return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in ad.items() if v is not None) + "\n}\n"


def test_condor_rules_and_hostile_ads_are_counted_and_named(tmp_path, capsys):
    """condor_history -json ads: completed and removed-while-running jobs replay, jobs that never
    started or still run do not; NaN, negative, huge, missing and malformed values, a line not
    UTF-8 inside an ad and a 100 MB line are each counted and named by the ad's first line."""
    ads = [
        _ad(),                                                           # ok
        _ad(JobStatus=3, CompletionDate=0, EnteredCurrentStatus=1793492000),  # removed while running: ok
        _ad(JobStatus=3, JobStartDate=None, JobCurrentStartDate=None),   # removed before it ran
        _ad(JobStatus=2, CompletionDate=0),                              # still running
        _ad(RequestCpus=-3),                                             # negative
        _ad(RequestMemory=1e300),                                        # huge
        _ad(QDate=None),                                                 # missing
        _ad(RequestCpus="/Expr(4)/"),                                    # an expression, not a number
        _ad(CompletionDate=1793491000),                                  # ends before it starts
        _ad(QDate=1793491300),                                           # started before submit: ok, skew
    ]
    text = "[\n" + ",\n".join(ads) + "]\n"
    lines = text.splitlines(keepends=True)
    starts = [i + 1 for i, line in enumerate(lines) if line == "{\n"]
    nan_ad = _ad().replace('"RequestCpus": 2', '"RequestCpus": NaN')
    path = tmp_path / "history.json"
    with open(path, "wb") as f:
        f.write(text.rstrip("]\n").encode() + b",\n")
        f.write(nan_ad.encode() + b",\n")
        f.write(b'{\n  "Owner": "\xff",\n' + _ad().split("\n", 1)[1].encode() + b",\n")
        f.write(b"{\n  \"Cmd\": \"" + b"x" * (100 * 1024 * 1024) + b"\",\n" + _ad().split("\n", 1)[1].encode()
                + b",\n")
        f.write(b'{\n  "Owner": "ann"\n  "JobStatus": 4\n}\n,\n')   # not JSON (no comma)
        f.write(b"garbage\n")
        f.write(_ad().encode() + b"]\n")
    n = len(lines) - 1
    nan_at = n + 1
    utf_at = nan_at + nan_ad.count("\n") + 1
    big_at = utf_at + _ad().count("\n") + 2
    bad_json_at = big_at + _ad().count("\n") + 2
    code, out, err = simulate(["--history", str(path), "--format", "condor", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["jobs"] == 4
    assert got["skipped_jobs"] == {
        "never started": 1, "still running (no end time)": 1, "cores outside 1-1000000": 1,
        "memory outside 0-1000000000 MB": 1, "no QDate": 1, "RequestCpus is not a number": 1,
        "ends before it starts": 1, "RequestCpus is not a finite number": 1, "not UTF-8": 1,
        "an ad with a skipped line": 2, "line longer than 1 MiB": 1, "not valid JSON": 1,
        "not part of a JSON ad": 1}
    named = [(s["line"], s["reason"]) for s in got["skipped_lines"]]
    assert named == [
        (starts[2], "never started"), (starts[3], "still running (no end time)"),
        (starts[4], "cores outside 1-1000000"), (starts[5], "memory outside 0-1000000000 MB"),
        (starts[6], "no QDate"), (starts[7], "RequestCpus is not a number"), (starts[8], "ends before it starts"),
        (nan_at, "RequestCpus is not a finite number"), (utf_at + 1, "not UTF-8"), (utf_at, "an ad with a skipped line"),
        (big_at + 1, "line longer than 1 MiB"), (big_at, "an ad with a skipped line"),
        (bad_json_at, "not valid JSON"), (bad_json_at + 5, "not part of a JSON ad")]
