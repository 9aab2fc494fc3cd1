"""Reading matrix files: bytes -> checked text -> rules -> compiled ``Matrix``.

The format (see docs/matrix.md)::

    # comment
    worker_state | window | boot_grace    | idle_grace    -> action   # comment
    idle         | open   | *             | idle exceeded -> START_DRAIN

Columns are separated by ``|``, the action follows ``->``, ``*`` matches any value, runs of
blanks inside a value count as one space. The first rule that matches a tuple decides.
Every problem is reported as a ``MatrixError`` naming ``file:line:column``.
"""

from __future__ import annotations

import hashlib
import functools
import os
import re
from dataclasses import replace
from typing import Iterable

from policy_matrix.errors import ERROR, WARNING, Diagnostic, MatrixError
from policy_matrix.files import FileRefused, describe_size, read_capped
from policy_matrix.matrix import WILDCARD, Match, Matrix, Rule
from policy_matrix.suggest import quote, suggest
from policy_matrix.vocabulary import BUSY, DEFAULT_VOCABULARY, Action, StateTuple, Vocabulary

__all__ = [
    "parse", "load", "load_default", "default_path", "read_bytes",
    "MAX_BYTES", "MAX_ERRORS", "DEFAULT_MATRIX",
]

MAX_BYTES = 1024 * 1024
"""Largest matrix file accepted: 1 MiB. Real matrices are a few hundred bytes."""

MAX_ERRORS = 50
"""Errors reported per file before giving up (a wrong file would otherwise print thousands)."""

DEFAULT_MATRIX = "default.matrix"

_BOM = b"\xef\xbb\xbf"
_ARROW = "->"
_SEP = "|"
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff"
# Control characters except tab, and characters that are invisible or break lines in some editors.
_BAD_CHAR = re.compile("[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029" + _INVISIBLE + "]")


def default_path() -> str:
    """File system path of the default matrix shipped in the package."""
    # A plain path next to this module (importlib.resources would add ~8 ms of imports).
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), DEFAULT_MATRIX)


def load_default(*, strict: bool = False) -> Matrix:
    """The shipped default matrix (the Arvados policy matrix's 48 entries)."""
    return load(default_path(), strict=strict)


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes, refusing non-regular files and files over ``MAX_BYTES`` before reading them."""
    name = os.fspath(path)
    try:
        return read_capped(name, MAX_BYTES, what="a matrix file")
    except FileRefused as e:
        at = 1 if e.kind == "too big" else 0
        raise MatrixError(name, at, at, str(e)) from None


def load(path: str | os.PathLike[str], *, strict: bool = False,
         vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> Matrix:
    """Read and compile the matrix file at ``path``."""
    return parse(read_bytes(path), os.fspath(path), strict=strict, vocabulary=vocabulary)


def parse(text: str | bytes, filename: str = "<matrix>", *, strict: bool = False,
          vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> Matrix:
    """Compile matrix source (``str`` or UTF-8 ``bytes``) into a ``Matrix``.

    Raises ``MatrixError`` (and nothing else) for any bad input. Shadowed rules are warnings
    (``Matrix.warnings``); with ``strict=True`` they are errors too.
    """
    if isinstance(text, str):
        data = text.encode("utf-8", "surrogatepass")
    elif isinstance(text, (bytes, bytearray, memoryview)):
        data = bytes(text)
    else:
        raise MatrixError(filename, 0, 0, f"expected text or bytes, got {type(text).__name__}")
    source = _decode(data, filename)
    digest = hashlib.sha256(data).hexdigest()
    rules, errors = _parse_lines(source, filename, vocabulary)
    if errors:
        raise MatrixError.from_diagnostics(errors)
    last_line = max(1, source.count("\n") + (0 if source.endswith("\n") else 1))
    table, diagnostics = _compile(rules, filename, vocabulary, last_line)
    errors = [d for d in diagnostics if d.severity == ERROR or strict]
    if errors:
        raise MatrixError.from_diagnostics(errors)
    return Matrix(source=filename, sha256=digest, rules=tuple(rules), table=table,
                  vocabulary=vocabulary, warnings=tuple(diagnostics))


def _too_big(size: int) -> str:
    return f"file is {size} bytes; a matrix file may be at most {describe_size(MAX_BYTES)}"


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column in characters) of byte ``offset``."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    line = data.count(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", "replace")) + 1
    return line, column


def _decode(data: bytes, filename: str) -> str:
    if len(data) > MAX_BYTES:
        raise MatrixError(filename, 1, 1, _too_big(len(data)))
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise MatrixError(filename, 1, 1,
                          "file is UTF-16 (it starts with a UTF-16 byte-order mark); save it as UTF-8")
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    nul = data.find(b"\0")
    if nul >= 0:
        line, column = _position(data, nul)
        raise MatrixError(filename, line, column,
                          "binary content (NUL byte); a matrix file is UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = _position(data, e.start)
        raise MatrixError(filename, line, column,
                          f"not UTF-8: invalid byte 0x{data[e.start]:02x}; save the file as UTF-8") from None


def _describe(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def _parse_lines(source: str, filename: str,
                 vocabulary: Vocabulary) -> tuple[list[Rule], list[Diagnostic]]:
    rules: list[Rule] = []
    errors: list[Diagnostic] = []
    comment_block: list[str] = []
    for number, raw in enumerate(source.split("\n"), start=1):
        if len(errors) >= MAX_ERRORS:
            errors.append(Diagnostic(filename, number, 1,
                                     f"too many errors ({MAX_ERRORS}); stopped here"))
            break
        line = raw[:-1] if raw.endswith("\r") else raw
        found = _BAD_CHAR.search(line)
        if found is not None:
            bad = found.start()
            what = ("carriage return (old Mac line ending?)" if line[bad] == "\r"
                    else "invisible character" if line[bad] in _INVISIBLE else "control character")
            errors.append(Diagnostic(filename, number, bad + 1, f"{what} {_describe(line[bad])} is not allowed"))
            comment_block = []
            continue
        hash_at = line.find("#")
        code = line if hash_at < 0 else line[:hash_at]
        comment = "" if hash_at < 0 else line[hash_at + 1:].strip()
        if not code.strip():
            if hash_at >= 0:
                comment_block.append(comment)
            else:
                comment_block = []
            continue
        rule, problems = _parse_rule(code, number, filename, vocabulary)
        errors.extend(problems)
        if rule is not None:
            explanation = comment or " ".join(c for c in comment_block if c)
            rules.append(Rule(file=filename, line=number, pattern=rule[0], action=rule[1],
                              text=code.strip(), comment=explanation))
        comment_block = []
    return rules, errors


def _columns(vocabulary: Vocabulary) -> str:
    return " | ".join(vocabulary.names) + " -> action"


def _parse_rule(code: str, number: int, filename: str, vocabulary: Vocabulary
                ) -> tuple[tuple[tuple[str, ...], Action] | None, list[Diagnostic]]:
    def error(column: int, message: str) -> tuple[None, list[Diagnostic]]:
        return None, [Diagnostic(filename, number, column, message)]

    dims = vocabulary.dimensions
    arrow = code.find(_ARROW)
    if arrow < 0:
        parts = code.split(_SEP)
        if len(parts) == len(dims) + 1:
            last_sep = code.rfind(_SEP)
            return error(last_sep + 1, f"missing '->' before the action: write "
                                       f"'... {_ARROW} {parts[-1].strip()[:40]}' (columns: {_columns(vocabulary)})")
        return error(len(code.rstrip()) + 1, f"missing '->' and action (a rule is: {_columns(vocabulary)})")
    second = code.find(_ARROW, arrow + len(_ARROW))
    if second >= 0:
        return error(second + 1, "more than one '->' on the line")
    pattern_text, action_text = code[:arrow], code[arrow + len(_ARROW):]

    problems: list[Diagnostic] = []
    action: Action | None = None
    action_word = " ".join(action_text.split())
    action_col = arrow + len(_ARROW) + 1 + (len(action_text) - len(action_text.lstrip()))
    names = [a.value for a in vocabulary.actions]
    if not action_word:
        problems.append(Diagnostic(filename, number, arrow + len(_ARROW) + 1,
                                   f"missing action after '->' (one of: {', '.join(names)})"))
    elif _SEP in action_word:
        problems.append(Diagnostic(filename, number, action_col + action_text.lstrip().find(_SEP),
                                   "'|' after '->': the action comes last, after the four columns"))
    else:
        for a in vocabulary.actions:
            if a.value == action_word:
                action = a
        if action is None:
            problems.append(Diagnostic(filename, number, action_col,
                                       _unknown("action", action_word, names)))

    fields: list[tuple[int, str]] = []
    start = 0
    for part in pattern_text.split(_SEP):
        lead = len(part) - len(part.lstrip())
        fields.append((start + lead + 1, " ".join(part.split())))
        start += len(part) + 1
    if len(fields) < len(dims):
        joined = _joined_hint(fields, vocabulary)
        problems.insert(0, Diagnostic(
            filename, number, arrow + 1,
            f"missing column: expected {len(dims)} columns ({' | '.join(vocabulary.names)}), "
            f"found {len(fields)}{joined}"))
        return None, problems
    if len(fields) > len(dims):
        extra_col = fields[len(dims)][0] - 1
        problems.insert(0, Diagnostic(
            filename, number, extra_col,
            f"too many columns: expected {len(dims)} ({' | '.join(vocabulary.names)}), found {len(fields)}"))
        return None, problems
    header = [value for _, value in fields] == list(vocabulary.names)
    if header:
        return error(1, "a header line must be a comment: start it with '#'")

    pattern: list[str] = []
    column_problems: list[Diagnostic] = []
    for (column, value), dim in zip(fields, dims):
        if not value:
            column_problems.append(Diagnostic(filename, number, column,
                                              f"empty {dim.name} column; write '*' for any value"))
        elif value == WILDCARD or value in dim.values:
            pattern.append(value)
        else:
            column_problems.append(Diagnostic(filename, number, column,
                                              _unknown_value(value, dim.name, vocabulary)))
    problems[:0] = column_problems
    if problems or action is None:
        return None, problems
    return (tuple(pattern), action), []


def _joined_hint(fields: list[tuple[int, str]], vocabulary: Vocabulary) -> str:
    """Explain a field that holds two adjacent columns' values without a '|' between them."""
    allowed = [set(d.values) | {WILDCARD} for d in vocabulary.dimensions]
    for _, value in fields:
        words = value.split(" ")
        for cut in range(1, len(words)):
            left, right = " ".join(words[:cut]), " ".join(words[cut:])
            for i in range(len(allowed) - 1):
                if left in allowed[i] and right in allowed[i + 1]:
                    return f"; put '|' between '{left}' and '{right}'"
    return ""


def _unknown(what: str, word: str, choices: list[str]) -> str:
    guess = suggest(word, choices)
    if guess is not None:
        return f"unknown {what} {quote(word)}; did you mean '{guess}'?"
    return f"unknown {what} {quote(word)}; expected one of: {', '.join(choices)}"


def _unknown_value(value: str, dimension: str, vocabulary: Vocabulary) -> str:
    dim = next(d for d in vocabulary.dimensions if d.name == dimension)
    for other in vocabulary.dimensions:
        if other.name != dimension and value in other.values:
            return (f"'{value}' is a {other.name} value, not a {dimension} "
                    f"(columns: {' | '.join(vocabulary.names)})")
    if value in [a.value for a in vocabulary.actions]:
        return f"'{value}' is an action; write it after '->' (columns: {_columns(vocabulary)})"
    return _unknown(dimension, value, [*dim.values, WILDCARD])


def _lines_text(lines: Iterable[int]) -> str:
    ordered = sorted(set(lines))
    return ("line " if len(ordered) == 1 else "lines ") + ", ".join(map(str, ordered))


def _busy_index(vocabulary: Vocabulary) -> int | None:
    """The position of the worker_state dimension when it has ``busy`` (workers that run jobs)."""
    for i, dim in enumerate(vocabulary.dimensions):
        if dim.name == "worker_state" and BUSY in dim.values:
            return i
    return None


def _inherit_added_states(table: dict[StateTuple, Match], vocabulary: Vocabulary,
                          filename: str) -> int:
    """Fill in, from the default matrix, the tuples of each worker state the default vocabulary
    added since the Arvados page (``reclaimed``) when no rule of this file matches that state at all: a
    matrix written before the state existed keeps loading and acting as before. How many filled."""
    if os.path.abspath(filename) == default_path():
        return 0
    inherited = added_state_defaults(vocabulary, {t.worker_state for t in table})
    table.update(inherited)
    return len(inherited)


def added_state_defaults(vocabulary: Vocabulary, named: set[str]) -> dict[StateTuple, Match]:
    """The default matrix's entries for the worker states the default vocabulary added after the
    seed and ``named`` lacks (none for another vocabulary: it must say what it wants)."""
    if vocabulary is not DEFAULT_VOCABULARY:
        return {}
    added = {state for state, _like in vocabulary.like if state not in named}
    return {t: m for t, m in _default_table().items() if t.worker_state in added} if added else {}


@functools.lru_cache(maxsize=1)
def _default_table() -> dict[StateTuple, Match]:
    return dict(load_default().table)


def _compile(rules: list[Rule], filename: str, vocabulary: Vocabulary,
             last_line: int) -> tuple[dict[StateTuple, Match], list[Diagnostic]]:
    table: dict[StateTuple, Match] = {}
    diagnostics: list[Diagnostic] = []
    seen: dict[tuple[str, ...], Rule] = {}
    busy_at = _busy_index(vocabulary)
    for rule in rules:
        earlier = seen.get(rule.pattern)
        if earlier is not None:
            if earlier.action == rule.action:
                message = f"duplicate rule: line {earlier.line} has the same pattern and action"
            else:
                message = (f"duplicate rule: line {earlier.line} has the same pattern with action "
                           f"{earlier.action}, and the first rule wins, so this {rule.action} never applies")
            diagnostics.append(Diagnostic(filename, rule.line, 1, message))
            continue
        seen[rule.pattern] = rule
        match = Match(rule.action, rule)
        fresh = 0
        takers: set[int] = set()
        differing = False
        busy_taken = False
        for state in rule.expand(vocabulary):
            taken = table.get(state)
            if taken is None:
                table[state] = match
                fresh += 1
                busy_taken = busy_taken or (busy_at is not None and state.as_tuple()[busy_at] == BUSY)
            else:
                takers.add(taken.rule.line)
                differing = differing or taken.action != rule.action
        if busy_at is not None and rule.action == Action.START_SHUTDOWN and busy_taken:
            diagnostics.append(Diagnostic(
                filename, rule.line, 1,
                "rule shuts down busy nodes: their running jobs are killed (drain them with "
                "START_DRAIN instead, unless killing is what you want)", WARNING))
        if fresh == 0:
            note = (f"; they give other actions than {rule.action}" if differing else "")
            diagnostics.append(Diagnostic(
                filename, rule.line, 1,
                f"rule never applies: every tuple it matches is decided by earlier rules "
                f"({_lines_text(takers)}){note}", WARNING))
    if not rules:
        diagnostics.append(Diagnostic(
            filename, 1, 1,
            f"no rules: the file is empty or only comments; a matrix needs rules for all "
            f"{vocabulary.size} tuples ({_columns(vocabulary)})"))
        return table, diagnostics
    inherited = _inherit_added_states(table, vocabulary, filename)
    missing = [t for t in vocabulary.all_tuples() if t not in table]
    if missing:
        listing = "\n".join("  " + " | ".join(t.as_tuple()) for t in missing)
        catch_all = " | ".join(WILDCARD for _ in vocabulary.dimensions)
        diagnostics.append(Diagnostic(
            filename, last_line, 1,
            f"{len(missing)} of {vocabulary.size - inherited} tuples have no rule (add rules for them, or a "
            f"catch-all '{catch_all} -> None' at the end):\n{listing}"))
    diagnostics.sort(key=lambda d: (d.line, d.column))
    if len(diagnostics) > MAX_ERRORS:
        cut = diagnostics[MAX_ERRORS]
        diagnostics = diagnostics[:MAX_ERRORS] + [Diagnostic(
            filename, cut.line, 1, f"too many problems ({len(diagnostics)}); only the first {MAX_ERRORS} are shown",
            cut.severity)]
    return table, diagnostics
