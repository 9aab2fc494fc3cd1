"""The console in a real browser (Debian chromium, headless): the node table renders, sorts and
filters, the summary shows what /status.json says, times are in the browser's zone, node
histories open, and a refresh keeps the reader's place."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess

import pytest
import requests

from tests.fixtures.observability import CORE, T0, sample_history, sample_report

pytestmark = pytest.mark.browser


def _dump_dom(url: str, tmp_path, tz: str = "UTC", budget: int = 2000) -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium not installed (Debian package chromium; scripts/test installs it)")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
           f"--virtual-time-budget={budget}", "--dump-dom", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TZ": tz})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _rows(dom: str, shown_only: bool = False) -> list[str]:
    """The node ids of the table rows, in display order (only the rows the filter shows)."""
    rows = re.findall(r'<tr class="node[^"]*" data-node="([^"]+)"( style="display: none;")?', dom)
    return [node for node, hidden in rows if not (shown_only and hidden)]


def _card(dom: str, ident: str) -> dict[str, str]:
    """The rows of one summary card as {first cell: second cell's text}."""
    card = re.search(rf'<div class="card" id="{ident}">(.*?)</table></div>', dom).group(1)
    return {re.sub("<[^>]+>", "", k): re.sub("<[^>]+>", "", v)
            for k, v in re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", card)}


def test_page_renders_the_node_table_in_the_browsers_zone(status_server, tmp_path) -> None:
    dom = _dump_dom(status_server.url + "/", tmp_path, tz="Europe/Berlin")
    assert '<table id="nodes"' in dom
    report = status_server.holder["view"].report
    assert _rows(dom) == [e.node_id for e in report.plan.nodes]
    # 14:16:40 UTC is 16:16:40 in Berlin (summer time), counting down from "in 3m 20s"
    assert re.search(r"idle grace ends 16:16:40 \(in 3m 1[89]s|idle grace ends 16:16:40 \(in 3m 20s", dom)
    assert "UTC" not in re.search(r'<td class="next"[^>]*>([^<]*)</td>', dom).group(1)
    assert "draining it would leave fewer than min_nodes=6 nodes" in dom


def test_the_script_sorts_the_table(status_server, tmp_path) -> None:
    dom = _dump_dom(status_server.url + "/#sort=-name", tmp_path)
    names = {e.node_id: e.name for e in status_server.holder["view"].report.plan.nodes}
    assert [names[n] for n in _rows(dom)] == sorted(names.values(), reverse=True)
    assert 'data-sorted="-name"' in dom
    dom = _dump_dom(status_server.url + "/#sort=next_change_text", tmp_path)
    order = _rows(dom)
    assert order.index("i-grace") < order.index("i-boot")  # in 3m 20s before in 28m


def test_the_summary_shows_the_numbers_of_status_json(status_server, tmp_path) -> None:
    summary = requests.get(status_server.url + "/status.json", timeout=5).json()["summary"]
    dom = _dump_dom(status_server.url + "/", tmp_path)
    assert _card(dom, "by-state") == {k: str(v) for k, v in summary["by_worker_state"].items()}
    assert summary["by_worker_state"] == {"busy": 2, "down": 1, "idle": 4, "unpaired": 1}
    actions = _card(dom, "by-action")
    assert {k: actions[k] for k in summary["by_matrix_action"]} == \
        {k: str(v) for k, v in summary["by_matrix_action"].items()}
    assert {k[len("planned "):]: v for k, v in actions.items() if k.startswith("planned ")} == \
        {k: str(v) for k, v in summary["planned"].items()}
    hour = re.search(r'id="spend-hour">([\d.]+)<', dom).group(1)
    today = re.search(r'id="spend-today">([\d.]+)<', dom).group(1)
    assert (hour, today) == (f"{summary['spend']['per_hour']:.2f}", f"{summary['spend']['today']:.2f}")
    assert summary["spend"]["per_hour"] == pytest.approx(5 * 0.20 + 3 * 0.80)
    queue = _card(dom, "queue")
    assert queue == {f"{q['cpus']} cpus, {q['ram_mb']} MB": f"{q['jobs']} jobs" for q in summary["queue"]}
    caps = _card(dom, "caps")
    for cap in summary["caps"]:
        limit = "no limit" if cap["limit"] is None else f"{cap['limit']:g}"
        assert caps[cap["name"]] == f"{cap['used']:g} / {limit}" + (" binds" if cap["binds"] else "")
    assert caps["max_nodes"] == "8 / 9 binds" and caps["min_nodes"] == "8 / 6 binds"


def test_a_node_history_opens_in_local_time_and_says_why_not(status_server, tmp_path) -> None:
    dom = _dump_dom(status_server.url + "/#open=i-min", tmp_path, tz="Europe/Berlin")
    assert re.search(r'data-node="i-min">3 event\(s\)</a>', dom)
    details = re.search(r'<tr class="hist" data-for="i-min"><td colspan="13">(.*?)</td></tr>', dom).group(1)
    assert "<b>why not:</b> nm-small-5 is kept: min_nodes: draining it would leave fewer than " \
           "min_nodes=6 nodes (rule default.matrix:30 says START_DRAIN)" in details
    # the latest event first, at 14:01:40 UTC shown as Berlin time, "11m 40s ago"
    first = re.search(r"<li><span data-at[^>]*>([^<]*)</span>", details).group(1)
    assert details.index("16:01:40") < details.index("15:40:00") < details.index("15:33:20")
    assert re.fullmatch(r"16:01:40 \(11m 4[0-2]s ago\)", first), first
    assert '<tr class="hist" data-for="i-idle" hidden="">' in dom   # not opened
    whynot = re.search(r'<div id="whynot">(.*?)</div>', dom).group(1)
    assert "max_nodes 9 reached" in whynot and 'data-reason="max_nodes"' in whynot
    assert 'data-reason="held"' in whynot and 'data-reason="min_nodes"' in whynot
    recent = re.search(r'<div id="recent">(.*?)</div>', dom).group(1)
    assert "nm-small-0" in recent and "destroy ok: destroyed" in recent


def test_a_refresh_updates_in_place_and_keeps_the_readers_place(tmp_path) -> None:
    from nodemanager.console.admin import AdminState
    from nodemanager.configuration.settings import ManageSettings
    from nodemanager.console.status import StatusServer
    from nodemanager.console.status_document import StatusView

    history = sample_history()
    first = StatusView(report=sample_report(), last_cycle_at=T0, core=CORE, history=history)
    later = sample_report(T0 + 30)
    later = dataclasses.replace(later, plan=dataclasses.replace(
        later.plan, nodes=later.plan.nodes + (later.plan.nodes[6]._replace(
            node_id="i-new", name="nm-small-9"),)))
    served: list[int] = []

    def source() -> StatusView:
        served.append(1)
        if len(served) == 1:
            return first
        history.add("i-min", T0 + 30, "decision", "a new decision after the refresh")
        return StatusView(report=later, last_cycle_at=T0 + 30, core=CORE, history=history)

    server = StatusServer(ManageSettings(address="127.0.0.1", port=0), source=source,
                          admin=AdminState(clock=lambda: T0), clock=lambda: T0 + 30,
                          stale_after=90.0).start()
    try:
        dom = _dump_dom(server.url + "/#sort=-name&filter=small&open=i-min&refresh=1", tmp_path,
                        budget=3500)
    finally:
        server.stop()
    assert int(re.search(r'data-refreshed="(\d+)"', dom).group(1)) >= 1
    assert len(served) >= 2
    shown = _rows(dom, shown_only=True)
    assert "i-new" in shown                                  # the new row came in...
    names = dict(re.findall(r'data-node="([^"]+)"><td class="name">([^<(]+)', dom))
    assert [names[n].strip() for n in shown] == sorted((names[n].strip() for n in shown), reverse=True)
    assert all("small" in names[n] for n in shown) and "i-grace" not in shown   # ...filtered, sorted
    assert '<tr class="hist" data-for="i-min">' in dom    # still open, with the new event
    assert "a new decision after the refresh" in dom
