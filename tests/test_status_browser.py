"""The status page in a real browser (Debian chromium, headless): the node table renders and sorts."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.browser


def _dump_dom(url: str, tmp_path) -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium not installed (Debian package chromium; scripts/test installs it)")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=2000", "--dump-dom", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _rows(dom: str) -> list[str]:
    """The node ids of the table rows, in display order."""
    return re.findall(r'<tr class="node[^"]*" data-node="([^"]+)"', dom)


def test_page_renders_the_node_table(status_server, tmp_path) -> None:
    dom = _dump_dom(status_server.url + "/", tmp_path)
    assert '<table id="nodes"' in dom
    report = status_server.holder["view"].report
    assert _rows(dom) == [e.node_id for e in report.plan.nodes]
    assert "idle grace ends 14:16:40 UTC (in 3m 20s)" in dom
    assert "draining it would leave fewer than min_nodes=6 nodes" in dom


def test_the_script_sorts_the_table(status_server, tmp_path) -> None:
    dom = _dump_dom(status_server.url + "/#sort=-name", tmp_path)
    names = {e.node_id: e.name for e in status_server.holder["view"].report.plan.nodes}
    assert [names[n] for n in _rows(dom)] == sorted(names.values(), reverse=True)
    assert 'data-sorted="-name"' in dom
    dom = _dump_dom(status_server.url + "/#sort=next_change_text", tmp_path)
    order = _rows(dom)
    assert order.index("i-grace") < order.index("i-boot")  # in 3m 20s before in 28m
