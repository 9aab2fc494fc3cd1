"""When consolidation backs off (``[Daemon] consolidate_backoff``): each consolidation drain is a bet
that the node's free cores are not needed before its last job ends. The bet is won when the node is
given back (its drain completed) and no node of its size is booted soon after; it is lost when the drain is cancelled (queued jobs needed the
cores after all) and when a node of the size is booted soon after it was given back (re-bought: we paid
a new node where the one given back would have served). Pure.

Per size, a :class:`Level` says how hard consolidation tries, judged on the bets placed at that
level only (a drain started before the level was set does not count):

* after :data:`JUDGE_AFTER` outcomes, more lost than won: one step back, the margin of free
  cores kept doubled (from at least one node's cores), up to :data:`WIDEN_STEPS` doublings; beyond
  them consolidation of the size pauses, for :data:`PAUSE` at first, twice as long after each pause
  that did not help (at most :data:`MAX_PAUSE`);
* as many won as lost (or more): one step forward, back towards the configured margin;
* a pause ends by time alone, back at the widest margin, to be judged again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from nodemanager.text import duration

__all__ = ["Tally", "Level", "JUDGE_AFTER", "WIDEN_STEPS", "PAUSE", "MAX_PAUSE", "judge", "margin_factor",
           "pause_length"]

JUDGE_AFTER = 4          # outcomes at one level before it is judged: fewer are noise
WIDEN_STEPS = 2          # doublings of the margin before consolidation pauses
PAUSE = 3600.0           # the first pause
MAX_PAUSE = 86400.0      # a pause never longer: the workload of a day may differ from the last


@dataclass(frozen=True)
class Tally:
    """What the consolidation drains of one size started at the current level came to."""

    completed: int = 0        # drains that ended with the node given back and not re-bought (won)
    cancelled: int = 0        # drains cancelled: queued jobs needed the cores (lost)
    boots_held: int = 0       # drains whose node was given back, then re-bought: a boot soon after (lost)
    idle_seconds: float = 0.0  # idle node-seconds of the size seen at this level (reported)

    @property
    def won(self) -> int:
        return self.completed

    @property
    def lost(self) -> int:
        return self.cancelled + self.boots_held


@dataclass(frozen=True)
class Level:
    """How hard consolidation of one size tries: ``step`` 0 is as configured, 1..WIDEN_STEPS the
    margin doubled that often, WIDEN_STEPS + 1 paused; ``since``: when it was set; ``pauses``:
    pauses in a row that did not help (the next one lasts twice as long); ``tally``: the bets
    placed at this level; ``judged``: the tally that set it."""

    step: int = 0
    since: float = 0.0
    pauses: int = 0
    tally: Tally = field(default_factory=Tally)
    judged: Tally = field(default_factory=Tally)


def pause_length(pauses: int) -> float:
    """How long the ``pauses``-th pause in a row lasts (1: the first)."""
    return min(PAUSE * 2.0 ** max(pauses - 1, 0), MAX_PAUSE)


def judge(level: Level, now: float) -> Level:
    """The level to plan with from ``now`` on (``level`` itself while the evidence is too thin)."""
    if level.step > WIDEN_STEPS:
        if now - level.since >= pause_length(level.pauses):
            return Level(step=WIDEN_STEPS, since=now, pauses=level.pauses, judged=level.judged)
        return level
    t = level.tally
    if t.won + t.lost < JUDGE_AFTER:
        return level
    if t.lost > t.won:
        if level.step < WIDEN_STEPS:
            return Level(step=level.step + 1, since=now, pauses=level.pauses, judged=t)
        return Level(step=WIDEN_STEPS + 1, since=now, pauses=level.pauses + 1, judged=t)
    return Level(step=max(level.step - 1, 0), since=now, pauses=0, judged=t)


def margin_factor(level: Level, now: float) -> tuple[float, str]:
    """(how many times the configured margin to keep, at least one node's cores once widened; inf:
    paused) and the words a node's why and the log show ("" at step 0)."""
    t = level.judged
    seen = f"{t.completed} node(s) given back, {t.cancelled} drain(s) cancelled, {t.boots_held} re-bought"
    if level.step > WIDEN_STEPS:
        left = max(level.since + pause_length(level.pauses) - now, 0.0)
        return math.inf, f"consolidation paused for {duration(left)} more: it did not pay ({seen})"
    if level.step == 0:
        return 1.0, ""
    return 2.0 ** level.step, f"consolidation margin x{2 ** level.step}: it did not pay at a narrower one ({seen})"
