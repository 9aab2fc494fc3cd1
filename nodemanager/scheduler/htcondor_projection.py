"""Which job attributes the idle-job query asks for: what matching always needs, plus what the
queued jobs' Requirements name, rebuilt from the queue at every poll.

A job's Requirements may name job attributes of its own (``WantSmall``, ``MinCuda``) that the
query must return for the match to see them. Each signature may add at most
:data:`PER_SIGNATURE` of them, all signatures of one owner together at most :data:`PER_OWNER`,
and the owners take turns for the room left under :data:`MAX_ASKED`: a submitter whose jobs
name hundreds of attributes never pushes another's out, and a name no queued job asks for any
more leaves the query at the next poll.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

__all__ = ["PER_SIGNATURE", "PER_OWNER", "MAX_ASKED", "Wanted", "grant"]

PER_SIGNATURE = 32   # job attributes one signature's Requirements may add to the query
PER_OWNER = 128      # ... all signatures of one owner together
MAX_ASKED = 1_000    # attributes the query asks for at most


@dataclass(frozen=True, slots=True)
class Wanted:
    """The job attributes one signature's Requirements name (``names``, sorted) beyond what is
    always asked for, its ``owner`` and how many queued ``jobs`` it stands for."""

    owner: str
    jobs: int
    names: tuple[str, ...]


def grant(base: Mapping[str, str], wanted: Iterable[Wanted]) -> dict[str, str]:
    """Lower-case name -> name: ``base`` and the names granted to ``wanted``, within the bounds
    of the module doc. An owner's signatures with the most jobs are served first; owners take
    one name each in turn (by owner name) until :data:`MAX_ASKED` is reached."""
    by_owner: dict[str, list[Wanted]] = {}
    for w in wanted:
        by_owner.setdefault(w.owner, []).append(w)
    turns: list[list[tuple[str, str]]] = []
    for owner in sorted(by_owner):
        mine: dict[str, str] = {}
        for w in sorted(by_owner[owner], key=lambda w: (-w.jobs, w.names)):
            for name in w.names[:PER_SIGNATURE]:
                if len(mine) < PER_OWNER and name.lower() not in base:
                    mine.setdefault(name.lower(), name)
        turns.append(list(mine.items()))
    out = dict(base)
    for turn in range(max(map(len, turns), default=0)):
        for names in turns:
            if len(out) >= MAX_ASKED:
                return out
            if turn < len(names):
                out.setdefault(*names[turn])
    return out
