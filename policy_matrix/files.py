"""Reading a small file an operator names (matrix, config, snapshot) without hanging or filling memory.

``read_capped(path, cap)`` refuses what is not a regular file (a directory, a FIFO, a device, a
socket) and anything over ``cap`` bytes *before* reading it, and never blocks: a FIFO is opened
non-blocking and refused, so a reload or ``plan`` cannot hang on it. Symlinks are followed (a
config under /etc linked from elsewhere is legitimate). Errors are :class:`FileRefused`, whose
message names no path: each caller puts it in its own error type, which does.
"""

from __future__ import annotations

import os
import stat

__all__ = ["FileRefused", "read_capped", "describe_size"]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class FileRefused(Exception):
    """The file cannot be used; ``str()`` says why (``is a FIFO, not a regular file``); ``kind`` is
    one of ``not found``, ``not regular``, ``too big``, ``unreadable``."""

    def __init__(self, message: str, kind: str) -> None:
        self.kind = kind
        super().__init__(message)


def describe_size(cap: int) -> str:
    """``1048576 bytes (1 MiB)``: how a cap is shown in errors and docs."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if cap >= scale and cap % scale == 0:
            return f"{cap} bytes ({cap // scale} {unit})"
    return f"{cap} bytes"


def _check(mode: int, size: int, cap: int, what: str) -> None:
    for test, kind in _KINDS:
        if test(mode):
            raise FileRefused(f"is {kind}, not a regular file", "not regular")
    if not stat.S_ISREG(mode):
        raise FileRefused("is not a regular file", "not regular")
    if size > cap:
        raise FileRefused(f"file is {size} bytes; {what} may be at most {describe_size(cap)}", "too big")


def read_capped(path: str | os.PathLike[str], cap: int, *, what: str = "this file") -> bytes:
    """The bytes of the regular file at ``path``, at most ``cap`` of them; :class:`FileRefused` else."""
    name = os.fspath(path)
    try:
        # stat first: opening some devices has side effects (a tape rewinds)
        _check(os.stat(name).st_mode, 0, cap, what)
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        kind = "not found" if isinstance(e, FileNotFoundError) else "unreadable"
        raise FileRefused(f"cannot read: {e.strerror or e}", kind) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        _check(st.st_mode, st.st_size, cap, what)      # again: it may have been swapped since the stat
        try:
            data = f.read(cap + 1)
        except OSError as e:
            raise FileRefused(f"cannot read: {e.strerror or e}", "unreadable") from None
    if len(data) > cap:
        raise FileRefused(f"file is over {cap} bytes; {what} may be at most {describe_size(cap)}", "too big")
    return data
