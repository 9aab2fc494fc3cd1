"""The status page's charts of the last hours (nodes by state, queued cores, spend per hour): drawn
server-side as inline SVG from the trend the daemon keeps each cycle, bounded, and readable in a
real browser (Debian chromium, headless) at 1,400 and 900 px."""

from __future__ import annotations

import importlib.machinery
import logging
import pathlib
import re
import shutil
import subprocess
import types

import pytest
import requests

from nodemanager.console import render_html
from nodemanager.console.status_document import status_document
from nodemanager.console.trend import PoolTrend
from tests.test_daemon import daemons, write_config  # noqa: F401 (daemons: a fixture)
from tests.test_status_world import Run

REPO = pathlib.Path(__file__).resolve().parent.parent
BUSY = {"burst_size": "40", "burst_every": "1h", "job_runtime": "4m"}


def _screenshots() -> types.ModuleType:
    """scripts/screenshots, whose demo makes the README's picture."""
    path = str(REPO / "scripts" / "screenshots")
    loader = importlib.machinery.SourceFileLoader("screenshots", path)
    module = types.ModuleType(loader.name)
    module.__file__ = path
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def demo() -> dict:
    """/status.json of the demo after three hours of hourly bursts and 40 cycles into the next."""
    logger = logging.getLogger("nodemanager")
    level = logger.level
    try:
        view, admin = _screenshots().demo_view(BUSY, 40, hours=3.0)
    finally:
        logger.setLevel(level)      # the script quiets the demo's log for its pictures
    return status_document(view, admin, view.last_cycle_at + 1)


def _svg_numbers(page: str, ident: str) -> tuple[str, list[str]]:
    figure = re.search(rf"<figure class='chart' id='{ident}'>(.*?)</figure>", page).group(1)
    return figure, re.findall(r"<text[^>]*>([^<]*)</text>", figure)


def test_the_page_charts_three_hours_of_the_pool(demo) -> None:
    trend = demo["trend"]
    assert trend[-1]["at"] - trend[0]["at"] >= 3 * 3600 - 60 and len(trend) <= 6 * 60 + 1
    # every burst shows: nodes up and cores queued in each of the last three hours
    for hour in range(3):
        start = trend[0]["at"] + hour * 3600
        inside = [p for p in trend if start <= p["at"] < start + 3600]
        assert max(p["busy"] for p in inside) > 0 and max(p["queued_cores"] for p in inside) > 0
    page = render_html(demo)
    last = trend[-1]
    nodes, labels = _svg_numbers(page, "chart-nodes")
    assert f"nodes by state, now <b>{len(demo['nodes'])}</b>" in nodes
    top = max(p["busy"] + p["idle"] + p["booting"] + p["down"] for p in trend)
    assert float(labels[0]) >= top and labels[-1] == "now" and labels[-2].startswith("3h ")
    assert all(f"{state} {last[state]}" in re.sub("<[^>]+>", "", nodes)
               for state in ("busy", "idle", "booting", "down"))
    spend, labels = _svg_numbers(page, "chart-spend-per-hour")
    assert f"now <b>{demo['summary']['spend']['per_hour']:.2f}/h</b>" in spend
    assert float(labels[0]) >= max(p["spend_per_hour"] for p in trend)
    queued, labels = _svg_numbers(page, "chart-queued-cores")
    assert float(labels[0]) >= max(p["queued_cores"] for p in trend) > 0
    assert "<script" not in page.split("<div id='charts'>")[1].split("</figure></div>")[0]


def test_the_daemon_keeps_the_trend_and_serves_it(tmp_path, daemons) -> None:
    d = daemons(write_config(tmp_path / "nm.ini", port="0")).start()
    for _ in range(5 * 12):                             # five minutes of 5-second cycles
        d.clock.advance(5.0)
        assert d.system.settle(10.0)
    trend = requests.get(d.status_server.url + "/status.json", timeout=5).json()["trend"]
    assert 5 <= len(trend) <= 7 and trend[-1]["at"] == d.last_report.snapshot.now
    assert max(p["busy"] + p["booting"] + p["idle"] for p in trend) > 0
    page = requests.get(d.status_server.url + "/", timeout=5).text
    assert page.count("<figure class='chart'") == 3 and "<svg width=" in page


def test_the_trend_is_bounded_and_starts_afresh_when_the_clock_steps_back() -> None:
    run, trend = Run(), PoolTrend()
    for _ in range(10 * 60 * 2):                        # ten hours of 30-second cycles
        trend.observe(run.cycle(), run.settings.core)
        run.time.advance(30.0)
    points = trend.to_json()
    assert len(points) <= 6 * 60 + 1 and points[-1]["at"] - points[0]["at"] <= 6 * 3600
    assert all(b["at"] - a["at"] >= 30 for a, b in zip(points, points[1:]))
    run.time.now -= 3600.0
    trend.observe(run.cycle(), run.settings.core)
    assert len(trend.to_json()) == 1
    assert "appear after the daemon's first minutes" in render_html(
        {**status_document(run.view, run.admin, run.time.now), "trend": trend.to_json()})


_MEASURE = """<script>
window.addEventListener('load', function(){
  var figs = document.querySelectorAll('#charts figure'), out = [];
  for (var i = 0; i < figs.length; i++) {
    var r = figs[i].getBoundingClientRect();
    out.push(figs[i].id + '=' + Math.round(r.left) + ',' + Math.round(r.top) + ',' + Math.round(r.right));
  }
  document.body.setAttribute('data-figures', out.join('|'));
});
</script></body>"""


@pytest.mark.browser
@pytest.mark.parametrize("width, per_row", [(1400, 3), (900, 2)])
def test_the_charts_fit_the_window_in_a_browser(demo, tmp_path, width, per_row) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium not installed (Debian package chromium; scripts/test installs it)")
    path = tmp_path / "page.html"
    path.write_text(render_html(demo).replace("</body>", _MEASURE))
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},700",
              "--virtual-time-budget=1000"]
    dom = subprocess.run(common + ["--dump-dom", path.as_uri()], capture_output=True, text=True,
                         timeout=60).stdout
    figures = {name: tuple(map(int, box.split(","))) for name, box in
               (kv.split("=") for kv in re.search(r'data-figures="([^"]*)"', dom).group(1).split("|"))}
    assert set(figures) == {"chart-nodes", "chart-queued-cores", "chart-spend-per-hour"}
    assert max(right for _, _, right in figures.values()) <= width
    tops = sorted(top for _, top, _ in figures.values())
    assert tops.count(tops[0]) == per_row               # three in a row at 1,400 px, two at 900
    shot = tmp_path / f"charts-{width}.png"
    subprocess.run(common + [f"--screenshot={shot}", path.as_uri()], check=True,
                   capture_output=True, timeout=60)
    assert shot.stat().st_size > 10_000
