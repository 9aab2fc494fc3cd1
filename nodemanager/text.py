"""Text from outside (node and worker names from the cloud or the scheduler, reasons, snapshot
fields) made safe for a terminal or a log line.

:func:`printable` escapes every character Python does not call printable: C0 and C1 controls
(``\\r``, ``\\n``, ``\\x1b``...), DEL, the Unicode line and paragraph separators, bidi overrides
and other invisible format characters; a node named ``"evil\\r2026-01-01 INFO forged"`` shows as
``evil\\x0d2026-01-01 INFO forged`` and cannot forge a log line or repaint a terminal.
:func:`duration` writes a span of time for people (reasons say "for 3m 20s", never an epoch).
:class:`EscapingFilter` does it for every log record's arguments. JSON output needs neither: JSON
escapes control characters itself.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

__all__ = ["printable", "EscapingFilter", "duration", "short_rule", "local_when", "counted", "request_words"]

_PLAIN = (int, float, type(None))
_FAST = frozenset({int, float, bool, type(None)})


def counted(n: int, word: str) -> str:
    """``1 node``, ``2 nodes``, ``0 nodes``: a count with its noun in the right number."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def duration(seconds: float) -> str:
    """A span of time as people read it: ``42s``, ``3m 20s``, ``2h 05m``, ``3d 04h``."""
    s = int(round(abs(seconds)))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h:02d}h"


def local_when(at: float, now: float) -> str:
    """``"14:16:40 (in 3m 20s)"`` / ``"14:01:40 (11m 40s ago)"`` in this machine's local zone;
    the date is added when not today. For text; JSON keeps the epoch."""
    t, today = time.localtime(at), time.localtime(now)
    stamp = time.strftime("%H:%M:%S" if t[:3] == today[:3] else "%Y-%m-%d %H:%M:%S", t)
    return f"{stamp} (in {duration(at - now)})" if at >= now else f"{stamp} ({duration(now - at)} ago)"


def request_words(rid: str) -> str:
    """A boot request id as operators read it: ``50fc248cd8cb`` for the tag's
    ``50fc248cd8cb.1796613912`` (the request time it carries is an epoch second, for the code)."""
    base, dot, tail = rid.rpartition(".")
    return base if dot and len(tail) >= 9 and tail.isdigit() else rid


def short_rule(rule: str) -> str:
    """``default.matrix:25`` for ``/etc/nodemanager/default.matrix:25``: the file's name and line."""
    return rule.rsplit("/", 1)[-1]


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with each non-printable character written as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``."""
    if text.isprintable():  # the usual case: one C-speed scan, no copy
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _safe_arg(arg: Any) -> Any:
    if isinstance(arg, str):
        return printable(arg)
    if isinstance(arg, _PLAIN):
        return arg
    text = str(arg)
    # an object (an exception, a node) keeps its own %r/%s unless its text needs escaping
    return arg if text.isprintable() else printable(text)


class EscapingFilter(logging.Filter):
    """A handler filter that escapes the arguments of every record (and a message given without
    arguments), so that text from outside stays on its own log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if type(args) is tuple and args:
            for a in args:  # hot path (a line per decision): copy only a record that needs it
                if not (type(a) in _FAST or type(a) is str and a.isprintable()):
                    record.args = tuple(_safe_arg(a) for a in args)
                    break
        elif isinstance(args, Mapping) and args:
            record.args = {k: _safe_arg(v) for k, v in args.items()}
        elif not args and not isinstance(record.msg, _PLAIN):
            record.msg = _safe_arg(record.msg)
        return True
