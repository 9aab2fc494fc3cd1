"""The reservation journal: ``<state_dir>/<cluster>.reservations``, one JSON line per boot
reservation (:class:`nodemanager.core.reservations.Reservation`).

API note (the actuator is the only writer)::

    journal = ReservationJournal.for_settings(settings)   # None: no durable journal (see there)
    journal.load()              # reservations on disk; a bad line is logged (file:line) and skipped,
                                # the file copied aside first unless it is a torn last line
    journal.record(reservation) # append + fsync before the create is sent; raises OSError
    journal.keep(reservations)  # rewrite with only these (tmp + fsync + rename); raises OSError

A line torn by a crash in the middle of an append is skipped on load (its create was never sent:
the append is fsynced before the create). The file holds only reservations no listing has shown
yet, so it stays a few lines long.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from typing import Iterable

from nodemanager.core import Reservation, from_line, to_line
from nodemanager.configuration.kinds import in_process
from nodemanager.configuration.settings import Settings
from nodemanager.store.state_files import may_write, read_state, set_aside

__all__ = ["ReservationJournal", "journal_path"]

log = logging.getLogger("nodemanager.journal")

def journal_path(settings: Settings) -> str:
    """Where the journal of ``settings``' cluster lives."""
    return os.path.join(settings.manage.state_dir, f"{settings.cloud.cluster}.reservations")


class ReservationJournal:
    """The durable list of boot reservations at ``path`` (the directory is made on first write)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: Settings) -> ReservationJournal | None:
        """The journal for a daemon with ``settings``; None without a ``state_dir`` or for a cloud
        that lives in this process (simulated, libcloud's dummy), whose VMs die with it."""
        if not settings.manage.state_dir or in_process(settings.cloud.driver):
            return None
        return cls(journal_path(settings))

    def __repr__(self) -> str:
        return f"ReservationJournal({self.path!r})"

    def load(self) -> list[Reservation]:
        """The reservations on disk, in file order (none if the file does not exist)."""
        # a bad byte spoils its line only: the other reservations still count
        lines = read_state(self.path, str.splitlines, "reservation journal", errors="replace")
        out: list[Reservation] = []
        bad: list[str] = []
        for lineno, line in enumerate(lines or (), 1):
            if not line.strip():
                continue
            try:
                out.append(from_line(line))
            except ValueError as err:
                log.warning("%s:%d: reservation line skipped: %s", self.path, lineno, err)
                if lineno < len(lines or ()):  # a torn last line is a create never sent; others are kept
                    bad.append(f"line {lineno}: {err}")
        if bad:
            set_aside(self.path, "; ".join(bad[:3]), "reservation journal", copy=True)
        return out

    def record(self, reservation: Reservation) -> None:
        """Append one whole reservation line and fsync it; OSError if it could not be made durable
        (a part written on a full disk is cut off again, so no torn line outlives the failure)."""
        with self._lock:
            if not may_write(self.path):
                raise OSError(errno.EIO, f"{self.path} could not be read nor set aside; not written over")
            os.makedirs(os.path.dirname(self.path) or ".", mode=0o750, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
            try:
                end = os.fstat(fd).st_size
                try:
                    _write_all(fd, (to_line(reservation) + "\n").encode())
                    os.fsync(fd)
                except OSError:
                    _truncate(fd, end)
                    raise
            finally:
                os.close(fd)

    def keep(self, reservations: Iterable[Reservation]) -> None:
        """Rewrite the journal with only ``reservations`` (atomic: tmp, fsync, rename)."""
        text = "".join(to_line(r) + "\n" for r in reservations)
        with self._lock:
            if not text and not os.path.exists(self.path):
                return
            if not may_write(self.path):
                raise OSError(errno.EIO, f"{self.path} could not be read nor set aside; not written over")
            tmp = f"{self.path}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
            try:
                _write_all(fd, text.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` or raise OSError: a short write (a nearly full disk) is
    continued, and the next write then either finishes the line or says why it cannot."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]


def _truncate(fd: int, size: int) -> None:
    """Cut a failed append back to ``size``; if even that fails, load() skips the torn line."""
    try:
        os.ftruncate(fd, size)
    except OSError as exc:
        log.warning("reservation journal: a failed append could not be cut off: %s", exc.strerror or exc)
