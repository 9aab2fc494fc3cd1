"""The checked readers of snapshot JSON values: each takes a value and the JSON path it came from
and returns it typed, or raises :class:`SnapshotError` naming that path (numbers within bounds,
times between 1970 and 2200, counts whole and not negative)."""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping

__all__ = ["SnapshotError", "parse_time", "MAX_TIME", "MAX_COUNT", "Fields", "Unusable", "fail",
           "int_token", "float_token", "read_number", "read_offset", "read_int", "read_str",
           "read_opt_str", "read_bool", "read_list", "read_obj", "read_strings", "check_plain"]

MAX_TIME = 7_258_118_400.0  # 2200-01-01 UTC: a later time is a typo or a forged input, not a plan
MAX_COUNT = 10**12          # cores, MB, jobs: far above any pool, far below float rounding
_MAX_DIGITS = 30            # longer integer tokens are not converted (int() of 5000 digits raises)


class SnapshotError(ValueError):
    """A malformed snapshot; the message starts with the JSON field path (and the file, if any)."""


def fail(path: str, msg: str) -> SnapshotError:
    return SnapshotError(f"{path}: {msg}" if path else msg)


class Unusable:
    """A JSON number token no field can take (NaN, Infinity, 1e999, 5000 digits), kept unconverted
    so that the field that holds it is named in the error."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what


def int_token(text: str) -> int | Unusable:
    digits = len(text.lstrip("-"))
    return Unusable(f"a number of {digits} digits") if digits > _MAX_DIGITS else int(text)


def float_token(text: str) -> float | Unusable:
    value = float(text)
    return value if math.isfinite(value) else Unusable(text if len(text) <= _MAX_DIGITS
                                                        else f"a number of {len(text)} characters")


def describe(v: Any) -> str:
    """How an out-of-range number is named in an error."""
    if isinstance(v, Unusable):
        return v.what
    if isinstance(v, int):  # math.isfinite cannot take an int beyond a float's range
        digits = len(str(abs(v)))
    else:
        digits = len(str(abs(int(v)))) if math.isfinite(v) else 0
    return f"a number of {digits} digits" if digits > _MAX_DIGITS else repr(v)


def read_number(v: Any, path: str) -> float:
    """A time: seconds since 1970, before 2200."""
    if isinstance(v, Unusable):
        raise fail(path, f"{v.what} is not a time")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise fail(path, "expected a number")
    if isinstance(v, float) and not math.isfinite(v):
        raise fail(path, f"{v} is not a time")
    if not 0 <= v <= MAX_TIME:
        raise fail(path, f"{describe(v)} is not a time (seconds since 1970, before 2200)")
    return float(v)


def read_offset(v: Any, path: str) -> float:
    """A signed number of seconds (a clock skew): finite, within ±MAX_TIME."""
    if isinstance(v, Unusable):
        raise fail(path, f"{v.what} is not a number of seconds")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise fail(path, "expected a number")
    if not (math.isfinite(v) and -MAX_TIME <= v <= MAX_TIME):
        raise fail(path, f"{describe(v)} is not a usable number of seconds")
    return float(v)


def parse_time(text: str, path: str = "now") -> float:
    """A time given as text (``plan --now``), checked like the snapshot's times."""
    text = text.strip()
    try:
        token = int_token(text) if re.fullmatch(r"-?\d+", text) else float_token(text)
    except ValueError:
        raise fail(path, "expected a number") from None
    return read_number(token, path)


def read_int(v: Any, path: str, minimum: int = 0) -> int:
    if isinstance(v, Unusable):
        raise fail(path, f"{v.what} is not a usable count (at most {MAX_COUNT:.0e})")
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise fail(path, "expected a whole number")
    if v < minimum:
        raise fail(path, f"expected a number >= {minimum}")
    if v > MAX_COUNT:
        raise fail(path, f"{describe(v)} is not a usable count (at most {MAX_COUNT:.0e})")
    return v


def check_plain(v: Any, path: str) -> None:
    """Refuse unusable numbers anywhere inside ``v`` (an ad is passed on as it is)."""
    if isinstance(v, Unusable):
        raise fail(path, f"{v.what} is not a usable value")
    if isinstance(v, dict):
        for k, x in v.items():
            check_plain(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            check_plain(x, f"{path}[{i}]")


def read_str(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise fail(path, "expected a non-empty string")
    return v


def read_opt_str(v: Any, path: str) -> str | None:
    return None if v is None else read_str(v, path)


def read_bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise fail(path, "expected true or false")
    return v


def read_list(v: Any, path: str) -> list:
    if not isinstance(v, list):
        raise fail(path, "expected a list")
    return v


def read_obj(v: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise fail(path, "expected an object")
    return v


class Fields:
    """Reads the fields of one JSON object, refusing unknown ones (typos should not pass)."""

    def __init__(self, v: Any, path: str, known: tuple[str, ...]) -> None:
        self.obj, self.path = read_obj(v, path), path
        for key in self.obj:
            if key not in known:
                raise fail(f"{path}.{key}" if path else key,
                            f"unknown field (known: {', '.join(known)})")

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def req(self, key: str, conv: Callable[[Any, str], Any]) -> Any:
        if key not in self.obj:
            raise fail(self.sub(key), "missing")
        return conv(self.obj[key], self.sub(key))

    def opt(self, key: str, conv: Callable[[Any, str], Any], default: Any = None) -> Any:
        v = self.obj.get(key)
        return default if v is None else conv(v, self.sub(key))

    def has(self, key: str) -> bool:
        return self.obj.get(key) is not None


def read_strings(v: Any, path: str) -> frozenset[str]:
    return frozenset(read_str(x, f"{path}[{i}]") for i, x in enumerate(read_list(v, path)))
