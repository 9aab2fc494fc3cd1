"""Presenting a matrix: as a grid, as JSON rows, and back as matrix file text (explicit or compact)."""

from __future__ import annotations

from itertools import product
from typing import Iterable, Mapping, Sequence

from policy_matrix.matrix import WILDCARD, Matrix
from policy_matrix.vocabulary import DEFAULT_VOCABULARY, Action, StateTuple, Vocabulary

__all__ = ["render_table", "to_json", "format_rules", "explicit", "compact"]

Table = Matrix | Mapping[StateTuple, Action]


def _actions(table: Table) -> dict[StateTuple, Action]:
    if isinstance(table, Matrix):
        return {t: m.action for t, m in table.entries()}
    return dict(table)


def to_json(matrix: Matrix) -> list[dict[str, object]]:
    """One object per tuple, in vocabulary order: the dimension values, ``action`` (None for
    ``None``) and ``line`` (the rule that decided it)."""
    names = matrix.vocabulary.names
    rows = []
    for state, match in matrix.entries():
        row: dict[str, object] = dict(zip(names, state.as_tuple()))
        row["action"] = match.action.to_json()
        row["line"] = match.rule.line
        rows.append(row)
    return rows


def _grid(rows: Sequence[Sequence[str]], header_rows: int) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if n == header_rows - 1:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def render_table(matrix: Matrix) -> str:
    """A grid: one row per value pair of the first half of the dimensions, one column per value
    pair of the rest. ``-`` stands for ``None``."""
    vocab = matrix.vocabulary
    dims = vocab.dimensions
    split = (len(dims) + 1) // 2
    row_dims, col_dims = dims[:split], dims[split:]
    col_keys = list(product(*(d.values for d in col_dims)))
    header: list[list[str]] = []
    for level, dim in enumerate(col_dims):
        cells = [d.name for d in row_dims] if level == len(col_dims) - 1 else [""] * len(row_dims)
        prev = None
        for key in col_keys:
            label = key[level]
            # Print an upper-level label once, over the first column it spans.
            shown = label if level == len(col_dims) - 1 or key[:level + 1] != prev else ""
            prev = key[:level + 1]
            cells.append(shown)
        header.append(cells)
    body = []
    for row_key in product(*(d.values for d in row_dims)):
        cells = list(row_key)
        for key in col_keys:
            action = matrix.lookup(StateTuple(*row_key, *key)).action
            cells.append("-" if action is Action.NONE else str(action))
        body.append(cells)
    legend = (f"{matrix.source}  (sha256 {matrix.sha256[:12]})\n"
              f"columns: {' / '.join(d.name for d in col_dims)}; '-' = None\n\n")
    return legend + _grid(header + body, len(header))


def format_rules(rules: Iterable[tuple[Sequence[str], Action, str]],
                 vocabulary: Vocabulary = DEFAULT_VOCABULARY, title: str = "") -> str:
    """Matrix file text for ``(pattern, action, comment)`` rows, columns aligned."""
    rows = [(list(p), a, c) for p, a, c in rules]
    heads = ["# " + vocabulary.names[0], *vocabulary.names[1:]]
    widths = [max([len(heads[i])] + [len(r[0][i]) for r in rows]) for i in range(len(heads))]
    lines = [f"# {t}".rstrip() for t in title.split("\n")] if title else []
    lines.append(" | ".join(h.ljust(w) for h, w in zip(heads, widths)) + " -> action")
    for pattern, action, comment in rows:
        text = " | ".join(v.ljust(w) for v, w in zip(pattern, widths)) + f" -> {action}"
        lines.append(f"{text}  # {comment}" if comment else text)
    return "\n".join(lines) + "\n"


def explicit(table: Table, vocabulary: Vocabulary = DEFAULT_VOCABULARY, title: str = "") -> str:
    """One rule per tuple, in vocabulary order: no wildcards, nothing to get wrong."""
    actions = _actions(table)
    if isinstance(table, Matrix):
        vocabulary = table.vocabulary
    return format_rules(((t.as_tuple(), actions[t], "") for t in vocabulary.all_tuples()
                         if t in actions), vocabulary, title)


def compact(table: Table, vocabulary: Vocabulary = DEFAULT_VOCABULARY, title: str = "") -> str:
    """Few rules with wildcards and no overlap (so their order does not matter), same table.

    Greedy: take patterns from the largest down whenever all their tuples are still undecided
    and share one action.
    """
    actions = _actions(table)
    if isinstance(table, Matrix):
        vocabulary = table.vocabulary
    dims = vocabulary.dimensions
    patterns = list(product(*((WILDCARD, *d.values) for d in dims)))

    def expand(pattern: tuple[str, ...]) -> list[StateTuple]:
        return [StateTuple(*v) for v in product(*(d.values if p == WILDCARD else (p,)
                                                  for p, d in zip(pattern, dims)))]

    expanded = {p: expand(p) for p in patterns}
    patterns.sort(key=lambda p: -len(expanded[p]))
    left = {t for t in vocabulary.all_tuples() if t in actions}
    chosen: list[tuple[tuple[str, ...], Action]] = []
    # One pass suffices: a pattern that cannot be taken now never can later (tuples only get used).
    for p in patterns:
        states = expanded[p]
        if all(s in left for s in states) and len({actions[s] for s in states}) == 1:
            chosen.append((p, actions[states[0]]))
            left.difference_update(states)
    order = {v: i for d in dims for i, v in enumerate((*d.values, WILDCARD))}
    chosen.sort(key=lambda r: [order[v] for v in r[0]])
    return format_rules(((p, a, "") for p, a in chosen), vocabulary, title)
