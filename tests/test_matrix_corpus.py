"""Each broken file in tests/matrix_corpus/ gives its intended messages at the intended places.

``NAME.expect`` lists the diagnostics in order, one per line: ``SEVERITY LINE:COL MESSAGE``
(indented lines continue the previous message), or ``ok`` for a file that must load.
The message must start the diagnostic's message.
"""

from __future__ import annotations

import pathlib

import pytest

import policy_matrix
from nodemanager.cli import main
from policy_matrix.vocabulary import DEFAULT_VOCABULARY

CORPUS = pathlib.Path(__file__).parent / "matrix_corpus"
CASES = sorted(p.stem for p in CORPUS.glob("*.matrix"))


def expected(name: str) -> list[tuple[str, int, int, str]]:
    items: list[list[str]] = []
    # {tuples}: the vocabulary's tuple count, which grows with each added worker state
    text = (CORPUS / f"{name}.expect").read_text().replace("{tuples}", str(DEFAULT_VOCABULARY.size))
    for raw in text.splitlines():
        if raw.startswith(" ") and items:
            items[-1][-1] += "\n" + raw
        elif raw.strip():
            items.append(raw.split(" ", 2))
    if items == [["ok"]]:
        return []
    out = []
    for severity, where, message in items:
        line, column = where.split(":")
        out.append((severity, int(line), int(column), message))
    return out


def diagnostics(path: pathlib.Path) -> list[tuple[str, int, int, str]]:
    try:
        matrix = policy_matrix.load(path)
    except policy_matrix.MatrixError as e:
        found = e.errors
    else:
        found = matrix.warnings
    return [(d.severity, d.line, d.column, d.message) for d in found]


def test_corpus_is_not_empty():
    assert len(CASES) >= 25
    assert all((CORPUS / f"{name}.expect").exists() for name in CASES)


@pytest.mark.parametrize("name", CASES)
def test_corpus_file_gives_intended_messages(name):
    want = expected(name)
    got = diagnostics(CORPUS / f"{name}.matrix")
    assert [(s, l, c) for s, l, c, _ in got] == [(s, l, c) for s, l, c, _ in want]
    for (_, _, _, message), (_, _, _, prefix) in zip(got, want):
        assert message.startswith(prefix)


@pytest.mark.parametrize("name", CASES)
def test_check_command_prints_them_as_file_line_col(name, capsys):
    path = CORPUS / f"{name}.matrix"
    want = expected(name)
    code = main(["matrix", "check", str(path)])
    err = capsys.readouterr().err
    has_error = any(s == "error" for s, *_ in want)
    assert code == (1 if has_error else 0)
    for severity, line, column, message in want:
        assert f"{path}:{line}:{column}: {severity}: {message.splitlines()[0]}" in err


@pytest.mark.parametrize("name", [n for n in CASES if all(s == "warning" for s, *_ in expected(n))
                                  and expected(n)])
def test_warnings_fail_check_only_with_strict(name, capsys):
    path = str(CORPUS / f"{name}.matrix")
    assert main(["matrix", "check", path]) == 0
    assert main(["matrix", "check", "--strict", path]) == 1
    assert "warning" in capsys.readouterr().err
