"""``scontrol show`` text, read: ``scontrol show config`` (``Key = Value`` lines, the running
slurmctld's settings) and ``scontrol -F -o show node`` (one ``Key=Value ...`` line per node, FUTURE
nodes included: they are the only place SLURM shows the reason it rejected a FUTURE node's slurmd,
which ``sinfo`` hides). Pure."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Mapping

__all__ = ["parse_config", "parse_records", "listed", "show_time", "state_flags", "REJECTED_FLAG"]

# the state flag of a node whose slurmd registered with less than its NodeName line declares (INVAL)
REJECTED_FLAG = "INVALID_REG"

_CONFIG_LINE = re.compile(r"^(\S+?)\s*=\s?(.*)$")
# a field starts at a word followed by "=" after a space; Reason (free text) is always the last one
_FIELD = re.compile(r"(?:^|\s)([A-Za-z]+)=")


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` as {setting: value} (``(null)`` as the empty string)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _CONFIG_LINE.match(line)
        if m:
            value = m.group(2).strip()
            out[m.group(1)] = "" if value == "(null)" else value
    return out


def parse_records(text: str, key: str = "NodeName") -> dict[str, dict[str, str]]:
    """``scontrol -o show node`` (``key`` NodeName) or ``show partition`` (PartitionName) as
    {name: {field: value}} (``(null)`` as the empty string)."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        head, sep, reason = line.partition(" Reason=")
        fields: dict[str, str] = {}
        marks = list(_FIELD.finditer(head))
        for m, nxt in zip(marks, marks[1:] + [None]):
            value = head[m.end():nxt.start() if nxt else len(head)].strip()
            fields[m.group(1)] = "" if value == "(null)" else value
        if sep:
            fields["Reason"] = reason.strip()
        name = fields.get(key)
        if name:
            out[name] = fields
    return out


def listed(value: str) -> list[str]:
    """A comma list setting (``SlurmctldParameters``, ``SchedulerParameters``) as its items,
    each without its ``=value``, lower case."""
    return [item.split("=", 1)[0].strip().lower() for item in value.split(",") if item.strip()]


def show_time(value: str) -> float | None:
    """A time as ``scontrol`` prints it (``2026-11-27T01:51:16``, local time) as epoch seconds;
    None for ``None``/``Unknown``/anything else."""
    try:
        return _dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def state_flags(fields: Mapping[str, str]) -> list[str]:
    """A node's ``State=IDLE+DRAIN+INVALID_REG`` as its words, base state first."""
    return [w for w in fields.get("State", "").split("+") if w]
