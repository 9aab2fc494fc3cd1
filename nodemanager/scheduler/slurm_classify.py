"""SLURM node states to the matrix's ``worker_state`` (the Arvados policy matrix page):
the SLURM adapter's classifier.

The table works on the ``sinfo %t`` name as (word, suffix marks): from a ``sinfo --json`` record
via :func:`~nodemanager.scheduler.slurm_state.compact_state` (:func:`classify_node`), or from the
text a snapshot file gives (:func:`classify_slurm`, long names accepted too). As the Arvados page says:

==============================================  ============  =====================================
raw state                                       worker_state  why
==============================================  ============  =====================================
``idle``                                        idle
``alloc`` ``mix`` ``comp`` ``drng`` ``maint``   busy          jobs run (or drain with jobs left)
``drain`` ``down`` ``error``/``err`` ``fail``   down
``unk``/``unknown``, ``inval``, ``pow_dn``      down          cannot run jobs
``failg``                                       busy          failing but jobs still run
``resv`` ``plnd`` ``blocked`` ``npc``           busy          reserved or planned: not ours to take
``boot`` ``futr`` ``pow_up``                    unpaired      starting: boot grace protects it
anything else                                   down          (busy if the worker reports jobs)
==============================================  ============  =====================================

Suffix flags (checked first, in this order of precedence):

* ``#`` powering up / being configured, ``^`` reboot issued: *starting* → ``unpaired``, so only an
  exceeded boot grace can get it shut down (a starting node is never classed ``down``).
* ``*`` not responding: ``down`` (the Arvados page: any state with a trailing ``*``).
* ``~`` powered off, ``%`` powering down, ``!`` pending power down: ``down`` (cannot run jobs).
* ``$`` in a maintenance reservation, ``-`` planned by the backfill scheduler: ``busy`` (the
  operators or the scheduler have a use for it).
* ``@`` pending reboot, ``+`` and unknown flags: the base state decides.

An idle node is idle since its ``state_since`` (0: unknown). A node in a drain state (or with the
DRAIN flag) whose reason lacks our prefix is drained by someone else (``foreign_drain``). A down
node's words end with SLURM's reason for it, when it gives one.
"""

from __future__ import annotations

import functools
from typing import Mapping

from nodemanager.core import foreign_reason
from nodemanager.core.reclaim import RECLAIM_REASON, RECLAIMED, notice_words
from nodemanager.model import Classified, Worker
from nodemanager.scheduler.slurm_json import SlurmNode
from nodemanager.scheduler.slurm_state import compact_state
from policy_matrix.vocabulary import BUSY, DOWN, IDLE, UNPAIRED

__all__ = ["SLURM_FLAGS", "classify_slurm", "classify_node", "classify_slurm_worker"]

_SLURM_BASE: dict[str, tuple[str, str]] = {}


def _base(names: str, state: str, why: str) -> None:
    for n in names.split():
        _SLURM_BASE[n] = (state, why)


_base("idle", IDLE, "idle")
_base("alloc allocated mix mixed comp completing", BUSY, "running jobs")
_base("drng draining", BUSY, "draining, jobs still running")
_base("maint", BUSY, "in maintenance")
_base("drain drained", DOWN, "drained")
_base("down", DOWN, "down")
_base("err error", DOWN, "in error")
_base("fail", DOWN, "failed")
_base("unk unknown", DOWN, "state unknown")
_base("inval invalid", DOWN, "invalid registration")
_base("pow_dn powered_down powering_down", DOWN, "powered down")
_base("failg failing", BUSY, "failing, jobs still running")
_base("resv reserved", BUSY, "reserved")
_base("plnd planned", BUSY, "planned for a job")
_base("blocked", BUSY, "blocked by the scheduler")
_base("npc perfctrs", BUSY, "in use for performance counters")
_base("boot booting futr future pow_up powering_up", UNPAIRED, "starting")

SLURM_FLAGS: Mapping[str, str] = {
    "#": "powering up",
    "^": "reboot issued",
    "*": "not responding",
    "~": "powered off",
    "%": "powering down",
    "!": "pending power down",
    "$": "in a maintenance reservation",
    "-": "planned by the backfill scheduler",
    "@": "pending reboot",
    "+": "",
}
_STARTING_FLAGS = "#^"
_DOWN_FLAGS = "*~%!"
_KEEP_FLAGS = "$-"
_ALL_FLAGS = "".join(SLURM_FLAGS)
# a hand-written snapshot may give a SLURM drain state and reason without "draining": they say it
_DRAIN_WORDS = frozenset(("drain", "drained", "drng", "draining"))


def classify_slurm(state: str | None, *, running_jobs: int = 0) -> Classified:
    """The worker_state of a SLURM node whose ``sinfo %t`` state is ``state`` (see module doc).

    ``running_jobs`` only matters for a state this table does not know: with jobs it is busy.
    """
    return _table(*_split(state), running_jobs > 0)


def classify_node(node: SlurmNode, *, running_jobs: int, state_since: float) -> Classified:
    """The classification of a ``sinfo --json`` node record (JSON state and flags, no text)."""
    word, marks = compact_state(node.base_state, node.flags)
    if word not in _SLURM_BASE:  # an unknown JSON state: judged as the text it prints
        word, marks = _split(word + marks)
    return _verdict(_table(word, marks, running_jobs > 0), word, state_since, node.draining,
                    node.reason or None)


def classify_slurm_worker(worker: Worker, *, drain_states: bool = True) -> Classified:
    """The classification of a SLURM worker from its raw fields (``state`` as ``sinfo %t``).

    ``drain_states``: a drain state with a reason counts as draining even without ``draining``.
    """
    word, marks = _split(worker.state)
    return _verdict(_table(word, marks, worker.running_jobs > 0), word if drain_states else "",
                    worker.state_since, worker.draining, worker.drain_reason)


def _split(state: str | None) -> tuple[str, str]:
    raw = (state or "").strip().lower()
    word = raw.rstrip(_ALL_FLAGS)
    return word, raw[len(word):]


def _verdict(c: Classified, word: str, state_since: float, draining: bool,
             reason: str | None) -> Classified:
    if reason and reason.startswith(RECLAIM_REASON):
        return _reclaim_verdict(c, reason)
    theirs = foreign_reason(draining or bool(reason and word in _DRAIN_WORDS), reason)
    if c.state == IDLE or theirs is not None:
        return Classified(c.state, c.why, state_since if c.state == IDLE else None, theirs)
    if c.state == DOWN and reason:  # SLURM's own words for it ("Not responding", an admin's DOWN)
        return Classified(DOWN, f"{c.why}; slurm reason: {reason}")
    return c


def _reclaim_verdict(c: Classified, reason: str) -> Classified:
    """A node the worker relay drained for a spot reclaim notice (reason ``spot-reclaim EPOCH``):
    ``reclaimed`` while jobs may still run, ``down`` once drained (nothing runs: destroy it)."""
    try:
        deadline: float | None = float(reason[len(RECLAIM_REASON):].split()[0])
    except (IndexError, ValueError):
        deadline = None
    words = notice_words(deadline)
    if c.state == DOWN:
        return Classified(DOWN, f"{c.why}; {words}")
    return Classified(RECLAIMED, f"{c.why}; {words}")


@functools.lru_cache(maxsize=1024)
def _table(word: str, marks: str, has_jobs: bool) -> Classified:
    raw = word + marks
    for group, result in ((_STARTING_FLAGS, UNPAIRED), (_DOWN_FLAGS, DOWN), (_KEEP_FLAGS, BUSY)):
        for f in marks:
            if f in group:
                return Classified(result, f"slurm state {raw!r}: {SLURM_FLAGS[f]}")
    known = _SLURM_BASE.get(word)
    if known is not None:
        return Classified(known[0], f"slurm state {raw!r}: {known[1]}")
    if has_jobs:
        return Classified(BUSY, f"slurm state {raw!r} not recognised; it runs jobs")
    return Classified(DOWN, f"slurm state {raw!r} not recognised")
