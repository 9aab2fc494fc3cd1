"""What one head node keeps of the election in ``[Manage] state_dir``, so losing etcd's data
loses nothing that matters:

- ``ha-deployment``: the deployment name the election keys derive from when ``[HA] deployment``
  is not set, recorded at the first start (the cluster name then), so renaming the cluster later
  never moves this head to another election;
- ``ha-fence``: the highest fencing value this head has used or seen, so a new term's fence is
  above it even when etcd's revisions started again from 1;
- ``ha-admin.json``: a copy of the admin state (holds, forced drains, pause) as last written to
  or read from etcd, re-published when etcd comes back empty.

Every write is whole or not at all (a temporary file, fsync, rename); a file that cannot be read
is set aside, never overwritten (:mod:`nodemanager.store.state_files`).
"""

from __future__ import annotations

import json
import logging
import os
import threading

from nodemanager.store.state_files import may_write, read_state

__all__ = ["HeadRecords"]

log = logging.getLogger("nodemanager.ha")


def _fence(text: str) -> str:
    if not text.strip().isdigit():
        raise ValueError(f"not a fencing value: {text.strip()[:40]!r}")
    return text.strip()


def _json_object(text: str) -> str:
    if not isinstance(json.loads(text), dict):
        raise ValueError("not a JSON object")
    return text.strip()


_PARSE = {"ha-fence": _fence, "ha-admin.json": _json_object}


class HeadRecords:
    """The files above in ``state_dir`` (no directory: kept in memory only, with one warning)."""

    def __init__(self, state_dir: str) -> None:
        self.dir = state_dir
        self._lock = threading.Lock()
        self._memory: dict[str, str] = {}   # what was written, also when state_dir is not writable
        text = self._read("ha-fence")
        self._fence = int(text) if text and text.isdigit() else 0

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _read(self, name: str) -> str | None:
        if not self.dir:
            return None
        return read_state(self._path(name), _PARSE.get(name, str.strip), f"HA record {name}")

    def _write(self, name: str, text: str) -> None:
        self._memory[name] = text
        if not self.dir or not may_write(self._path(name)):
            return
        tmp = self._path(name) + ".tmp"
        try:
            os.makedirs(self.dir, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._path(name))
        except OSError as exc:
            log.warning("HA: cannot write %s: %s; kept in memory only", self._path(name), exc)

    def recorded_deployment(self) -> str | None:
        """The deployment name recorded by an earlier version (None: none recorded)."""
        with self._lock:
            return self._read("ha-deployment") or self._memory.get("ha-deployment")

    def deployment(self, cluster: str) -> str:
        """The recorded deployment name; ``cluster`` is recorded (and returned) at the first call."""
        with self._lock:
            recorded = self._read("ha-deployment") or self._memory.get("ha-deployment")
            if recorded:
                return recorded
            self._write("ha-deployment", cluster)
            log.info("HA: deployment name %r recorded in %s (the election follows it, not later "
                     "cluster renames)", cluster, self._path("ha-deployment"))
            return cluster

    @property
    def fence(self) -> int:
        """The highest fencing value used or seen here (0: none)."""
        with self._lock:
            return self._fence

    def saw_fence(self, fence: int) -> None:
        """Remember ``fence`` when it is above every one seen before."""
        with self._lock:
            if fence <= self._fence:
                return
            self._fence = fence
            self._write("ha-fence", str(fence))

    def admin_copy(self) -> str | None:
        """The admin state as last saved here, or None."""
        with self._lock:
            return self._read("ha-admin.json") or self._memory.get("ha-admin.json")

    def keep_admin(self, text: str) -> None:
        with self._lock:
            if self._memory.get("ha-admin.json") != text:
                self._write("ha-admin.json", text)
