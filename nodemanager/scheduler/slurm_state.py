"""A SLURM node's state as ``sinfo -o %t`` names it, from ``sinfo --json``'s base ``state`` and
``state_flags`` (SLURM's ``node_state_string_compact``): ``idle``, ``mix``, ``alloc``, ``drng``,
``drain``, ``down*``, ``idle*``, ``comp``, ... :mod:`nodemanager.scheduler.slurm_classify` maps
the (word, suffix marks) form to the matrix's worker_state. Pure.
"""

from __future__ import annotations

import functools
from typing import Iterable

__all__ = ["short_state", "compact_state", "flag_names"]

_BASE_SHORT = {"idle": "IDLE", "allocated": "ALLOC", "mixed": "MIX", "down": "DOWN",
               "future": "FUTR", "unknown": "UNK", "error": "ERROR"}
_FLAG_ALIASES = {"MAINT": "MAINTENANCE", "NO_RESPOND": "NOT_RESPONDING",
                 "REBOOT": "REBOOT_REQUESTED", "NET": "PERFCTRS", "POWER_SAVE": "POWERED_DOWN"}
# Suffix characters in SLURM's order of precedence: maint, reboot, powering up/down, off, pending off, no response.
_SUFFIXES = (("MAINTENANCE", "$"), ("REBOOT_REQUESTED", "@"), ("POWERING_UP", "#"),
             ("POWERING_DOWN", "%"), ("POWERED_DOWN", "~"), ("POWER_DOWN", "!"),
             ("NOT_RESPONDING", "*"))


def flag_names(flags: Iterable[str]) -> tuple[str, ...]:
    """``state_flags`` in upper case with the older names (``MAINT``, ``NO_RESPOND``...) made current."""
    return tuple(_FLAG_ALIASES.get(f.upper(), f.upper()) for f in flags)


def short_state(base: str, flags: Iterable[str]) -> str:
    """The ``sinfo %t`` form of a node whose JSON ``state`` is ``base`` and ``state_flags`` ``flags``."""
    return "".join(compact_state(base, tuple(flags)))


@functools.lru_cache(maxsize=1024)
def compact_state(base: str, flags: tuple[str, ...]) -> tuple[str, str]:
    """The ``sinfo %t`` name of a JSON ``state`` plus ``state_flags``, as (word, suffix marks):
    what the SLURM classifier reads, without printing and parsing it back."""
    f = set(flag_names(flags))
    b = base.lower()
    alloc_like = b in ("allocated", "mixed")
    no_resp = "*" if "NOT_RESPONDING" in f else ""

    def suffix() -> str:
        for flag, ch in _SUFFIXES:
            if flag in f:
                return ch
        return ""

    if "MAINTENANCE" in f and not ("DRAIN" in f or alloc_like or b == "down"):
        return "maint", no_resp
    if ("REBOOT_REQUESTED" in f or "REBOOT_ISSUED" in f) and not alloc_like:
        return "boot", "^" if "REBOOT_ISSUED" in f else no_resp
    if "DRAIN" in f:
        return "drng" if ("COMPLETING" in f or alloc_like) else "drain", suffix()
    if "FAIL" in f:
        return "failg" if ("COMPLETING" in f or b == "allocated") else "fail", no_resp
    if b == "down":
        return "down", suffix()
    if b == "allocated":
        return "alloc", suffix() or ("+" if "COMPLETING" in f else "")
    if "COMPLETING" in f:
        return "comp", suffix()
    if b == "idle":
        s = suffix()
        if s:
            return "idle", s
        for flag, word in (("PLANNED", "plnd"), ("PERFCTRS", "npc"), ("RESERVED", "resv")):
            if flag in f:
                return word, ""
        return "idle", ""
    if b == "mixed":
        s = suffix()
        return ("plnd", "") if not s and "PLANNED" in f else ("mix", s)
    short = _BASE_SHORT.get(b)
    if short is None:
        return b or "?", ""
    return short.lower(), no_resp
