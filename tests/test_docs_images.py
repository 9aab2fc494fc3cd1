"""The pictures in the docs: every image a document references exists, and the pictures
``scripts/screenshots`` makes are exactly those the docs reference and ``docs/img`` holds."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
IMG = REPO / "docs" / "img"


def _referenced() -> dict[pathlib.Path, list[str]]:
    """Image path -> the documents that show it."""
    out: dict[pathlib.Path, list[str]] = {}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", doc.read_text()):
            out.setdefault((doc.parent / target).resolve(), []).append(doc.name)
    return out


def test_every_image_the_docs_show_exists() -> None:
    refs = _referenced()
    assert refs, "no images referenced"
    missing = {str(p.relative_to(REPO)): docs for p, docs in refs.items() if not p.is_file()}
    assert not missing


def test_the_screenshot_script_makes_what_the_docs_show() -> None:
    listed = subprocess.run([sys.executable, str(REPO / "scripts" / "screenshots"), "--list"],
                            capture_output=True, text=True, check=True).stdout.split()
    shown = {p.name for p in _referenced() if p.parent == IMG}
    assert len(listed) == len(set(listed))
    assert set(listed) == shown
    # and nothing stale: every picture in docs/img is one the script makes
    assert {p.name for p in IMG.glob("*.png")} == set(listed)


def test_the_pictures_are_kept_small() -> None:
    sizes = {p.name: p.stat().st_size for p in IMG.glob("*.png")}
    assert sizes and all(size < 200_000 for size in sizes.values()), sizes
