"""Words for readers: what users and contributors read (README, the example config, docs, help
texts and docstrings, matrix and vocabulary comments, deploy files) names no issue number, no
work session and no source document by its file number; sources are cited by name."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# history belongs in BENCHMARKS.md and the git log
HISTORY = {"BENCHMARKS.md"}
JARGON = re.compile(
    r"\bissues? #?\d+|\(#\d+\)|\bseed[ -]00\d"                     # issue 12, issues #3, (#12), seed 004
    r"|\bsession \d+|\b(this|last|previous|earlier|next|work) sessions?\b"  # how the work was organised
    r"|\bwave \d+|\b(this|last|previous|earlier|next) wave\b"
    r"|\b(branch|merge)\w* '?s\d+-[a-z]+",                              # work branches (branch s8-budgets)
    re.IGNORECASE)


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


@pytest.mark.parametrize("line", ["see issue 25", "fixed in #12 (#12)", "issues #3 and 4", "seed 004",
                                  "added last session", "this wave", "wave 3", "from branch s8-budgets"])
def test_the_words_test_catches(line: str) -> None:
    assert JARGON.search(line)


@pytest.mark.parametrize("line", ["color:#222", "its position in the reply (``#7``)",
                                  "a pytest session starts its own cluster", "an s3-compatible store"])
def test_the_words_test_leaves_alone(line: str) -> None:
    assert not JARGON.search(line)


def test_the_design_sources_are_cited_by_name() -> None:
    matrix = (ROOT / "policy_matrix" / "default.matrix").read_text()
    assert "Arvados" in matrix and "policy matrix" in matrix
    htcondor = (ROOT / "docs" / "htcondor.md").read_text()
    assert "draining design" in htcondor
