"""``nodemanager matrix``: check, show, explain, diff and import policy matrix files.

Exit codes: 0 success; 1 the matrix (or dict) is invalid, ``check --strict`` found warnings, or
``diff --exit-code`` found changes; 2 bad command-line usage (from argparse). Errors go to stderr as ``file:line:col: error: ...``.
"""

from __future__ import annotations

import argparse
import sys

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
        description="Quote values with spaces: nodemanager matrix explain idle open \"boot wait\" \"idle exceeded\"")
    explain.add_argument("--matrix", metavar="FILE")
    explain.add_argument("--format", choices=("text", "json"), default="text")
    explain.add_argument("worker_state", metavar="WORKER_STATE")
    explain.add_argument("window", metavar="WINDOW")
    explain.add_argument("boot_grace", metavar="BOOT_GRACE")
    explain.add_argument("idle_grace", metavar="IDLE_GRACE")
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
        print(printable(diagnostic.format()), file=sys.stderr)
    return 1


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

    try:
        matrix = _load(args.matrix)
    except MatrixError as e:
        return _report(e)
    given = (args.worker_state, args.window, args.boot_grace, args.idle_grace)
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
    if args.format == "json":
        import json

        print(json.dumps({**dict(zip(matrix.vocabulary.names, given)), "action": match.action.to_json(),
                          "file": rule.file, "line": rule.line, "rule": rule.text, "comment": rule.comment}))
        return 0
    print(f"{state} -> {match.action}")
    print(f"decided by {rule.location}: {rule.canonical}")
    if rule.comment:
        print(f"  # {printable(rule.comment)}")
    return 0


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
