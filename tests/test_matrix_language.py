"""The matrix language: precedence, wildcards, spacing, errors, limits, vocabulary growth."""

from __future__ import annotations

import hashlib
import re

import pytest

import policy_matrix
from policy_matrix import Action, MatrixError, StateTuple
from policy_matrix.vocabulary import DEFAULT_VOCABULARY, Dimension, Vocabulary

CATCH_ALL = "* | * | * | * -> None\n"


def parse(text: str, **kw) -> policy_matrix.Matrix:
    return policy_matrix.parse(text, "m.matrix", **kw)


def test_first_matching_rule_wins():
    matrix = parse("idle | open | * | idle exceeded -> START_DRAIN\n"
                   "idle | * | * | * -> START_SHUTDOWN\n" + CATCH_ALL)
    assert matrix.lookup(StateTuple("idle", "open", "boot wait", "idle exceeded")).rule.line == 1
    assert matrix.lookup(StateTuple("idle", "closed", "boot wait", "idle exceeded")).action is Action.START_SHUTDOWN
    busy = matrix.lookup(StateTuple("busy", "open", "boot wait", "not idle"))
    assert (busy.action, busy.rule.line) == (Action.NONE, 3)


def test_rule_keeps_its_text_comment_and_location():
    matrix = parse("# why: drain idle nodes\n"
                   "# in the open window\n"
                   "idle | open | * | idle exceeded  ->  START_DRAIN\n"
                   "* | * | * | * -> None   # everything else stays\n")
    drain = matrix.lookup(StateTuple("idle", "open", "boot exceeded", "idle exceeded"))
    assert drain.rule.text == "idle | open | * | idle exceeded  ->  START_DRAIN"
    assert drain.rule.comment == "why: drain idle nodes in the open window"
    assert drain.rule.location == "m.matrix:3"
    rest = matrix.lookup(StateTuple("busy", "open", "boot wait", "not idle")).rule
    assert rest.comment == "everything else stays"


def test_values_with_spaces_tolerate_extra_blanks_and_tabs():
    matrix = parse("idle |open|  boot\t  wait |idle    exceeded->START_DRAIN\n" + CATCH_ALL)
    assert matrix.lookup(StateTuple("idle", "open", "boot wait", "idle exceeded")).action is Action.START_DRAIN


def test_sha256_is_of_the_source_bytes_and_source_is_the_name():
    text = "# x\n" + CATCH_ALL
    matrix = parse(text)
    assert matrix.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert matrix.source == "m.matrix"


def test_entries_are_in_vocabulary_order():
    states = [t for t, _ in parse(CATCH_ALL).entries()]
    assert states == list(DEFAULT_VOCABULARY.all_tuples())
    assert len(states) == DEFAULT_VOCABULARY.size


def test_bytes_with_bom_and_crlf_equal_plain_text():
    plain = parse("idle | open | * | idle exceeded -> START_DRAIN\n" + CATCH_ALL)
    windows = policy_matrix.parse(b"\xef\xbb\xbf" + plain_source().replace(b"\n", b"\r\n"), "w.matrix")
    assert policy_matrix.diff(plain, windows) == []


def plain_source() -> bytes:
    return ("idle | open | * | idle exceeded -> START_DRAIN\n" + CATCH_ALL).encode()


def test_error_str_is_file_line_col_message():
    with pytest.raises(MatrixError) as info:
        parse("# ok\nbusy | * | * | idle exceed -> None\n" + CATCH_ALL)
    e = info.value
    assert (e.file, e.line, e.column) == ("m.matrix", 2, 16)
    assert e.message == "unknown idle_grace 'idle exceed'; did you mean 'idle exceeded'?"
    assert str(e) == "m.matrix:2:16: unknown idle_grace 'idle exceed'; did you mean 'idle exceeded'?"


def test_unknown_word_without_a_near_match_lists_the_choices():
    with pytest.raises(MatrixError, match=r"unknown worker_state 'zzz'; expected one of: " + re.escape(", ".join((*DEFAULT_VOCABULARY.dimensions[0].values, "*")))):
        parse("zzz | * | * | * -> None\n" + CATCH_ALL)


def test_strict_turns_shadowed_rules_into_errors():
    text = CATCH_ALL + "busy | * | * | * -> START_DRAIN\n"
    matrix = parse(text)
    assert [(w.line, w.severity) for w in matrix.warnings] == [(2, "warning")]
    with pytest.raises(MatrixError, match="rule never applies"):
        parse(text, strict=True)


def test_partially_overridden_rule_is_not_a_warning():
    matrix = parse("busy | open | * | * -> START_DRAIN\nbusy | * | * | * -> None\n" + CATCH_ALL)
    assert matrix.warnings == ()
    assert matrix.lookup(StateTuple("busy", "closed", "boot wait", "not idle")).rule.line == 2


def test_file_over_one_mib_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.matrix"
    line = b"# " + b"x" * 1000 + b"\n"
    path.write_bytes(CATCH_ALL.encode() + line * 1100)
    with pytest.raises(MatrixError) as info:
        policy_matrix.load(path)
    assert (info.value.line, info.value.column) == (1, 1)
    assert "at most 1048576 bytes" in info.value.message
    with pytest.raises(MatrixError, match="at most 1048576 bytes"):
        policy_matrix.parse(path.read_bytes(), "huge.matrix")


def test_unreadable_file_is_a_matrix_error(tmp_path):
    with pytest.raises(MatrixError) as info:
        policy_matrix.load(tmp_path / "nope.matrix")
    assert str(info.value).startswith(f"{tmp_path / 'nope.matrix'}: cannot read")
    with pytest.raises(MatrixError, match="is a directory"):
        policy_matrix.load(tmp_path)


def test_lookup_of_a_foreign_tuple_names_it():
    with pytest.raises(KeyError, match="fail"):
        parse(CATCH_ALL).lookup(StateTuple("fail", "open", "boot wait", "not idle"))


def test_a_new_worker_state_needs_only_a_vocabulary_change():
    dims = DEFAULT_VOCABULARY.dimensions
    grown = Vocabulary(dimensions=(Dimension("worker_state", (*dims[0].values, "fail")), *dims[1:]))
    text = "fail | * | * | * -> START_SHUTDOWN\n" + CATCH_ALL
    matrix = policy_matrix.parse(text, "v2.matrix", vocabulary=grown)
    assert len(matrix) == grown.size
    assert matrix.lookup(StateTuple("fail", "closed", "boot wait", "not idle")).action is Action.START_SHUTDOWN
    with pytest.raises(MatrixError, match="unknown worker_state 'fail'"):
        parse(text)
    table = policy_matrix.render_table(matrix)
    assert "fail" in table


def test_many_errors_stop_at_a_limit():
    text = "nope | * | * | * -> None\n" * 500
    with pytest.raises(MatrixError) as info:
        parse(text)
    assert 50 <= len(info.value.errors) <= 52
    assert "too many errors" in info.value.errors[-1].message


def test_render_table_shows_every_action_cell():
    matrix = policy_matrix.load_default()
    grid = policy_matrix.render_table(matrix)
    rows = [line for line in grid.splitlines() if line.startswith(("unpaired", "busy", "idle ", "down"))]
    assert len(rows) == 8
    idle_open = next(r for r in rows if r.split()[:2] == ["idle", "open"])
    assert idle_open.split()[2:] == ["-", "-", "START_DRAIN", "-", "-", "START_DRAIN"]


def test_compact_output_reparses_to_the_same_table():
    matrix = parse("idle | open | boot wait | idle wait -> START_DRAIN\n"
                   "down | * | * | * -> START_SHUTDOWN\n" + CATCH_ALL)
    again = policy_matrix.parse(policy_matrix.compact(matrix), "c.matrix", strict=True)
    assert policy_matrix.diff(matrix, again) == []


def test_diff_lists_only_changed_tuples_old_to_new():
    old = policy_matrix.load_default()
    new = parse("busy | * | * | * -> None\n"
                "idle | * | * | idle exceeded -> START_DRAIN\n"
                "idle | * | * | * -> None\n"
                "down | * | * | * -> START_SHUTDOWN\n"
                "unpaired | * | boot exceeded | * -> START_SHUTDOWN\n"
                "unpaired | * | * | * -> None\n")
    changes = policy_matrix.diff(old, new)
    assert [(c.state.as_tuple(), c.old, c.new) for c in changes] == [
        (("idle", "closed", "boot wait", "idle exceeded"), Action.NONE, Action.START_DRAIN),
        (("idle", "closed", "boot exceeded", "idle exceeded"), Action.NONE, Action.START_DRAIN),
    ]
    assert policy_matrix.diff(new, new) == []
