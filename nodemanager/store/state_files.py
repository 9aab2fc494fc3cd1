"""The one rule for every file the daemon keeps in ``state_dir`` (spend ledger, node history,
memories, reservation journal, HA records): state that cannot be read is kept, never overwritten.

:func:`read_state` reads and parses a state file. A missing file is no state (None). A file that
cannot be read, decoded or parsed is renamed ``<name>.unreadable-<UTC time>`` beside it (one ERROR
line naming both files and what is wrong), and the daemon starts that state empty; the next save
writes a new file and the old content stays for the operator. :func:`set_aside_files` lists what
was set aside (the status page, ``nodemanager_state_files_set_aside`` and ``nodemanager check``
show it) until the operator removes it. A file that can be neither read nor moved is never written
by this process (:func:`may_write`). Files whose loss must stop the start (the admin state, the
deployment record) refuse the start instead, naming the file.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import threading
import time
from typing import Callable, TypeVar

__all__ = ["read_state", "set_aside", "set_aside_files", "may_write", "SET_ASIDE"]

log = logging.getLogger("nodemanager.state")

T = TypeVar("T")
SET_ASIDE = ".unreadable-"
_MAX_BYTES = 512 * 1024 * 1024     # far above any state file; a larger one is not state we wrote
_held: set[str] = set()            # unreadable files that could not be moved: never written over
_lock = threading.Lock()


def read_state(path: str, parse: Callable[[str], T], what: str, *, errors: str = "strict",
               clock: Callable[[], float] = time.time) -> T | None:
    """``parse`` of the text of ``path`` (decoded as UTF-8 with ``errors``); None when there is no
    file, or when it cannot be read, decoded or parsed (then it is set aside, see the module
    docstring)."""
    if not path:
        return None
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            raise ValueError(f"over {_MAX_BYTES // (1024 * 1024)} MiB")
        with open(path, encoding="utf-8", errors=errors) as f:
            text = f.read()
        return parse(text)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as exc:
        why = f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
        set_aside(path, why, what, clock=clock)
        return None


def set_aside(path: str, why: str, what: str, *, copy: bool = False,
              clock: Callable[[], float] = time.time) -> str | None:
    """Move (``copy``: copy) ``path`` to ``<path>.unreadable-<UTC time>``, logging why; the new
    name, or None when it could not be moved (then ``path`` is never written by this process)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(clock()))
    target = f"{path}{SET_ASIDE}{stamp}"
    n = 1
    while os.path.lexists(target):
        n += 1
        target = f"{path}{SET_ASIDE}{stamp}-{n}"
    try:
        if copy:
            shutil.copy2(path, target)
        else:
            os.rename(path, target)
    except OSError as exc:
        with _lock:
            _held.add(os.path.abspath(path))
        log.error("%s %s cannot be read (%s) nor set aside (%s): it is left as it is and never "
                  "written over; the %s starts empty", what, path, why, exc.strerror or exc, what)
        return None
    log.error("%s %s cannot be read (%s): set aside as %s, kept for you to look at; the %s %s",
              what, path, why, target, what, "keeps its readable part" if copy else "starts empty")
    return target


def may_write(path: str) -> bool:
    """False for an unreadable state file that could not be set aside."""
    with _lock:
        return os.path.abspath(path) not in _held


def set_aside_files(state_dir: str) -> list[str]:
    """The set-aside files in ``state_dir``, oldest name first."""
    if not state_dir:
        return []
    return sorted(glob.glob(os.path.join(glob.escape(state_dir), f"*{SET_ASIDE}*")))
