"""The controller's memory for consolidation that backs off (``[Daemon] consolidate_backoff``): per
size, the consolidation drains of ours under way and what the ones started at the current level
came to (:class:`nodemanager.core.consolidation_backoff.Tally`), read from each plan:

- a drain starts the cycle the plan drains a node relabelled ``underused`` (consolidation's label);
- it is *completed* when the node is destroyed, gone or no longer listed, *cancelled* when the plan
  cancels it;
- each node the plan boots of a size within ``idle_grace`` of a consolidation drain of that size
  giving its node back turns that drain from completed to re-bought (lost: kept idle, as without
  consolidation, that node would have run the job); a boot while a drain is under way does not
  (placement cancels a drain whose cores fit the queued jobs before it boots);
- idle node-seconds: the nodes seen idle, times the time since the last plan.

Kept in ``[Manage] state_dir`` when given a path (a restart keeps its back-off), else in memory.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict, replace
from typing import Any, Callable, Mapping

from nodemanager.core.consolidate import UNDERUSED
from nodemanager.core.consolidation_backoff import Level, Tally, judge, margin_factor
from nodemanager.configuration.settings import CoreSettings, Settings
from nodemanager.cycle.memory_file import FILES, Keeper
from nodemanager.model import ItemKind, Plan
from nodemanager.text import duration
from policy_matrix.vocabulary import IDLE

__all__ = ["ConsolidationMemory"]

log = logging.getLogger("nodemanager.controller")


class ConsolidationMemory:
    """Per size: the consolidation drains under way and the :class:`Level` to plan with."""

    def __init__(self, path: str | None = None, keeper: Keeper = FILES) -> None:
        self.path = path
        self.keeper = keeper
        self.levels: dict[str, Level] = {}
        self._drains: dict[str, tuple[str, float]] = {}   # node id -> (size, drain started)
        self._given_back: list[tuple[str, float, float]] = []  # (size, drain started, given back)
        self._last: float | None = None
        if path:
            self._load(path)

    @classmethod
    def for_settings(cls, settings: Settings, keeper: Keeper = FILES) -> ConsolidationMemory:
        """The memory of a daemon with ``settings``: kept in its ``state_dir`` when it has one and
        ``consolidate_backoff`` is on, else in memory."""
        keep = settings.manage.state_dir and settings.core.consolidate_backoff and not settings.dry_run
        return cls(os.path.join(settings.manage.state_dir, f"{settings.cloud.cluster}.consolidation")
                   if keep else None, keeper)

    def backoffs(self, now: float, on: bool = True) -> Mapping[str, tuple[float, str]]:
        """Size -> (times the margin to keep, inf: paused; why) for each size not at its configured
        margin; none when ``on`` is False (consolidate_backoff off)."""
        if not on:
            return {}
        return {size: margin_factor(level, now) for size, level in sorted(self.levels.items()) if level.step > 0}

    def observe(self, plan: Plan, now: float, core_state: Callable[[str], str], core: CoreSettings) -> bool:
        """Take in one plan (nothing unless ``core.consolidate_backoff``); True when a size's level
        changed (one log line each); a new level is planned with from the next cycle on."""
        if not core.consolidate_backoff:
            return False
        since = {size: level.since for size, level in self.levels.items()}
        tallies: dict[str, Tally] = {size: level.tally for size, level in self.levels.items()}

        def count(size: str, started: float, **more: int) -> None:
            if started >= since.get(size, -math.inf):  # a bet placed at an earlier level is not judged here
                t = tallies.get(size, Tally())
                tallies[size] = replace(t, **{k: getattr(t, k) + v for k, v in more.items()})

        listed = set()
        for e in plan.nodes:
            listed.add(e.node_id)
            drain = self._drains.get(e.node_id)
            if drain is None:
                if e.action == ItemKind.DRAIN and e.tuple.worker_state == UNDERUSED:
                    self._drains[e.node_id] = (e.size, now)
                    if e.size not in self.levels:
                        self.levels[e.size] = Level(since=now)
                        since[e.size], tallies[e.size] = now, Tally()
            elif e.action == ItemKind.DESTROY or e.gone:
                del self._drains[e.node_id]
                count(drain[0], drain[1], completed=1)
                self._given_back.append((drain[0], drain[1], now))
            elif e.action == ItemKind.CANCEL_DRAIN:
                del self._drains[e.node_id]
                count(drain[0], drain[1], cancelled=1)
        for node_id in set(self._drains) - listed:
            size, started = self._drains.pop(node_id)
            count(size, started, completed=1)
            self._given_back.append((size, started, now))
        self._given_back = [g for g in self._given_back if now - g[2] <= core.idle_grace]
        for b in plan.boots:
            rebought = [g for g in self._given_back if g[0] == b.size][:b.count]
            for g in rebought:  # each given-back node answers for one boot
                self._given_back.remove(g)
                count(b.size, g[1], completed=-1, boots_held=1)  # that bet was lost after all
        if self._last is not None and now > self._last:
            for e in plan.nodes:
                if core_state(e.tuple.worker_state) == IDLE and e.size in tallies:
                    t = tallies[e.size]
                    tallies[e.size] = replace(t, idle_seconds=t.idle_seconds + now - self._last)
        self._last = now
        changed = False
        for size, tally in tallies.items():
            before = self.levels.get(size, Level(since=now))
            level = judge(replace(before, tally=tally), now)
            if level.step != before.step:
                changed = True
                factor, why = margin_factor(level, now)
                log.info("size %s: %s", size, why or f"consolidation back at its configured margin "
                         f"({tally.completed} node(s) given back, {tally.cancelled} drain(s) cancelled, "
                         f"{tally.boots_held} re-bought; {duration(tally.idle_seconds)} idle)")
            self.levels[size] = level
        if self.path and tallies:
            self._save(self.path)
        return changed

    def _save(self, path: str) -> None:
        data = {"levels": {s: asdict(lv) for s, lv in self.levels.items()},
                "drains": {n: list(d) for n, d in self._drains.items()}}
        if not self.keeper.save("consolidation", path, data, "consolidation back-off"):
            self.path = None

    def _load(self, path: str) -> None:
        def parse(data: Any) -> tuple[dict[str, Level], dict[str, tuple[str, float]]]:
            return ({s: Level(**{**lv, "tally": Tally(**lv["tally"]), "judged": Tally(**lv["judged"])})
                     for s, lv in data["levels"].items()},
                    {n: (str(d[0]), float(d[1])) for n, d in data["drains"].items()})

        loaded = self.keeper.load("consolidation", path, parse, "consolidation back-off (at its configured margin)")
        if loaded is not None:
            self.levels, self._drains = loaded
