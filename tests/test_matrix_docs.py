"""The matrices shown in docs/matrix.md are valid and mean what the text says."""

from __future__ import annotations

import pathlib
import re

import policy_matrix
from policy_matrix import Action, StateTuple

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "matrix.md"


def rule_blocks() -> list[str]:
    blocks = re.findall(r"^```\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    return [b for b in blocks
            if "..." not in b and all(line.startswith("#") or "->" in line for line in b.splitlines() if line)]


def test_doc_has_the_examples():
    assert len(rule_blocks()) >= 4


def test_complete_examples_are_valid_and_the_default_one_is_the_default():
    default = policy_matrix.load_default()
    complete = []
    for block in rule_blocks():
        try:
            complete.append(policy_matrix.parse(block, "docs/matrix.md", strict=True))
        except policy_matrix.MatrixError as e:
            assert "tuples have no rule" in e.message, e
    assert len(complete) >= 3
    assert any(policy_matrix.diff(default, m) == [] and len(m.rules) == 6 for m in complete)
    observe = next(m for m in complete if len(m.rules) == 1)
    assert {m.action for _, m in observe.entries()} == {Action.NONE}


def test_arvados_variant_snippet_changes_only_down_closed_boot_wait():
    snippet = next(b for b in rule_blocks() if b.strip().startswith("down | closed | boot wait"))
    source = open(policy_matrix.default_path()).read()
    edited = source.replace("\ndown ", "\n" + snippet.strip() + "\ndown ", 1)
    changes = policy_matrix.diff(policy_matrix.load_default(), policy_matrix.parse(edited, "edited"))
    assert [c.state for c in changes] == [StateTuple("down", "closed", "boot wait", g)
                                          for g in ("not idle", "idle wait", "idle exceeded")]
    assert {(c.old, c.new) for c in changes} == {(Action.START_SHUTDOWN, Action.NONE)}
