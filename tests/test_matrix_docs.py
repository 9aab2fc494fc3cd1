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


def test_every_default_matrix_rule_the_docs_cite_is_the_one_that_decides_there():
    """A sample that cites ``default.matrix:N`` (a log line, an explanation, a table row, a JSON
    node) cites a rule line, and the rule that decides the state tuple or rule text shown with it."""
    import json

    matrix = policy_matrix.load_default()
    rules = {r.line: r for r in matrix.rules}
    repo = DOC.parent.parent
    cited = 0
    for doc in [repo / "README.md", *sorted(DOC.parent.glob("*.md"))]:
        text = doc.read_text()
        for number, line in enumerate(text.splitlines(), 1):
            for m in re.finditer(r"default\.matrix:(\d+)", line):
                cited += 1
                where = f"{doc.name}:{number}"
                rule = rules.get(int(m.group(1)))
                assert rule is not None, f"{where}: default.matrix:{m.group(1)} is no rule line"
                shown = re.search(r"\((\w+), (\w+), ([\w ]+), ([\w ]+)\)", line[:m.start()])
                if shown:
                    decided = matrix.lookup(StateTuple(*shown.groups())).rule
                    assert decided.line == rule.line, f"{where}: {shown.group(0)} is decided by line {decided.line}"
                written = re.search(r"default\.matrix:\d+: (.+? -> \w+)", line[m.start():])
                if written:
                    assert rule.canonical == " ".join(written.group(1).split()), where
        for block in re.findall(r"^```json\n(.*?)^```", text, flags=re.S | re.M):
            for node in json.loads(block).get("nodes", []):
                if "default.matrix:" in str(node.get("rule")):
                    decided = matrix.lookup(StateTuple(**node["tuple"])).rule
                    assert str(node["rule"]).endswith(f"default.matrix:{decided.line}"), (doc.name, node)
                    assert str(decided.action) == node["matrix_action"], (doc.name, node)
    assert cited >= 10
