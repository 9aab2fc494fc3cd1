"""The node table says what an operator means, over a run of the embedded default (simulated
cloud and HTCondor-style pool, the real core and controller) and the sample pool: the tuple is the
matrix's, joined workers show ``joined`` beside it and no boot grace countdown, our finished
drains show ``drained by us`` beside it, an
HTCondor machine shows its p-slot with its busy dynamic slots, VMs count as booting from the
create, every blocked node has a next change, no cell is blank, the header turns amber while a
size is protected or actions are frozen, and the table fits 1,400 px."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import pytest
import requests

from nodemanager.configuration.settings import ManageSettings
from nodemanager.console import render_html
from nodemanager.console.status import StatusServer
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.model import Blocked, Freeze
from tests.fixtures.observability import CORE, T0, sample_history, sample_report
from tests.test_status_world import Run


def _docs(run: Run, cycles: int):
    for _ in range(cycles):
        report = run.cycle()
        yield report, status_document(run.view, run.admin, run.time.now)
        run.time.advance(5.0)


def _cells(page: str) -> list[list[str]]:
    """The text of each cell of each node row of a rendered page."""
    rows = re.findall(r"<tr class='node[^']*'[^>]*>(.*?)</tr>", page)
    return [[re.sub("<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in rows]


def test_joined_workers_show_joined_and_count_down_no_boot_grace() -> None:
    joined = None
    for report, doc in _docs(Run(), 40):
        for row in doc["nodes"]:
            if row["worker"] and "boot wait" in row["matrix_tuple_text"]:
                joined = row
                break
        if joined:
            break
    assert joined is not None
    # the matrix still reads its tuple; the table shows the worker joined and no boot countdown
    assert joined["tuple"]["boot_grace"] == "boot wait"
    assert joined["tuple_text"] == joined["matrix_tuple_text"] + " joined"
    assert joined["beside"] == ["joined"]
    assert joined["next_change_what"] != "boot grace ends"
    assert "boot grace" not in joined["next_change_text"]


def test_an_htcondor_machine_shows_its_pslot_with_its_busy_dynamic_slots() -> None:
    states = {row["raw_state"] for _, doc in _docs(Run(), 20) for row in doc["nodes"]
              if row["tuple"]["worker_state"] == "busy"}
    assert states and all(re.fullmatch(r"Unclaimed/Idle p-slot, \d+ dynamic slots? busy", s) for s in states), states


def test_a_node_drained_by_us_shows_drained_beside_its_matrix_state() -> None:
    drained = None
    for _, doc in _docs(Run(), 120):
        drained = next((r for r in doc["nodes"] if r["facts"]["drained"]), None)
        if drained:
            break
    assert drained is not None
    assert drained["tuple"]["worker_state"] == "down"
    assert drained["tuple_text"].startswith("(down, ") and drained["tuple_text"].endswith("drained by us")
    assert doc["summary"]["by_worker_state"].get("down", 0) >= doc["summary"]["drained_by_us"] >= 1
    page = render_html(doc)
    assert "<span class='beside'>joined, drained by us</span>" in page and "of them drained by us" in page


def test_vms_count_as_booting_from_the_moment_of_the_create() -> None:
    run = Run()
    report, doc = next(_docs(run, 1))
    created = [o for o in report.outcomes if o.kind == "boot" and o.result == "ok"]
    assert created and not report.snapshot.cloud_nodes   # created now, not listed yet
    assert doc["summary"]["booting"] == len(created) == doc["summary"]["created_unlisted"]
    page = render_html(doc)
    assert len(created) == 3 and "12 jobs queued: 3 VMs booting" in page
    assert "<li>nothing is held back</li>" not in page
    assert "created, not listed yet" in page


def test_every_cell_of_the_demo_says_something_and_blocked_nodes_have_a_next_change() -> None:
    seen_blocked = 0
    for _, doc in _docs(Run(), 60):
        for row in doc["nodes"]:
            assert row["next_change_text"], row
            seen_blocked += bool(row["blocked_by"])
        for cells in _cells(render_html(doc)):
            assert all(c.strip() for c in cells), cells
    report = sample_report()
    nodes = tuple(e._replace(blocked_by=Blocked.UNCONFIRMED, next_change=None, next_change_what=None)
                  if e.node_id == "i-held" else e for e in report.plan.nodes)
    report = dataclasses.replace(report, plan=dataclasses.replace(report.plan, nodes=nodes))
    doc = status_document(StatusView(report=report, last_cycle_at=T0, core=CORE), None, T0 + 4)
    blocked = [r for r in doc["nodes"] if r["blocked_by"]]
    assert {r["node_id"] for r in blocked} == {"i-held", "i-min"}
    assert all(r["next_change_text"] for r in blocked)
    row = next(r for r in blocked if r["node_id"] == "i-held")
    assert "polls confirm" in row["next_change_text"]
    for cells in _cells(render_html(doc)):
        assert all(c.strip() for c in cells), cells


@pytest.mark.parametrize("state", ["protected", "frozen", "ok"])
def test_the_header_is_amber_while_a_size_is_protected_or_actions_are_frozen(state) -> None:
    report = sample_report(**({"frozen": "3 of 8 nodes down at once", "frozen_by": Freeze.MASS_DOWN}
                              if state == "frozen" else {}))
    if state == "protected":
        report = dataclasses.replace(report, snapshot=dataclasses.replace(
            report.snapshot, protected_sizes={"large": "protected: 3 boot(s) in a row did not join"}))
    view = StatusView(report=report, last_cycle_at=T0, started_at=T0 - 60, core=CORE,
                      history=sample_history())
    server = StatusServer(ManageSettings(address="127.0.0.1", port=0), source=lambda: view,
                          clock=lambda: T0 + 4).start()
    try:
        page = requests.get(server.url + "/", timeout=5).text
    finally:
        server.stop()
    level = re.search(r"<span class='(\w+)' id='health'>", page).group(1)
    assert level == ("ok" if state == "ok" else "warn")
    if state == "protected":
        assert "size large protected: 3 boot(s) in a row did not join" in page


_MEASURE = """<script>
window.addEventListener('load', function(){
  var heads = document.querySelectorAll('#nodes th'), out = [];
  for (var i = 0; i < heads.length; i++) {
    var r = heads[i].getBoundingClientRect();
    out.push(heads[i].textContent + '=' + Math.round(r.right));
  }
  document.body.setAttribute('data-right', out.join('|'));
});
</script></body>"""


@pytest.mark.browser
def test_the_node_table_fits_1400_pixels_with_history_and_last_outcome(tmp_path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium not installed (Debian package chromium; scripts/test installs it)")
    run = Run()
    doc = None
    for _, doc in _docs(run, 40):
        pass
    page = render_html(status_document(dataclasses.replace(run.view, core=run.settings.core,
                                                           history=sample_history()),
                                       run.admin, run.time.now))
    sample = render_html(status_document(StatusView(report=sample_report(), last_cycle_at=T0,
                                                    core=CORE, history=sample_history()), None, T0))
    for name, html_text in (("demo", page), ("sample", sample)):
        path = tmp_path / f"{name}.html"
        path.write_text(html_text.replace("</body>", _MEASURE))
        proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,900",
                               "--virtual-time-budget=1000", "--dump-dom", path.as_uri()],
                              capture_output=True, text=True, timeout=60)
        rights = dict(kv.rsplit("=", 1) for kv in
                      re.search(r'data-right="([^"]*)"', proc.stdout).group(1).split("|"))
        assert {"last outcome", "history"} <= set(rights)
        assert max(int(v) for v in rights.values()) <= 1400, (name, rights)
