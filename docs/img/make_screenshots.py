"""Regenerate the console screenshots of docs/operations.md from the sample pool of the tests:
``python docs/img/make_screenshots.py`` (needs Debian's chromium)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from nodemanager.configuration.settings import ManageSettings  # noqa: E402
from nodemanager.console.status import StatusServer  # noqa: E402
from nodemanager.console.status_document import StatusView  # noqa: E402
from tests.fixtures.observability import CORE, T0, sample_history, sample_report  # noqa: E402

SHOTS = {  # file: (URL fragment, window size, crop box or None)
    "console-summary.png": ("", "1500,760", None),
    "console-node-history.png": ("#filter=nm-small-5&open=i-min", "1500,700", None),
    "console-why-not.png": ("#filter=min_nodes&open=i-min", "1500,760", (0, 280, 1500, 650)),
}


def main() -> None:
    view = StatusView(report=sample_report(), last_cycle_at=T0, started_at=T0 - 3600,
                      counters={"cycles": 360}, version="console demo", core=CORE,
                      history=sample_history())
    server = StatusServer(ManageSettings(address="127.0.0.1", port=0), source=lambda: view,
                          clock=lambda: T0 + 4).start()
    chromium = shutil.which("chromium") or "chromium"
    try:
        with tempfile.TemporaryDirectory() as profile:
            for name, (fragment, size, crop) in SHOTS.items():
                subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                "--hide-scrollbars", f"--user-data-dir={profile}",
                                "--virtual-time-budget=1000", f"--window-size={size}",
                                f"--screenshot={REPO / 'docs' / 'img' / name}",
                                server.url + "/" + fragment], check=True, capture_output=True,
                               env={**os.environ, "TZ": os.environ.get("TZ", "Europe/Berlin")})
                if crop:
                    from PIL import Image
                    path = REPO / "docs" / "img" / name
                    Image.open(path).crop(crop).save(path)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
