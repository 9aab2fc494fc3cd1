"""import_dict: the seed's Python-dict form, read as data (never evaluated)."""

from __future__ import annotations

import re

import pytest

import policy_matrix
from policy_matrix import Action, MatrixError, StateTuple
from policy_matrix.vocabulary import DEFAULT_VOCABULARY


def full_dict(**overrides: str) -> str:
    """A seed-style literal for the default table, with some entries' source text replaced."""
    matrix = policy_matrix.load_default()
    lines = []
    for state, match in matrix.entries():
        key = repr(state.as_tuple())
        value = "None" if match.action is Action.NONE else f'"{match.action}"'
        lines.append(overrides.get(str(state), f" {key}: {value},"))
    return "{\n" + "\n".join(lines) + "\n}\n"


def test_round_trip_of_the_default_table():
    text = policy_matrix.import_dict(full_dict(), "d.py")
    assert policy_matrix.diff(policy_matrix.load_default(), policy_matrix.parse(text, "i.matrix")) == []
    assert text.startswith("# Imported from d.py.")


def test_assignment_form_as_in_arvados_transitions_py():
    text = "transitions = " + full_dict()
    assert policy_matrix.parse(policy_matrix.import_dict(text), "i.matrix").lookup(
        StateTuple("idle", "open", "boot wait", "idle exceeded")).action is Action.START_DRAIN


def test_code_is_never_run(tmp_path):
    marker = tmp_path / "pwned"
    evil = full_dict(**{"(busy, open, boot wait, not idle)":
                        f" ('busy', 'open', 'boot wait', 'not idle'): open({str(marker)!r}, 'w'),"})
    with pytest.raises(MatrixError) as info:
        policy_matrix.import_dict(evil, "evil.py")
    assert "action must be None or a quoted action name" in info.value.message
    assert info.value.line == 14
    assert not marker.exists()


def test_unknown_value_suggests_the_nearest_word():
    text = full_dict(**{"(idle, open, boot wait, idle exceeded)":
                        " ('idle', 'open', 'boot wait', 'idle exceed'): \"START_DRAIN\","})
    with pytest.raises(MatrixError) as info:
        policy_matrix.import_dict(text, "d.py")
    assert info.value.message == "unknown idle_grace 'idle exceed'; did you mean 'idle exceeded'?"
    assert (info.value.line, info.value.column) == (28, 32)


def test_unknown_action_and_duplicate_and_missing_keys():
    with pytest.raises(MatrixError, match="unknown action 'START_DRIAN'; did you mean 'START_DRAIN'"):
        policy_matrix.import_dict("{('idle', 'open', 'boot wait', 'idle exceeded'): 'START_DRIAN'}")
    dup = full_dict().replace("}\n", " ('busy', 'open', 'boot wait', 'not idle'): None,\n}\n")
    with pytest.raises(MatrixError, match=r"duplicate key \(busy, open, boot wait, not idle\) \(first at line 14\)"):
        policy_matrix.import_dict(dup)
    with pytest.raises(MatrixError) as info:
        policy_matrix.import_dict("{('busy', 'open', 'boot wait', 'not idle'): None}")
    assert re.match(rf"\d+ of 48 tuples are missing from the dict:\n  unpaired \| open",
                    info.value.message)


@pytest.mark.parametrize("text, message", [
    ("{", "not a Python literal"),
    ("x = 1", "expected one dict literal mapping 4-tuples to actions, found no"),
    ("{('busy', 'open'): None}", "key must be a tuple of 4 strings"),
    ("{('busy', 'open', 'boot wait', 3): None}", "idle_grace must be a quoted string"),
    ("{**x}", "'**' unpacking is not allowed"),
])
def test_malformed_input_is_a_matrix_error(text, message):
    with pytest.raises(MatrixError, match=re.escape(message)):
        policy_matrix.import_dict(text)


def test_compact_import_uses_wildcards_for_the_same_table():
    text = policy_matrix.import_dict(full_dict(), compact=True)
    matrix = policy_matrix.parse(text, "c.matrix", strict=True)
    assert len(matrix.rules) == 11  # 8 and one per state added since the seed
    assert len(matrix) == DEFAULT_VOCABULARY.size
    assert policy_matrix.diff(policy_matrix.load_default(), matrix) == []
