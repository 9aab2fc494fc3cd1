"""`nodemanager advise`: the front of money against p95 wait over the settings that move them,
today's point marked, and a proposal as a config diff that never kills or evicts a job."""

import json

import pytest

from nodemanager.cli import main
from nodemanager.sim.advisor import Candidate, Change, Point, edit, front, propose
from nodemanager.sim.history.write import write_sacct
from nodemanager.sim.workloads import shaped_jobs

CONFIG = """# our site
[Daemon]
max_nodes = 12
idle_grace = 300s

[Size sim8]
cores = 8
ram_mb = 32768
price = 0.34
"""


@pytest.fixture
def site(tmp_path):
    import policy_matrix

    history = tmp_path / "site.sacct"
    with open(history, "w") as out:
        write_sacct(out, shaped_jobs("bursts", 0.25, 24, 4))
    config = tmp_path / "nodemanager.ini"
    config.write_text(CONFIG)
    # drains every busy node: with fast drains, every job running on one is killed
    text = open(policy_matrix.default_path()).read()
    killer = text.replace("busy           | *      | *             | *             -> None",
                          "busy           | *      | *             | *             -> START_DRAIN")
    assert killer != text
    (tmp_path / "killer.matrix").write_text(killer)
    return history, config


@pytest.mark.slow
def test_the_advisor_proposes_a_safe_change_and_never_a_killing_one(site, capsys, tmp_path):
    history, config = site
    killing = "Daemon:matrix=killer.matrix;Drain:schedule=fast"
    code = main(["advise", "--history", str(history), "--format", "sacct", "--config", str(config),
                 "--try", killing, "--json", "--report", str(tmp_path / "report")])
    out = capsys.readouterr()
    assert code == 0, out.err
    got = json.loads(out.out)
    points = {p["label"]: p for p in got["points"]}
    assert [p["label"] for p in got["points"] if p["today"]] == ["today"]
    assert {"idle_grace = 60s", "idle_grace = 900s", "idle_grace_mode = break-even", "consolidate = yes",
            "profile = cost", "runtime_prediction = recent"} <= set(points)
    killer = points["matrix = killer.matrix; [Drain] schedule = fast"]
    assert killer["killed"] > 0 and not killer["on_front"]
    proposal = got["proposal"]
    assert proposal is not None and proposal["label"] != killer["label"]
    chosen = points[proposal["label"]]
    assert chosen["on_front"] and chosen["killed"] == chosen["evicted"] == chosen["unfinished"] == 0
    assert chosen["money"] < points["today"]["money"]
    assert chosen["wait_p95"] <= points["today"]["wait_p95"] + 60
    # the cheapest safe point within the slack is the one proposed
    safe = [p for p in got["points"] if p["on_front"] and p["wait_p95"] <= points["today"]["wait_p95"] + 60]
    assert chosen["money"] == min(p["money"] for p in safe)
    assert f"--- {config}\n+++ {config} (proposed)\n" in proposal["diff"]
    assert (tmp_path / "report" / "advice.png").stat().st_size > 0

    code = main(["advise", "--history", str(history), "--format", "sacct", "--config", str(config), "--jobs", "1",
                 "--try", "Daemon:idle_grace=never-ish"])
    assert code == 1 and "idle_grace = never-ish: bad configuration" in capsys.readouterr().err


def _point(label, money, wait, killed=0, evicted=0):
    changes = () if label == "today" else (Change("Daemon", "x", label),)
    return Point(candidate=Candidate(label=label, changes=changes, text=""), money=money, wait_p95=wait,
                 killed=killed, evicted=evicted, unfinished=0)


def test_a_cheaper_point_that_killed_or_evicted_is_never_on_the_front_nor_proposed():
    today, cheap_killer, cheap_evicter, safe = (_point("today", 10.0, 100.0), _point("kills", 5.0, 90.0, killed=1),
                                                _point("evicts", 6.0, 90.0, evicted=2), _point("safe", 8.0, 120.0))
    no_change = _point("no change", 10.0, 100.0)
    points = [today, cheap_killer, cheap_evicter, safe, no_change]
    assert front(points) == [safe, today]
    assert propose(points, wait_slack=60.0) is safe
    assert propose(points, wait_slack=10.0) is None      # safe's wait is 20 s over today's


def test_a_candidate_is_todays_file_with_only_its_lines_changed():
    two_sizes = CONFIG + "\n[Size sim4]\ncores = 4\nram_mb = 16384\nprice = 0.17\n"
    text = edit(two_sizes, [Change("Daemon", "idle_grace", "60s"), Change("Daemon", "consolidate", "yes"),
                            Change("Size sim4", "", None), Change("Drain", "schedule", "graceful")])
    assert text == ("# our site\n[Daemon]\nmax_nodes = 12\nidle_grace = 60s\nconsolidate = yes\n\n"
                    "[Size sim8]\ncores = 8\nram_mb = 32768\nprice = 0.34\n\n\n[Drain]\nschedule = graceful\n")
