"""Words for readers: what users and contributors read (README, the example config, docs, help
texts and docstrings, matrix and vocabulary comments, deploy files) names no issue number, no
work session and no source document by its file number; sources are cited by name."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
# history belongs in BENCHMARKS.md and the git log
HISTORY = {"BENCHMARKS.md"}
JARGON = re.compile(r"\bissue \d+|\bseed[ -]00\d|\bsession \d+", re.IGNORECASE)


def read_by_users() -> list[pathlib.Path]:
    files = [ROOT / "README.md", ROOT / "config.example.ini"]
    files += [p for p in (ROOT / "docs").rglob("*.md") if p.name not in HISTORY]
    for folder in ("nodemanager", "policy_matrix", "deploy"):
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file()
                  and p.suffix not in (".pyc", ".png", ".svg") and "__pycache__" not in p.parts]
    return files


def test_no_issue_numbers_sessions_or_seed_numbers_in_what_users_read() -> None:
    found = []
    for path in read_by_users():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if JARGON.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert found == []


def test_the_design_sources_are_cited_by_name() -> None:
    matrix = (ROOT / "policy_matrix" / "default.matrix").read_text()
    assert "Arvados" in matrix and "policy matrix" in matrix
    htcondor = (ROOT / "docs" / "htcondor.md").read_text()
    assert "draining design" in htcondor
