"""``[Scheduler]`` options for ``type = slurm``, parsed and checked (see ``docs/slurm.md``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from nodemanager.configuration.values import seconds

__all__ = ["SlurmOptions", "OptionError", "NUMBERS"]

_DESTROYED_STATES = ("down", "future")
_CLOUD_ID_FIELDS = ("comment", "extra", "features")


# the options that are numbers, each with its parser and finite range (checked at load too)
NUMBERS = {"timeout": seconds(0.1, 3600, zero=False)}

@dataclass(frozen=True)
class SlurmOptions:
    """``[Scheduler]`` options for ``type = slurm`` (all optional; see ``docs/slurm.md``).

    ``slurm_conf``: passed as ``SLURM_CONF`` (default: the inherited environment);
    ``timeout``: per command (30s); ``mark_destroyed``: ``down`` or ``future``;
    ``partition``: comma list — only nodes in and jobs for these partitions count (empty: all);
    ``bin_dir``: where sinfo/squeue/scontrol/scancel live (default: PATH);
    ``cloud_id_field``: node field holding ``instance-id=<id>``: ``comment``, ``extra`` or
    ``features`` (default: all three, in that order).
    """

    slurm_conf: str | None = None
    timeout: float = 30.0
    mark_destroyed: str = "down"
    partitions: frozenset[str] = frozenset()
    bin_dir: str | None = None
    cloud_id_fields: tuple[str, ...] = _CLOUD_ID_FIELDS

    @classmethod
    def from_mapping(cls, options: Mapping[str, str]) -> "SlurmOptions":
        """Parse ``[Scheduler]`` options; a bad value raises :class:`OptionError` naming the option."""
        out = cls()
        for key, raw in options.items():
            value = str(raw).strip()
            if key == "slurm_conf":
                out = replace(out, slurm_conf=value or None)
            elif key == "timeout":
                try:
                    timeout = NUMBERS["timeout"](value)
                except ValueError as exc:
                    raise OptionError(key, f"{exc}, got {value!r}") from None
                out = replace(out, timeout=timeout)
            elif key == "mark_destroyed":
                value = (value or "down").lower()
                if value not in _DESTROYED_STATES:
                    raise OptionError(key, f"expected one of {', '.join(_DESTROYED_STATES)}, got {value!r}")
                out = replace(out, mark_destroyed=value)
            elif key == "partition":
                out = replace(out, partitions=frozenset(p.strip() for p in value.split(",") if p.strip()))
            elif key == "bin_dir":
                out = replace(out, bin_dir=value or None)
            elif key == "cloud_id_field":
                if value and value.lower() not in _CLOUD_ID_FIELDS:
                    raise OptionError(key, f"expected one of {', '.join(_CLOUD_ID_FIELDS)}, got {value!r}")
                out = replace(out, cloud_id_fields=(value.lower(),) if value else _CLOUD_ID_FIELDS)
            else:
                raise OptionError(key, "not an option of type slurm")
        return out


class OptionError(ValueError):
    """A bad ``[Scheduler]`` option value; ``str()`` reads ``[Scheduler] OPTION: message``."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"[Scheduler] {option}: {message}")
        self.option = option
        self.message = message
