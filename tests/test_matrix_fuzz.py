"""Property tests: nothing but MatrixError escapes; valid matrices mean what they say."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policy_matrix
from policy_matrix import Action, MatrixError
from policy_matrix.render import explicit
from policy_matrix.vocabulary import DEFAULT_VOCABULARY

VOCAB = DEFAULT_VOCABULARY
WORDS = [v for d in VOCAB.dimensions for v in d.values] + [a.value for a in Action]
TOKENS = WORDS + ["*", "|", "->", "-", ">", "#", " ", "  ", "\t", "\n", "\r\n", "\r", "\ufeff",
                  "idle exceed", "boot", "none", "START_", "\x00", "\x0b", "é", "\u2028", "{", "'", ":"]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TABLES = settings(FUZZ, max_examples=80)

soup = st.lists(st.sampled_from(TOKENS) | st.text(max_size=3), max_size=80).map("".join)


def rule_line() -> st.SearchStrategy[str]:
    cells = [st.sampled_from(("*", *d.values)) for d in VOCAB.dimensions]
    return st.tuples(*cells, st.sampled_from([a.value for a in Action])).map(
        lambda t: " | ".join(t[:4]) + " -> " + t[4])


rule_files = st.lists(rule_line() | st.sampled_from(["", "# note", "* | * | * | * -> None"]),
                      min_size=1, max_size=30).map(lambda lines: "\n".join(lines) + "\n")


def outcome(data: str | bytes) -> policy_matrix.Matrix | None:
    try:
        return policy_matrix.parse(data, "fuzz.matrix")
    except MatrixError as e:
        assert e.line >= 0 and e.column >= 0 and e.message
        assert str(e).startswith("fuzz.matrix")
        return None


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_give_a_matrix_or_a_matrix_error(data):
    outcome(data)


@FUZZ
@given(soup)
def test_token_soup_gives_a_matrix_or_a_matrix_error(text):
    outcome(text)
    outcome(text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(rule_files)
def test_valid_files_decide_every_tuple_by_the_first_matching_rule(text):
    matrix = outcome(text)
    if matrix is None:
        return
    lines = text.split("\n")
    for state, match in matrix.entries():
        assert match.rule.matches(state)
        assert lines[match.rule.line - 1].strip() == match.rule.text
        earlier = [r for r in matrix.rules if r.line < match.rule.line]
        assert not any(r.matches(state) for r in earlier)
    assert len(list(matrix.entries())) == VOCAB.size


@TABLES
@given(st.lists(st.sampled_from(list(Action)), min_size=VOCAB.size, max_size=VOCAB.size))
def test_explicit_and_compact_forms_round_trip(actions):
    table = dict(zip(VOCAB.all_tuples(), actions))
    for text in (explicit(table), policy_matrix.compact(table)):
        matrix = policy_matrix.parse(text, "rt.matrix")
        assert not [w for w in matrix.warnings if "never applies" in w.message]  # no shadowed rule
        assert {t: m.action for t, m in matrix.entries()} == table
    assert len(policy_matrix.parse(policy_matrix.compact(table), "c").rules) <= VOCAB.size


@TABLES
@given(st.lists(st.sampled_from(list(Action)), min_size=VOCAB.size, max_size=VOCAB.size),
       st.lists(st.sampled_from(list(Action)), min_size=VOCAB.size, max_size=VOCAB.size))
def test_diff_is_exactly_the_changed_tuples(a, b):
    old = policy_matrix.parse(explicit(dict(zip(VOCAB.all_tuples(), a))), "old")
    new = policy_matrix.parse(policy_matrix.compact(dict(zip(VOCAB.all_tuples(), b))), "new")
    expected = [(t, x, y) for t, x, y in zip(VOCAB.all_tuples(), a, b) if x != y]
    assert [tuple(c) for c in policy_matrix.diff(old, new)] == expected


python_soup = st.lists(st.sampled_from(["{", "}", "(", ")", ",", ":", "'busy'", "'open'", "'boot wait'",
                                        "'idle exceeded'", "None", '"START_DRAIN"', "x", "=", "**",
                                        "\n", " ", "[", "]", "lambda", "1", "\x00", "'\\x00'", "#"])
                       | st.text(max_size=2), max_size=60).map("".join)


@FUZZ
@given(python_soup)
def test_import_dict_gives_text_or_a_matrix_error(text):
    try:
        out = policy_matrix.import_dict(text, "fuzz.py")
    except MatrixError:
        return
    policy_matrix.parse(out, "imported.matrix")


def test_every_single_character_edit_of_the_default_is_handled():
    source = open(policy_matrix.default_path(), encoding="utf-8").read()
    rules = [i for i, line in enumerate(source.splitlines()) if line and not line.startswith("#")]
    lines = source.splitlines()
    for i, pos in itertools.product(rules, range(0, 80, 7)):
        for ch in "|#*-> x":
            edited = lines.copy()
            edited[i] = lines[i][:pos] + ch + lines[i][pos + 1:]
            outcome("\n".join(edited))
