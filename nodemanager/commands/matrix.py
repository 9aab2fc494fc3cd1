"""``nodemanager matrix``: check, show, explain, diff and import policy matrix files.

Exit codes: 0 success; 1 the matrix (or dict) is invalid, ``check --strict`` found warnings, or
``diff --exit-code`` found changes; 2 bad command-line usage (from argparse). Errors go to stderr as ``file:line:col: error: ...``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodemanager.configuration.settings import DisruptionBudget
    from policy_matrix import Action, StateTuple

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "matrix", help="check, show, explain, diff or import a policy matrix",
        description="Work with policy matrix files. With no FILE, the shipped default matrix is used.")
    verbs = parser.add_subparsers(dest="matrix_command", metavar="VERB", required=True)

    check = verbs.add_parser("check", help="validate a matrix file",
                             description="Exit 0 if FILE is a valid matrix, 1 with its errors otherwise. "
                                         "Warnings (rules that never apply) fail only with --strict.")
    check.add_argument("file", nargs="?", metavar="FILE")
    check.add_argument("--strict", action="store_true", help="treat warnings as errors")
    check.set_defaults(func=_check)

    show = verbs.add_parser("show", help="print the action of every state tuple")
    show.add_argument("file", nargs="?", metavar="FILE")
    show.add_argument("--format", choices=("table", "json"), default="table")
    show.set_defaults(func=_show)

    explain = verbs.add_parser(
        "explain", help="the action for one state tuple and the rule that decides it",
        description="The four values in order, e.g. nodemanager matrix explain idle open boot exceeded "
                    "idle exceeded (values of two words may also be quoted or written boot_exceeded), or "
                    "the tuple as the status page, status and the log show it, pasted whole: "
                    "'(idle, open, boot wait, idle wait) joined' (what follows the parentheses is "
                    "detail beside the tuple, not read)")
    explain.add_argument("--matrix", metavar="FILE")
    explain.add_argument("--config", metavar="FILE",
                         help="a site configuration: its matrix (unless --matrix) and the [Budget NAME] "
                              "sections that limit the rule's drains and shutdowns")
    explain.add_argument("--format", choices=("text", "json"), default="text")
    explain.add_argument("words", nargs="+", metavar="VALUE",
                         help="worker_state window boot_grace idle_grace")
    explain.set_defaults(func=_explain)

    diff = verbs.add_parser("diff", help="the state tuples whose action changes from OLD to NEW")
    diff.add_argument("old", metavar="OLD")
    diff.add_argument("new", metavar="NEW")
    diff.add_argument("--format", choices=("text", "json"), default="text")
    diff.add_argument("--exit-code", action="store_true",
                      help="exit 1 when some tuple changes its action, 0 when none does (as git diff)")
    diff.set_defaults(func=_diff)

    imp = verbs.add_parser("import-dict", help="print the matrix file for a seed-style Python dict",
                           description="FILE holds a dict literal {('busy', 'closed', 'boot exceeded', "
                                       "'idle exceeded'): None, ...} (optionally with other assignments, "
                                       "as in the Arvados policy matrix page). It is parsed, never evaluated.")
    imp.add_argument("file", metavar="FILE")
    imp.add_argument("--compact", action="store_true", help="write a few wildcard rules instead of one per tuple")
    imp.set_defaults(func=_import_dict)


def _report(error: Exception) -> int:
    from nodemanager.text import printable
    for diagnostic in error.errors:  # type: ignore[attr-defined]
        # a diagnostic's own line breaks stay line breaks; anything else unprintable is escaped
        print("\n".join(printable(line) for line in diagnostic.format().split("\n")), file=sys.stderr)
    return 1


def _tuple_words(words: list[str], dimensions: list[tuple[str, ...]]) -> list[str]:
    """The tuple's values from the words as typed: a value of several words may be quoted, joined
    by underscores or given unquoted. An unknown word is kept as one value, for the error."""
    if len(words) == len(dimensions):
        return [" ".join(word.replace("_", " ").split()) for word in words]
    flat = [w for word in words for w in word.replace("_", " ").split()]
    values: list[str] = []
    i = 0
    for known in dimensions:
        if i >= len(flat):
            break
        for size in sorted({len(v.split()) for v in known}, reverse=True):
            candidate = " ".join(flat[i:i + size])
            if candidate in known:
                values.append(candidate)
                i += size
                break
        else:
            values.append(flat[i])
            i += 1
    values.extend(flat[i:])
    return values


def _pasted(words: list[str]) -> list[str]:
    """The values of a tuple pasted as shown, ``(idle, open, boot wait, idle wait) joined``: those
    inside the parentheses (the detail beside them is not the matrix's); other words as given."""
    text = " ".join(words).strip()
    if text.startswith("(") and ")" in text:
        return [value.strip() for value in text[1:text.index(")")].split(",")]
    return words


def _load(path: str | None, *, strict: bool = False):
    import policy_matrix

    return policy_matrix.load_default(strict=strict) if path is None else policy_matrix.load(path, strict=strict)


def _check(args: argparse.Namespace) -> int:
    from policy_matrix import MatrixError

    try:
        matrix = _load(args.file, strict=args.strict)
    except MatrixError as e:
        return _report(e)
    from nodemanager.text import printable
    for warning in matrix.warnings:
        print(printable(warning.format()), file=sys.stderr)
    warnings = len(matrix.warnings)
    print(f"{matrix.source}: ok: {len(matrix.rules)} rules decide all {len(matrix)} tuples, "
          f"{warnings} warning{'' if warnings == 1 else 's'}; sha256 {matrix.sha256}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from policy_matrix import MatrixError, render_table, to_json

    try:
        matrix = _load(args.file)
    except MatrixError as e:
        return _report(e)
    if args.format == "json":
        import json

        print(json.dumps(to_json(matrix), indent=1))
    else:
        print(render_table(matrix))
    return 0


def _explain(args: argparse.Namespace) -> int:
    from policy_matrix import MatrixError, StateTuple
    from policy_matrix.suggest import suggest

    from nodemanager.text import printable

    settings = None
    if args.config:
        from nodemanager.configuration.config import ConfigError, load
        try:
            settings = load(args.config)
        except ConfigError as e:
            print("\n".join(f"error: {p}" for p in e.problems), file=sys.stderr)
            return 1
        except OSError as e:
            print(f"error: {args.config}: cannot read: {e.strerror or e}", file=sys.stderr)
            return 1
    try:
        matrix = _load(args.matrix or (settings.matrix_file if settings is not None else None) or None)
    except MatrixError as e:
        return _report(e)
    except OSError as e:
        print(f"error: cannot read the matrix: {e.strerror or e}", file=sys.stderr)
        return 1
    given = _tuple_words(_pasted(args.words), [dim.values for dim in matrix.vocabulary.dimensions])
    if len(given) != len(matrix.vocabulary.dimensions):
        names = " ".join(dim.name for dim in matrix.vocabulary.dimensions)
        print(f"error: expected {names}, got {len(given)} value(s): {printable(' '.join(args.words))}",
              file=sys.stderr)
        return 2
    bad = False
    for value, dim in zip(given, matrix.vocabulary.dimensions):
        if value not in dim.values:
            guess = suggest(value, dim.values)
            hint = f"did you mean '{guess}'?" if guess else f"expected one of: {', '.join(dim.values)}"
            print(f"error: unknown {dim.name} '{printable(value)}'; {hint}", file=sys.stderr)
            bad = True
    if bad:
        return 2
    state = StateTuple(*given)
    match = matrix.lookup(state)
    rule = match.rule
    limits = None
    if settings is not None:
        from nodemanager.core.disruption_budgets import covering, tuple_reasons
        reasons = tuple_reasons(state.worker_state, matrix.vocabulary.core_state(state.worker_state),
                                state.boot_grace, match.action)
        limits = {r: covering(settings.core.disruption_budgets, r) for r in reasons}
    if args.format == "json":
        import json

        doc = {**dict(zip(matrix.vocabulary.names, given)), "action": match.action.to_json(),
               "file": rule.file, "line": rule.line, "rule": rule.text, "comment": rule.comment}
        if limits is not None:
            doc["budgets"] = [{"reason": r, "limited_by": [b.name for b in bs]} for r, bs in limits.items()]
        print(json.dumps(doc))
        return 0
    print(f"{state} -> {match.action}")
    print(f"decided by {rule.location}: {rule.canonical}")
    if rule.comment:
        print(f"  # {printable(rule.comment)}")
    if limits is not None:
        print("\n".join(printable(line) for line in _budget_lines(state, match.action, limits)))
    return 0


def _budget_lines(state: StateTuple, action: Action, limits: dict[str, list[DisruptionBudget]]) -> list[str]:
    """How the ``[Budget NAME]`` sections limit what the rule's action gives back."""
    from nodemanager.core.disruption_budgets import describe
    from policy_matrix import Action
    if not limits:
        why = ("it gives nothing back" if action is Action.NONE else "a VM past its boot grace without a "
               "worker is no capacity" if state.worker_state == "unpaired" else
               f"a {state.worker_state} node is no capacity")
        return [f"budgets: none apply ({why})"]
    out = []
    for reason, budgets in limits.items():
        if budgets:
            out.append(f"{action} gives the node back as {reason}, limited by:")
            out.extend(f"  {describe(b)}" for b in budgets)
        else:
            out.append(f"{action} gives the node back as {reason}: no [Budget NAME] section limits it")
    return out


def _diff(args: argparse.Namespace) -> int:
    from policy_matrix import MatrixError, diff

    try:
        old, new = _load(args.old), _load(args.new)
    except MatrixError as e:
        return _report(e)
    changes = diff(old, new)
    changed = 1 if changes and args.exit_code else 0
    if args.format == "json":
        import json

        names = old.vocabulary.names
        print(json.dumps([{**dict(zip(names, c.state.as_tuple())),
                           "old": c.old.to_json() if c.old else None,
                           "new": c.new.to_json() if c.new else None} for c in changes], indent=1))
        return changed
    if not changes:
        print(f"no tuple changes its action ({old.source} -> {new.source})")
        return 0
    for c in changes:
        before = f"{c.old} ({old.lookup(c.state).rule.location})" if c.old else "(absent)"
        after = f"{c.new} ({new.lookup(c.state).rule.location})" if c.new else "(absent)"
        print(f"{' | '.join(c.state.as_tuple())}: {before} -> {after}")
    print(f"{len(changes)} of {len(new)} tuples change")
    return changed


def _import_dict(args: argparse.Namespace) -> int:
    from policy_matrix import MatrixError, import_dict
    from policy_matrix.parser import read_bytes

    try:
        data = read_bytes(args.file)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise MatrixError(args.file, 1, 1, f"not UTF-8: invalid byte 0x{data[e.start]:02x}") from None
        sys.stdout.write(import_dict(text, args.file, compact=args.compact))
    except MatrixError as e:
        return _report(e)
    return 0
