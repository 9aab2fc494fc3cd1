"""The matrix in force and its file: re-read after every cycle when the file changed (a stat when
it did not) and on reload, swapped into the controller only when good; a bad file keeps the
running matrix, with its errors logged, counted and shown."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import policy_matrix

__all__ = ["MatrixKeeper"]

log = logging.getLogger("nodemanager.daemon")


class MatrixKeeper:
    """``source`` is the file's :class:`policy_matrix.MatrixSource`; ``observe`` the metrics' hook
    for each (re)load; ``set_matrix`` (the controller's, set once it is built) takes the matrix in
    force and a rejected file's message."""

    def __init__(self, path: str | None, observe: Callable[..., None]) -> None:
        self.source = policy_matrix.MatrixSource(path)
        self.observe = observe
        self.set_matrix: Callable[..., None] = lambda matrix, error=None: None
        self.lock = threading.Lock()          # reload (reloader thread) vs check (controller)
        observe(True, self.source.sha256)

    def check(self) -> bool:
        """Swap in the matrix file if it changed since the last look (a stat when it did not: no
        read, no parse); a bad file keeps the running matrix. True when a new matrix is now in force."""
        with self.lock:
            src = self.source
            before = (src.sha256, src.last_error_hash, str(src.last_error or ""))
            src.refresh()
            if (src.sha256, src.last_error_hash, str(src.last_error or "")) == before:
                return False
            ok = self._outcome(f"matrix file {src.path} changed", src.last_error)
            return ok and src.sha256 != before[0]

    def reload(self, path: str, running: str) -> tuple[bool, str]:
        """Re-read the matrix for a reload of the config naming ``path`` (``running`` the file in
        force): whether the file is now in force, and the matrix file the settings keep."""
        with self.lock:
            if (path or None) == (running or None):
                self.source.refresh(force=True)
                return self._outcome("reload", self.source.last_error), path
            try:
                source = policy_matrix.MatrixSource(path or None)
            except policy_matrix.MatrixError as exc:
                return self._outcome("reload: new matrix file", exc), running
            self.source = source
            return self._outcome("reload", None), path

    def _outcome(self, why: str, error: Any) -> bool:
        """Log, count and show one matrix (re)load: ``error`` is its MatrixError, or None when
        ``source.current`` is the file's content. True when it is."""
        src = self.source
        if error is None:
            self.set_matrix(src.current)
            self.observe(True, src.sha256, src.loaded_mtime)
            log.info("%s: matrix %s in force (sha256 %s)", why, src.path, src.sha256[:12])
            return True
        errors = getattr(error, "errors", ()) or (error,)
        more = f" (and {len(errors) - 1} more: see the log)" if len(errors) > 1 else ""
        self.set_matrix(src.current, error=f"{errors[0]}{more}")
        self.observe(False)
        log.error("%s: rejected, the running matrix stays (sha256 %s); %d error(s):\n%s", why,
                  src.sha256[:12], len(errors), "\n".join(f"  {e}" for e in errors))
        return False
