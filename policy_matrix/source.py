"""Reloading a matrix file while the daemon runs: keep the last good table, report the bad one."""

from __future__ import annotations

import hashlib
import os
import threading

from policy_matrix.errors import MatrixError
from policy_matrix.matrix import Matrix
from policy_matrix.parser import default_path, parse, read_bytes

__all__ = ["MatrixSource"]


class MatrixSource:
    """A matrix file that is re-read when it changes.

    ``current`` is always a valid ``Matrix`` (the last good one). ``refresh()`` checks the file
    (modification time, size, inode, then content hash) and, when it changed and is valid, swaps
    ``current`` in one assignment. When it is invalid or unreadable, ``current`` stays and
    ``last_error`` / ``last_error_hash`` say why and for which content; ``loaded_mtime`` is the
    modification time (epoch seconds) of the file ``current`` was read from. ``path=None`` means the
    shipped default matrix. The constructor raises ``MatrixError`` when the first read fails:
    there is no last good table to fall back on.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, strict: bool = False) -> None:
        self.path = default_path() if path is None else os.fspath(path)
        self.strict = strict
        self.last_error: MatrixError | None = None
        self.last_error_hash: str | None = None
        self._lock = threading.Lock()
        self._signature = self._stat()
        data = read_bytes(self.path)
        self._current = parse(data, self.path, strict=strict)
        self.loaded_mtime = self._mtime(self._signature)

    @property
    def current(self) -> Matrix:
        return self._current

    @property
    def sha256(self) -> str:
        """Hash of the matrix in use (not of a rejected file on disk)."""
        return self._current.sha256

    @staticmethod
    def _mtime(signature: tuple[int, int, int] | None) -> float:
        return signature[0] / 1e9 if signature else 0.0

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def refresh(self, *, force: bool = False) -> bool:
        """Re-read the file if it changed (or ``force``). True when a new matrix is now current."""
        with self._lock:
            signature = self._stat()
            if signature == self._signature and not force and signature is not None:
                return False
            try:
                data = read_bytes(self.path)
            except MatrixError as e:
                self._signature = signature
                self.last_error, self.last_error_hash = e, None
                return False
            digest = hashlib.sha256(data).hexdigest()
            self._signature = signature
            if digest == self._current.sha256:
                self.last_error = self.last_error_hash = None
                self.loaded_mtime = self._mtime(signature)
                return False
            if digest == self.last_error_hash and not force:
                return False
            try:
                matrix = parse(data, self.path, strict=self.strict)
            except MatrixError as e:
                self.last_error, self.last_error_hash = e, digest
                return False
            self._current = matrix
            self.loaded_mtime = self._mtime(signature)
            self.last_error = self.last_error_hash = None
            return True
