"""The policy matrix language: parse, validate, compile, look up, explain, diff, render.

Usable without the daemon::

    import policy_matrix
    from policy_matrix.vocabulary import StateTuple, IDLE, OPEN, BOOT_WAIT, IDLE_EXCEEDED

    matrix = policy_matrix.load_default()
    match = matrix.lookup(StateTuple(IDLE, OPEN, BOOT_WAIT, IDLE_EXCEEDED))
    match.action, match.rule.location          # Action.START_DRAIN, '.../default.matrix:29'

The file format is described in docs/matrix.md.
"""

from typing import TYPE_CHECKING, Any

from policy_matrix.errors import Diagnostic, MatrixError
from policy_matrix.vocabulary import DEFAULT_VOCABULARY, Action, StateTuple, Vocabulary
from policy_matrix.matrix import Match, Matrix, Rule
from policy_matrix.parser import MAX_BYTES, default_path, load, load_default, parse
from policy_matrix.diff import Change, diff
from policy_matrix.importer import import_dict
from policy_matrix.render import compact, format_rules, render_table, to_json

if TYPE_CHECKING:
    from policy_matrix.source import MatrixSource

__all__ = [
    "Action",
    "Change",
    "DEFAULT_VOCABULARY",
    "Diagnostic",
    "MAX_BYTES",
    "Match",
    "Matrix",
    "MatrixError",
    "MatrixSource",
    "Rule",
    "StateTuple",
    "Vocabulary",
    "compact",
    "default_path",
    "diff",
    "format_rules",
    "import_dict",
    "load",
    "load_default",
    "parse",
    "render_table",
    "to_json",
]


def __getattr__(name: str) -> Any:
    # MatrixSource (threads, file watching) loads on first use, so the pure core never loads it.
    if name == "MatrixSource":
        from policy_matrix.source import MatrixSource
        return MatrixSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
