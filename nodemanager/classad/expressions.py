"""Evaluating ClassAd expressions with ``classad2`` at an injected time, with truthiness done right.

Two traps this module exists for:

* ``classad2`` returns ``Value.Undefined`` / ``Value.Error`` for undefined or failed expressions,
  and both are *truthy* in Python (they are non-zero ``IntEnum`` members). :func:`is_true` only
  accepts a real ``True``.
* ``time()`` (and the old-ClassAd ``CurrentTime``) read the wall clock. The controller, the
  simulator and the tests run on an injected clock, so :func:`bind_time` replaces both by the
  injected time (outside string literals) before parsing.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["parse", "bind_time", "evaluate", "is_true", "to_classad", "plain_value", "references",
           "expanded_size"]

# A double-quoted ClassAd string literal (with backslash escapes), a time() call or CurrentTime.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\btime\s*\(\s*\)|(?<![.\w])CurrentTime\b', re.IGNORECASE)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
# an attribute reference: an optional scope, a name not part of a dotted selection nor a call
_REF = re.compile(r"(?<![.\w])(?:(my|target|other)\s*\.\s*)?([A-Za-z_]\w*)(?!\w)(?!\s*\()", re.IGNORECASE)
_NOT_NAMES = frozenset({"true", "false", "undefined", "error", "is", "isnt", "parent"})


def parse(text: str) -> Any:
    """Parse ``text`` into a ``classad2.ExprTree``; raise ValueError naming the text if it is not one."""
    import classad2

    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty ClassAd expression: {text!r}")
    try:
        return classad2.ExprTree(text)
    except Exception as exc:  # classad2 raises its own ClassAdException (an Exception subclass)
        raise ValueError(f"not a valid ClassAd expression: {text!r} ({exc})") from None


def bind_time(text: str, now: float) -> str:
    """``text`` with every ``time()`` call and ``CurrentTime`` reference replaced by the integer
    ``now`` (string literals untouched)."""
    stamp = str(int(now))
    return _TOKEN.sub(lambda m: m.group(0) if m.group(0).startswith('"') else stamp, text)


def to_classad(ad: Mapping[str, Any]) -> Any:
    """A ``classad2.ClassAd`` holding ``ad`` (a ClassAd is returned as is). ``None`` values are left out."""
    import classad2

    if isinstance(ad, classad2.ClassAd):
        return ad
    return classad2.ClassAd({k: v for k, v in ad.items() if v is not None})


def evaluate(text: str, ad: Mapping[str, Any], now: float, target: Mapping[str, Any] | None = None) -> Any:
    """Evaluate expression ``text`` against ``ad`` (MY) and optionally ``target`` as of ``now``.

    Returns the raw ``classad2`` result (may be ``Value.Undefined``/``Value.Error``: use
    :func:`is_true`). Raises ValueError if ``text`` does not parse.
    """
    tree = parse(bind_time(text, now))
    scope = to_classad(ad)
    if target is None:
        return tree.eval(scope)
    return tree.eval(scope, to_classad(target))


def is_true(value: Any) -> bool:
    """True only for a real boolean True: Undefined, Error, numbers and strings are not true."""
    return value is True


def plain_value(value: Any) -> Any:
    """A plain Python value for one attribute of a ``classad2`` ad: expressions are evaluated,
    Undefined/Error become None, lists are converted element-wise."""
    import classad2

    if isinstance(value, classad2.ExprTree):
        value = value.eval()
    if isinstance(value, classad2.Value):
        return None
    if isinstance(value, list):
        return [plain_value(v) for v in value]
    return value


def references(text: str) -> list[tuple[str, str]]:
    """``(scope, name)`` of every attribute reference in expression ``text``, in order and with
    repeats; ``scope`` is ``my``, ``target``, ``other`` or ``""``. Read from the text alone, in
    linear time: ``classad2``'s own reference walk follows every reference again each time it
    is named, which an ad can make take minutes."""
    bare = _STRING.sub('""', text)
    return [((m.group(1) or "").lower(), m.group(2)) for m in _REF.finditer(bare)
            if m.group(2).lower() not in _NOT_NAMES]


def expanded_size(texts: Mapping[str, str], limit: int) -> int:
    """How long the expressions of an ad (attribute -> expression text) would be with every
    reference to another of its attributes written out: what evaluating all of them may cost.
    Stops counting past ``limit`` (returns ``limit + 1``); a reference cycle counts nothing (it
    evaluates to error at once). Linear in the size of ``texts``."""
    by_name = {k.lower(): v for k, v in texts.items()}
    refs = {k: [n.lower() for scope, n in references(v) if scope != "target" and n.lower() in by_name]
            for k, v in by_name.items()}
    done: dict[str, int] = {}
    for root in by_name:
        if root in done:
            continue
        stack = [(root, iter(refs[root]))]
        acc = {root: len(by_name[root])}
        while stack:
            name, pending = stack[-1]
            nxt = next(pending, None)
            if nxt is None:
                stack.pop()
                done[name] = min(acc.pop(name), limit + 1)
                if stack:
                    acc[stack[-1][0]] += done[name]
            elif nxt in done:
                acc[name] += done[nxt]
            elif nxt not in acc:  # not on the stack: a cycle adds nothing
                stack.append((nxt, iter(refs[nxt])))
                acc[nxt] = len(by_name[nxt])
        if sum(done.values()) > limit:
            return limit + 1
    return min(sum(done.values()), limit + 1)
