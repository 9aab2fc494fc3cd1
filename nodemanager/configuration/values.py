"""What one option's text means: durations, numbers, booleans, choices, names, addresses and
HTCondor attribute assignments, each parser raising ValueError with the words an operator sees
after ``file:line: [section] option:`` (:mod:`nodemanager.configuration.config` adds those)."""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any, Callable

__all__ = ["parse_duration", "parse_bool", "parse_int", "parse_float", "parse_host_names", "parse_minutes",
           "parse_names", "parse_attributes", "nonneg", "choice", "address"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds from ``300``, ``300s``, ``5m``, ``1.5h`` or ``1d``; ValueError otherwise."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError("expected a duration like 300, 5m or 1h")
    return _bounded(float(m.group(1)) * _UNITS[m.group(2).lower()])


_MAX_NUMBER = 1e15  # far above any real setting; past it a number is a typo and may overflow a float
_TOO_LARGE = "too large (more than 10^15)"


def _bounded(value: float) -> float:
    if math.isnan(value):
        raise ValueError("expected a number")
    if not abs(value) <= _MAX_NUMBER:
        raise ValueError(_TOO_LARGE)
    return value


def parse_bool(text: str) -> bool:
    """True for yes/true/on/1, False for no/false/off/0; ValueError otherwise."""
    v = text.strip().lower()
    if v in ("1", "yes", "true", "on"):
        return True
    if v in ("0", "no", "false", "off"):
        return False
    raise ValueError("expected yes or no")


def parse_int(text: str) -> int:
    digits = text.strip().lstrip("+-")
    if digits.isdigit() and len(digits) > 15:  # int() itself refuses 4300 digits
        raise ValueError(_TOO_LARGE)
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("expected a whole number") from None


def parse_float(text: str) -> float:
    try:
        return _bounded(float(text.strip()))
    except ValueError as exc:
        raise ValueError(_TOO_LARGE if str(exc) == _TOO_LARGE else "expected a number") from None


def parse_share(text: str) -> float:
    """A share of a whole: ``5%`` or ``0.05``, from 0 to 1."""
    t = text.strip()
    value = parse_float(t[:-1]) / 100.0 if t.endswith("%") else parse_float(t)
    if not 0.0 <= value <= 1.0:
        raise ValueError("expected a share from 0 to 100%")
    return value


_HOST_NAME_RE = re.compile(r"\*|\.?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?")


def parse_host_names(text: str) -> tuple[str, ...]:
    names = tuple(text.replace(",", " ").lower().split())
    bad = [n for n in names if not _HOST_NAME_RE.fullmatch(n)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a host name (expected names like status.example.org, "
                         ".example.org for every name under it, or *)")
    return names


def parse_minutes(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.replace(",", " ").split())
    except ValueError:
        raise ValueError("expected minutes separated by commas, like 54, 5, 1") from None
    if not values or any(v <= 0 for v in values):
        raise ValueError("expected positive minutes separated by commas, like 54, 5, 1")
    return values


def parse_names(text: str) -> frozenset[str]:
    """A comma list of names (``features``, ``partitions``)."""
    return frozenset(n.strip() for n in text.split(",") if n.strip())


_ATTRIBUTE = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)((?:[^;"]|"(?:[^"\\]|\\.)*")*)')


def parse_attributes(text: str) -> tuple[tuple[str, str], ...]:
    """HTCondor machine attributes, ``Name = expr`` separated by ``;`` (each expr checked by classad2)."""
    from nodemanager.classad.expressions import parse
    out: list[tuple[str, str]] = []
    rest = text.strip()
    while rest:
        m = _ATTRIBUTE.match(rest)
        if m is None:
            raise ValueError(f"expected 'Name = expression' assignments separated by ';' at {rest[:40]!r}")
        name, expr = m.group(1), m.group(2).strip()
        try:
            parse(expr)
        except ImportError:
            raise ValueError("needs the HTCondor bindings (classad2): pip install htcondor") from None
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if any(n.lower() == name.lower() for n, _ in out):
            raise ValueError(f"{name} assigned twice")
        out.append((name, expr))
        rest = rest[m.end():].lstrip()
        if rest.startswith(";"):
            rest = rest[1:].strip()
        elif rest:
            raise ValueError(f"expected ';' before {rest[:40]!r}")
    return tuple(out)


def nonneg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def check(text: str) -> Any:
        value = parse(text)
        if value < 0:
            raise ValueError("must not be negative")
        return value
    return check


def within(low: float, high: float, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse``, refusing a value outside ``low``..``high`` (both allowed)."""
    def check(text: str) -> Any:
        value = parse(text)
        if not low <= value <= high:
            raise ValueError(f"must be from {low:g} to {high:g}")
        return value
    return check


def choice(*allowed: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        v = text.strip().lower()
        if v not in allowed:
            raise ValueError("expected one of " + ", ".join(allowed))
        return v
    return check


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def address(text: str) -> str:
    """An IP address or a host name (``[Manage] address``); empty keeps the default."""
    value = text.strip()
    if not value:
        return value
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    labels = value.removesuffix(".").split(".")
    # an all-digit last label is a mistyped IPv4 address (999.1.1.1), never a host name
    if len(value) > 253 or labels[-1].isdigit() or not all(_HOST_LABEL.fullmatch(x) for x in labels):
        raise ValueError("expected an IP address or a host name")
    return value
