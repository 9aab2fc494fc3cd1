"""One running instance per cluster: an exclusive lock file in ``[Manage] state_dir``.

API::

    lock = InstanceLock.acquire(state_dir, cluster)   # InstanceRunning / LockError
    lock.holder                                        # Holder(pid, host, since): this process
    lock.release()                                     # or let the process exit

``flock(LOCK_EX | LOCK_NB)`` on ``<state_dir>/<cluster>.lock``, held for the life of the process.
The kernel releases it when the process dies, however it dies (SIGKILL, OOM kill), so a stale
file never blocks a restart. After locking, the file holds ``pid host since`` so that a refused
instance can say who runs. On NFS, Linux maps ``flock`` to POSIX byte-range locks, which lockd
(v3) or the server (v4) arbitrates across hosts; a mount without locking fails with ENOLCK,
reported as a :class:`LockError`. The lock is per open file: a second ``acquire`` in the same
process is refused too, and a reload never re-takes it (``state_dir`` needs a restart).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import socket
import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["Holder", "InstanceLock", "InstanceRunning", "LockError", "lock_path"]


@dataclass(frozen=True)
class Holder:
    """Who holds the lock: written into the lock file by the holder."""

    pid: int
    host: str
    since: float                                    # epoch seconds

    def __str__(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"pid {self.pid} on {self.host} since {when}"

    def line(self) -> str:
        return f"{self.pid} {self.host} {self.since:.0f}\n"

    @classmethod
    def parse(cls, text: str) -> "Holder | None":
        parts = text.split()
        try:
            return cls(int(parts[0]), parts[1], float(parts[2])) if len(parts) == 3 else None
        except ValueError:
            return None


class LockError(Exception):
    """The lock cannot be taken for a reason other than another instance (the directory cannot be
    created, the file system has no locks...); ``str()`` names the path."""


class InstanceRunning(Exception):
    """Another process holds the lock; ``holder`` says who (None while it is still writing it)."""

    def __init__(self, path: str, holder: Holder | None) -> None:
        self.path, self.holder = path, holder
        who = str(holder) if holder else "a process that has not written its name yet"
        super().__init__(f"another nodemanager runs this cluster: {who} (lock {path})")


def lock_path(state_dir: str, name: str) -> str:
    """``<state_dir>/<name>.lock``, with anything but letters, digits, ``.-_`` in ``name`` made ``_``."""
    return os.path.join(state_dir, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".lock")


class InstanceLock:
    """The held lock (see the module docstring); build it with :meth:`acquire`."""

    def __init__(self, path: str, fd: int, holder: Holder) -> None:
        self.path, self._fd, self.holder = path, fd, holder

    @classmethod
    def acquire(cls, state_dir: str, name: str, *,
                clock: Callable[[], float] = time.time) -> "InstanceLock":
        path = lock_path(state_dir, name)
        try:
            os.makedirs(state_dir, mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            raise LockError(f"cannot create the lock {path}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            text = _read(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise InstanceRunning(path, Holder.parse(text)) from None
            raise LockError(f"cannot lock {path}: {e.strerror or e}"
                            + (" (a file system without locks? use a local state_dir)"
                               if e.errno == errno.ENOLCK else "")) from None
        holder = Holder(os.getpid(), socket.gethostname(), clock())
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.line().encode(), 0)
        except OSError as e:
            os.close(fd)
            raise LockError(f"cannot write the lock {path}: {e.strerror or e}") from None
        return cls(path, fd, holder)

    def release(self) -> None:
        """Let another instance start (closing the file drops the lock; the file stays)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return ""
