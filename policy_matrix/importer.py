"""Import of the Arvados policy matrix page's Python-dict form into the matrix file format, without ``eval``.

Accepts the dict literal alone (``{('busy', 'closed', 'boot exceeded', 'idle exceeded'): None,
...}``), or Python source holding one, such as the page's block (list assignments then the dict)
or Arvados' ``transitions = {...}``. The source is parsed with ``ast`` and only string, ``None``
and tuple literals are read; anything else is a ``MatrixError``.
"""

from __future__ import annotations

from dataclasses import replace

from policy_matrix.errors import Diagnostic, MatrixError
from policy_matrix.parser import MAX_BYTES
from policy_matrix.render import compact as render_compact
from policy_matrix.render import explicit
from policy_matrix.suggest import quote, suggest
from policy_matrix.vocabulary import DEFAULT_VOCABULARY, Action, StateTuple, Vocabulary

__all__ = ["import_dict", "read_dict"]


def read_dict(text: str, filename: str = "<dict>", *,
              vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> dict[StateTuple, Action]:
    """The table a seed-style dict literal describes; ``MatrixError`` for anything else."""
    import ast

    if len(text) > MAX_BYTES:
        raise MatrixError(filename, 1, 1, f"input is {len(text)} characters; at most {MAX_BYTES} accepted")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        tree = ast.parse(text, filename, mode="exec")
    except SyntaxError as e:
        raise MatrixError(filename, e.lineno or 1, e.offset or 1, f"not a Python literal: {e.msg} "
                          "(give the dict literal alone, or Python source holding it)") from None
    except (ValueError, MemoryError, RecursionError) as e:
        raise MatrixError(filename, 1, 1, f"not a Python literal: {e}") from None
    dicts = [stmt.value for stmt in tree.body
             if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign))
             and isinstance(stmt.value, ast.Dict)]
    if len(dicts) != 1:
        found = "no" if not dicts else str(len(dicts))
        raise MatrixError(filename, 1, 1, f"expected one dict literal mapping 4-tuples to actions, found {found}")
    node = dicts[0]
    errors: list[Diagnostic] = []
    table: dict[StateTuple, Action] = {}
    where: dict[StateTuple, int] = {}
    dims = vocabulary.dimensions
    names = [a.value for a in vocabulary.actions]

    def fail(n: ast.AST, message: str) -> None:
        errors.append(Diagnostic(filename, getattr(n, "lineno", 1), getattr(n, "col_offset", 0) + 1, message))

    for key, value in zip(node.keys, node.values):
        if key is None:
            fail(value, "'**' unpacking is not allowed in the dict")
            continue
        if not isinstance(key, ast.Tuple) or len(key.elts) != len(dims):
            fail(key, f"key must be a tuple of {len(dims)} strings ({', '.join(vocabulary.names)})")
            continue
        values: list[str] = []
        for elt, dim in zip(key.elts, dims):
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                fail(elt, f"{dim.name} must be a quoted string")
            elif elt.value not in dim.values:
                guess = suggest(elt.value, dim.values)
                hint = f"did you mean '{guess}'?" if guess else f"expected one of: {', '.join(dim.values)}"
                fail(elt, f"unknown {dim.name} {quote(elt.value)}; {hint}")
            else:
                values.append(elt.value)
        action: Action | None = None
        if isinstance(value, ast.Constant) and value.value is None:
            action = Action.NONE
        elif isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value in names:
            action = Action(value.value)
        elif isinstance(value, ast.Constant) and isinstance(value.value, str):
            guess = suggest(value.value, names)
            hint = f"did you mean '{guess}'?" if guess else f"expected one of: {', '.join(names)}"
            fail(value, f"unknown action {quote(value.value)}; {hint}")
        else:
            fail(value, "action must be None or a quoted action name")
        if len(values) != len(dims) or action is None:
            continue
        state = StateTuple(*values)
        if state in table:
            fail(key, f"duplicate key {state} (first at line {where[state]})")
            continue
        table[state] = action
        where[state] = key.lineno
    if not errors:
        from policy_matrix.parser import added_state_defaults
        inherited = added_state_defaults(vocabulary, {t.worker_state for t in table})
        table.update((t, m.action) for t, m in inherited.items())
        missing = [t for t in vocabulary.all_tuples() if t not in table]
        if missing:
            listing = "\n".join("  " + " | ".join(t.as_tuple()) for t in missing)
            fail(node, f"{len(missing)} of {vocabulary.size - len(inherited)} tuples are missing "
                       f"from the dict:\n{listing}")
    if errors:
        raise MatrixError.from_diagnostics(errors)
    return table


def import_dict(text: str, filename: str = "<dict>", *, compact: bool = False,
                vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> str:
    """Matrix file text for a seed-style dict: one rule per tuple, or with ``compact=True`` a
    few wildcard rules that decide the same actions."""
    table = read_dict(text, filename, vocabulary=vocabulary)
    title = f"Imported from {filename}."
    if compact:
        return render_compact(table, vocabulary, title)
    return explicit(table, vocabulary, title)
