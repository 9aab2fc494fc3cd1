"""The admin state as it is stored: one JSON document (held nodes, forced drains, pending cancels,
the pause), copied, changed and saved whole; read back with every fault named by file and place."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AdminDoc", "AdminStateError", "parse_admin", "log_loaded"]

log = logging.getLogger("nodemanager.admin")


class AdminStateError(ValueError):
    """The state file cannot be read back; the message names the file (and the place in it)."""


@dataclass(slots=True)
class AdminDoc:
    """The admin state itself; copied, changed and saved whole, then installed."""

    held: dict[str, float] = field(default_factory=dict)
    drains: dict[str, float] = field(default_factory=dict)
    cancels: dict[str, float] = field(default_factory=dict)
    paused: str | None = None
    paused_at: float | None = None
    reasons: dict[str, str] = field(default_factory=dict)  # node id -> the operator's reason for its hold or drain

    def copy(self) -> "AdminDoc":
        return AdminDoc(dict(self.held), dict(self.drains), dict(self.cancels), self.paused, self.paused_at,
                        dict(self.reasons))

    def to_text(self) -> str:
        return json.dumps({"held": self.held, "forced_drains": self.drains, "cancels": self.cancels,
                           "paused": self.paused, "paused_at": self.paused_at, "reasons": self.reasons},
                          sort_keys=True)


def parse_admin(text: str, path: str) -> AdminDoc:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AdminStateError(f"{path}:{exc.lineno}:{exc.colno}: the admin state is not JSON: "
                              f"{exc.msg}") from None
    if not isinstance(data, dict):
        raise AdminStateError(f"{path}: the admin state must be a JSON object")
    held = _node_times(path, data, "held")
    drains = _node_times(path, data, "forced_drains")
    cancels = _node_times(path, data, "cancels")
    paused, paused_at = data.get("paused"), data.get("paused_at")
    reasons = data.get("reasons", {})
    if not isinstance(reasons, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in reasons.items()):
        raise AdminStateError(f"{path}: \"reasons\" must map node ids to reasons (text)")
    if paused is not None and not isinstance(paused, str):
        raise AdminStateError(f"{path}: \"paused\" must be a reason (text) or null")
    if paused_at is not None and not _is_time(paused_at):
        raise AdminStateError(f"{path}: \"paused_at\" must be a time (seconds) or null")
    return AdminDoc(held, drains, cancels, paused,
                float(paused_at) if paused is not None and paused_at is not None else None,
                {k: v for k, v in reasons.items() if k in held or k in drains})


def log_loaded(path: str, doc: AdminDoc) -> None:
    log.info("admin state from %s: %d node(s) held, %d forced drain(s), %d pending cancel(s)%s", path,
             len(doc.held), len(doc.drains), len(doc.cancels),
             f", PAUSED: {doc.paused}" if doc.paused is not None else "")


def _is_time(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _node_times(path: str, data: dict[str, Any], key: str) -> dict[str, float]:
    value = data.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(k, str) and _is_time(v) for k, v in value.items()):
        raise AdminStateError(f"{path}: \"{key}\" must map node ids to times (seconds)")
    return {k: float(v) for k, v in value.items()}
