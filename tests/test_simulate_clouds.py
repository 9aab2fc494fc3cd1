"""``simulate --clouds FILE``: several simulated clouds with their own prices, boot times, capacity
and outages, replayed through the daemon's controller: work goes to the cheaper cloud, to the other
one while the cheaper has no capacity, and back."""

from __future__ import annotations

import json

import pytest

from nodemanager.cli import main
from tests.sim_cli import HEAD

CLOUDS = """
[Cloud east]
{east}
[Cloud west]
boot_delay = 5m
capacity = 4
[Size east-8]
cloud = east
cores = 8
ram_mb = 32768
price = 0.30
[Size west-8]
cloud = west
cores = 8
ram_mb = 32768
price = 0.40
"""
# two whole-node jobs of an hour at the start, two more four hours later
ROWS = [(0, 3600), (100, 3600), (4 * 3600, 3600), (4 * 3600 + 100, 3600)]


def replay(tmp_path, capsys, east: str) -> dict:
    trace = tmp_path / "t.swf"
    trace.write_text(HEAD + "".join(f"{i} {s} 0 {r} 8 -1 -1 8 {r} -1 1 1 1 -1 1 1 -1 -1\n"
                                    for i, (s, r) in enumerate(ROWS, 1)))
    clouds = tmp_path / "clouds.ini"
    clouds.write_text(CLOUDS.format(east=east))
    code = main(["simulate", "--trace", str(trace), "--clouds", str(clouds), "--json", "--jobs", "1",
                 "--by", "size"])
    out = capsys.readouterr()
    assert code == 0, out.err
    run = json.loads(out.out)["runs"][0]
    assert run["jobs_completed"] == 4
    return {s["size"]: s["core_hours"] for s in run["spend"]}


def test_work_goes_to_the_cheaper_cloud(tmp_path, capsys):
    assert replay(tmp_path, capsys, "") == {"east-8": 32.0}


def test_an_outage_sends_work_to_the_other_cloud_and_it_comes_back(tmp_path, capsys):
    assert replay(tmp_path, capsys, "outage = 0s-2h") == {"west-8": 16.0, "east-8": 16.0}


def test_a_full_cloud_sends_the_rest_to_the_other(tmp_path, capsys):
    # one VM at a time in east: of each pair of jobs, one runs there and one in west
    assert replay(tmp_path, capsys, "capacity = 1") == {"east-8": 16.0, "west-8": 16.0}


@pytest.mark.parametrize("east, words", [
    ("outage = 2h-1h", "clouds.ini: [Cloud east] outage: '2h-1h' is not START-END with END after START"),
    ("capacity = -1", "clouds.ini: [Cloud east] capacity: must be from 0 to 1e+06, got '-1'"),
    ("speed = 3", "clouds.ini: [Cloud east] speed: unknown option (known: boot_delay, capacity, outage, spot_rate)"),
])
def test_a_bad_clouds_file_is_refused_naming_the_place(tmp_path, capsys, east, words):
    trace = tmp_path / "t.swf"
    trace.write_text(HEAD + "1 0 0 60 8 -1 -1 8 60 -1 1 1 1 -1 1 1 -1 -1\n")
    clouds = tmp_path / "clouds.ini"
    clouds.write_text(CLOUDS.format(east=east))
    assert main(["simulate", "--trace", str(trace), "--clouds", str(clouds)]) != 0
    assert words in capsys.readouterr().err
