"""The shipped default matrix reproduces the Arvados policy matrix's 48-entry table, entry for entry."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

import policy_matrix
from nodemanager.cli import main
from policy_matrix.vocabulary import Action, StateTuple, parse_vocabulary

SEED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "seeds" / "004_d8c31cc4f34303ea.txt"
CORPUS = pathlib.Path(__file__).parent / "matrix_corpus"
# the seed's own words: the 48-line form and the imported dict cover exactly these
SEED_VOCABULARY = parse_vocabulary("worker_state: unpaired, busy, idle, down\nwindow: open, closed\n"
                                   "boot_grace: boot wait, boot exceeded\n"
                                   "idle_grace: not idle, idle wait, idle exceeded\n", "seed004.vocabulary")
ENTRY = re.compile(r"""\('([^']*)', '([^']*)', '([^']*)', '([^']*)'\): (None|"([A-Z_]+)")""")


@pytest.fixture(scope="module")
def seed_text() -> str:
    if not SEED.exists():
        pytest.fail(f"seed not found at {SEED}")
    return SEED.read_text()


@pytest.fixture(scope="module")
def seed_table(seed_text) -> dict[tuple[str, str, str, str], str | None]:
    """The seed's dict, read with a regex (independently of the importer under test)."""
    entries = ENTRY.findall(seed_text)
    table = {e[:4]: (e[5] or None) for e in entries}
    assert len(entries) == len(table) == 48
    return table


@pytest.fixture(scope="module")
def seed_dict_block(seed_text) -> str:
    """The seed's <pre> block, without the wiki's line-number lines."""
    block = seed_text.split("<pre>", 1)[1].split("</pre>", 1)[0]
    return "\n".join(line for line in block.splitlines() if not line.strip().isdigit())


def test_show_json_equals_seed_table(seed_table, capsys):
    assert main(["matrix", "show", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(set(r) == {"worker_state", "window", "boot_grace", "idle_grace", "action", "line"} for r in rows)
    shown = {(r["worker_state"], r["window"], r["boot_grace"], r["idle_grace"]): r["action"] for r in rows}
    # the seed's 48 tuples, entry for entry; states added since (e.g. underused) come on top
    assert {t: a for t, a in shown.items() if t in seed_table} == seed_table
    # states added after the seed (a spot VM with a reclaim notice) are drained
    assert {r["action"] for r in rows if r["worker_state"] == "reclaimed"} == {"START_DRAIN"}


def test_show_json_lines_point_at_the_deciding_rule(capsys):
    main(["matrix", "show", "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    source = pathlib.Path(policy_matrix.default_path()).read_text().splitlines()
    for r in rows:
        rule = source[r["line"] - 1]
        assert rule.split("->")[1].strip() == (r["action"] or "None")
        assert rule.split("|")[0].strip() in (r["worker_state"], "*")


def test_default_is_compact_commented_and_warning_free():
    matrix = policy_matrix.load_default(strict=True)
    assert len(matrix.rules) < 12
    assert any("*" in rule.pattern for rule in matrix.rules)
    assert all(rule.comment for rule in matrix.rules)
    assert matrix.warnings == ()


def test_explicit_48_line_form_gives_the_same_table(seed_table):
    matrix = policy_matrix.load(CORPUS / "ok_explicit_seed.matrix", strict=True, vocabulary=SEED_VOCABULARY)
    assert len(matrix.rules) == 48
    assert all("*" not in rule.pattern for rule in matrix.rules)
    assert {t.as_tuple(): m.action.to_json() for t, m in matrix.entries() if t.worker_state != "reclaimed"} == seed_table


@pytest.mark.parametrize("compact", [False, True])
def test_import_of_the_seed_dict_gives_the_seed_table(seed_dict_block, seed_table, compact):
    text = policy_matrix.import_dict(seed_dict_block, "seed004", compact=compact, vocabulary=SEED_VOCABULARY)
    matrix = policy_matrix.parse(text, "imported.matrix", strict=True, vocabulary=SEED_VOCABULARY)
    assert {t.as_tuple(): m.action.to_json() for t, m in matrix.entries()} == seed_table
    assert len(matrix.rules) == (8 if compact else 48)


def test_default_and_explicit_form_do_not_differ():
    default = policy_matrix.load_default()
    explicit = policy_matrix.load(CORPUS / "ok_explicit_seed.matrix", vocabulary=SEED_VOCABULARY)
    # on the seed's tuples; the states added since are unknown to the explicit form
    assert [c for c in policy_matrix.diff(default, explicit)
            if c.state in set(SEED_VOCABULARY.all_tuples())] == []


def test_lookup_on_vocabulary_constants():
    from policy_matrix.vocabulary import BOOT_EXCEEDED, BOOT_WAIT, CLOSED, DOWN, IDLE, IDLE_EXCEEDED, OPEN, UNPAIRED

    matrix = policy_matrix.load_default()
    drain = matrix.lookup(StateTuple(IDLE, OPEN, BOOT_WAIT, IDLE_EXCEEDED))
    assert drain.action is Action.START_DRAIN
    assert drain.rule.location == f"{policy_matrix.default_path()}:{drain.rule.line}"
    assert "START_DRAIN" in drain.rule.text
    assert matrix.lookup(StateTuple(IDLE, CLOSED, BOOT_WAIT, IDLE_EXCEEDED)).action is Action.NONE
    assert matrix.lookup(StateTuple(DOWN, CLOSED, BOOT_WAIT, IDLE_EXCEEDED)).action is Action.START_SHUTDOWN
    assert matrix.lookup(StateTuple(UNPAIRED, CLOSED, BOOT_EXCEEDED, IDLE_EXCEEDED)).action is Action.START_SHUTDOWN
