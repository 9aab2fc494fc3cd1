"""The SWF reader and the lower bounds, on small traces written by hand."""

import gzip

import pytest

from nodemanager.sim.figures import lower_bounds, pareto_front, percentile
from nodemanager.sim.swf import SwfReader, read_jobs

HEADER = """\
; Version: 2.2
;   Acknowledge: Jane Provider
; UnixStartTime: 1091615532
; TimeZone: 3600	 # DEPRECATED
;
"""


def line(job, submit, run, alloc, req, *, wait=0, used_mem=-1, req_time=-1, req_mem=-1, status=1):
    fields = [job, submit, wait, run, alloc, -1, used_mem, req, req_time, req_mem, status,
              1, 1, -1, 1, 1, -1, -1]
    return " ".join(str(f) for f in fields) + "\n"


def write(tmp_path, body, name="t.swf", gz=False):
    path = tmp_path / (name + (".gz" if gz else ""))
    data = (HEADER + body).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


@pytest.mark.parametrize("gz", [False, True])
def test_fields_header_and_gzip(tmp_path, gz):
    body = (line(1, 100, 50, 4, 8, wait=7, used_mem=1000, req_time=3600, req_mem=2048)
            + line(2, 130, 20, -1, 2, used_mem=512)
            + line(3, 140, -1, 1, 1))
    jobs, reader = read_jobs(write(tmp_path, body, gz=gz))
    a, b = jobs
    assert (a.id, a.submit, a.runtime, a.cores, a.trace_wait, a.requested_time) == (1, 100, 50, 4, 7, 3600)
    assert a.mem_mb == 8           # requested 2048 KB per processor x 4 processors
    assert b.cores == 2            # no allocated count: the requested one
    assert b.mem_mb == 1           # used memory when none was requested (512 KB x 2)
    assert b.requested_time == -1
    assert reader.skipped == {"unknown run time": 1}
    assert reader.header.unix_start_time == 1091615532
    assert reader.header.acknowledge == ["Jane Provider"]
    assert reader.header.get("TimeZone") == "3600"


def test_window_counts_days_from_the_first_job(tmp_path):
    day = 86400
    body = "".join(line(k, 5000 + k * day // 2, 10, 1, 1) for k in range(8))  # every half day
    path = write(tmp_path, body)
    jobs, _ = read_jobs(path, skip_days=1, days=2)
    assert [j.id for j in jobs] == [2, 3, 4, 5]
    assert [j.id for j in read_jobs(path, days=1)[0]] == [0, 1]


def test_archive_unknowns_and_unusable_lines_are_skipped_and_counted_never_an_abort(tmp_path):
    """A sample as archive traces have them: whole lines of -1, an unknown submit time, a line
    out of order, a short line, a word, an infinity; the good jobs around them replay."""
    unknown = " ".join(["-1"] * 18) + "\n"
    body = (line(0, 10, 5, 1, 1) + unknown * 3
            + line(1, -1, 10, 1, 1)
            + line(2, 100, 10, 1, 1)
            + line(3, 50, 10, 1, 1)                                  # before the job above it
            + "4 120 0 10 1\n"
            + line(5, 130, 10, 1, 1).replace(" 10 ", " ten ", 1)
            + line(6, 140, 10, 1, 1).replace(" 10 ", " inf ", 1)
            + line(7, 150, -1, 1, 1)
            + line(8, 160, 10, 1, 1))
    path = write(tmp_path, body)
    jobs, reader = read_jobs(path)
    assert [j.id for j in jobs] == [0, 2, 8]
    first = HEADER.count("\n") + 1
    assert reader.skipped == {"unknown submit time": 4, "submitted before the job above it": 1,
                              "not 18 fields": 1, "a field is not a number": 1,
                              "a field is not a finite number": 1, "unknown run time": 1}
    assert reader.first_skipped_line["unknown submit time"] == first + 1
    assert reader.first_skipped_line["submitted before the job above it"] == first + 6


def test_simulate_replays_a_trace_with_unknown_fields_and_says_what_it_skipped(tmp_path, capsys):
    from nodemanager.cli import main
    unknown = " ".join(["-1"] * 18) + "\n"
    body = line(0, 10, 600, 2, 2) + unknown * 5 + line(1, 700, 600, 4, 4)
    assert main(["simulate", "--trace", write(tmp_path, body), "--only", "nodemanager"]) == 0
    out = capsys.readouterr().out
    assert "5 jobs skipped: unknown submit time (first at line 7)" in out
    assert "nodemanager " in out


def test_reading_stops_after_the_window(tmp_path):
    path = write(tmp_path, line(1, 0, 5, 1, 1) + line(2, 86400 * 3, 5, 1, 1) + "garbage line\n")
    jobs, reader = read_jobs(path, days=1)       # the lines after the window are never read
    assert [j.id for j in jobs] == [1] and reader.skipped == {}
    jobs, reader = read_jobs(path)
    assert [j.id for j in jobs] == [1, 2] and reader.skipped == {"not 18 fields": 1}


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.swf"):
        SwfReader(str(tmp_path / "nope.swf"))


def test_lower_bounds_by_hand(tmp_path):
    # 4-core nodes. Running cores over time with every job started at submit:
    #   [0, 100): 3 (job 1)          -> 1 node
    #   [100, 200): 3 + 2 = 5        -> 2 nodes
    #   [200, 400): 2 (job 2)        -> 1 node   (job 1 ended at 200)
    #   [400, 1000): nothing; [1000, 1010): 9 cores (job 3) -> 3 nodes
    body = line(1, 0, 200, 3, 3) + line(2, 100, 300, 2, 2) + line(3, 1000, 10, 9, 9)
    jobs, _ = read_jobs(write(tmp_path, body))
    b = lower_bounds(jobs, 4)
    assert b.work_core_hours * 3600 == pytest.approx(3 * 200 + 2 * 300 + 9 * 10)
    assert b.work_node_hours * 3600 == pytest.approx((600 + 600 + 90) / 4)
    assert b.nowait_node_hours * 3600 == pytest.approx(100 * 1 + 100 * 2 + 200 * 1 + 10 * 3)
    assert b.nowait_peak_nodes == 3
    assert (b.first_submit, b.last_end) == (0, 1010)


def test_a_job_ending_frees_its_cores_for_one_starting_at_the_same_instant(tmp_path):
    body = line(1, 0, 100, 4, 4) + line(2, 100, 100, 4, 4)
    b = lower_bounds(read_jobs(write(tmp_path, body))[0], 4)
    assert b.nowait_peak_nodes == 1
    assert b.nowait_node_hours * 3600 == pytest.approx(200)


def test_percentile_is_nearest_rank():
    values = [10.0, 20.0, 30.0, 40.0]
    assert [percentile(values, p) for p in (25, 50, 95, 100)] == [10.0, 20.0, 40.0, 40.0]
    assert percentile([], 50) == 0.0


def test_pareto_front_keeps_only_undominated_points():
    points = [(10.0, 100.0), (12.0, 50.0), (11.0, 120.0), (20.0, 50.0), (5.0, 500.0)]
    assert pareto_front(points) == [(5.0, 500.0), (10.0, 100.0), (12.0, 50.0)]


def test_every_table_column_is_explained_under_the_table(tmp_path, capsys):
    from nodemanager.cli import main
    from nodemanager.sim.figures import COLUMN_MEANINGS, TABLE_COLUMNS
    assert [h for h, _, _ in TABLE_COLUMNS] == list(COLUMN_MEANINGS)
    assert main(["simulate", "--trace", write(tmp_path, line(0, 10, 600, 2, 2)), "--only", "nodemanager"]) == 0
    out = capsys.readouterr().out
    legend = out[out.index("\ncolumns:\n"):]
    assert "  money        each VM's paid hours x its size's price per hour" in legend
    assert "  cost/nowait  " in legend and "  wall s       " in legend
    assert "max_nodes 1 (the peak of this window's no-wait schedule, " in out
