"""The body of an admin request (``POST /admin/...``): empty, or a small JSON object of known
text fields. Anything else (not UTF-8, not JSON, nested, a number, NaN, a huge number, an unknown
field) is a :class:`BadBody` whose words the API answers with HTTP 400, never a 500."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["BadBody", "admin_body", "BODY_FIELDS"]

BODY_FIELDS = ("reason",)
_MAX_TEXT = 200             # characters of a reason kept (printable only)
_USAGE = 'expected an empty body or {"reason": "..."}'


class BadBody(ValueError):
    """The body is unusable; ``str()`` says why, for the 400 answer."""


def _refuse_number(text: str) -> Any:
    raise BadBody(f"numbers are not taken here ({text[:20]}...): {_USAGE}" if len(text) > 20
                  else f"numbers are not taken here ({text}): {_USAGE}")


def admin_body(body: bytes) -> dict[str, str]:
    """The fields of an admin request body, each a printable text; BadBody says what is wrong."""
    if not body.strip():
        return {}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadBody(f"body is not UTF-8 text: {_USAGE}") from None
    stripped = text.lstrip()
    if not stripped.startswith("{"):  # refused before parsing: a deep array is never walked
        raise BadBody(f"body must be a JSON object: {_USAGE}")
    try:
        doc = json.loads(text, parse_int=_refuse_number, parse_float=_refuse_number,
                         parse_constant=_refuse_number)
    except BadBody:
        raise
    except RecursionError:
        raise BadBody(f"body is nested too deeply: {_USAGE}") from None
    except ValueError as err:
        raise BadBody(f"body is not JSON ({err}): {_USAGE}") from None
    if not isinstance(doc, dict):
        raise BadBody(f"body must be a JSON object: {_USAGE}")
    fields: dict[str, str] = {}
    for key, value in doc.items():
        if key not in BODY_FIELDS:
            raise BadBody(f"unknown field {key[:40]!r} (known: {', '.join(BODY_FIELDS)})")
        if not isinstance(value, str):
            raise BadBody(f"{key} must be a text, not {_kind(value)}: {_USAGE}")
        fields[key] = "".join(ch for ch in value if ch.isprintable())[:_MAX_TEXT]
    return fields


def _kind(value: Any) -> str:
    """What a JSON value is, in words (numbers never get here: they are refused while parsing)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return "an object" if isinstance(value, dict) else "a list"
