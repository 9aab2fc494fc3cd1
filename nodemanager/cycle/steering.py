"""Placement steering on the cycle's side: the ranks last handed to the scheduler, so that a cycle
asks for a change only when ranks change (``[Daemon] steering``; the ranks are the core's,
:func:`nodemanager.core.steering.keep_ranks`).

:meth:`Steering.request` returns a :class:`SteerRequest` with the workers whose rank changed (and
those no longer ranked, with rank None: the scheduler gets the site's own setting back), or None;
the actuator hands it to the scheduler's ``steer``. One request is out at a time: ranks count as
sent when its outcome is ``ok``; after a failure (or no outcome within :data:`PENDING_TIMEOUT`,
an actuator lost) the next cycle sends what differs from the ranks last sent (the adapters skip
what the scheduler already shows)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

from nodemanager.core.steering import keep_ranks
from nodemanager.core.victims import estimate
from nodemanager.model import Outcome, Plan, Snapshot, Worker
from nodemanager.configuration.settings import CoreSettings

__all__ = ["SteerRequest", "Steering", "PENDING_TIMEOUT"]

PENDING_TIMEOUT = 300.0

log = logging.getLogger("nodemanager.decisions")


@dataclass(frozen=True, slots=True)
class SteerRequest:
    """Workers and their new rank (1: fill first); None: no longer ranked (site's setting back)."""

    ranks: tuple[tuple[Worker, int | None], ...]

    @property
    def size(self) -> str:
        return f"{sum(r is not None for _, r in self.ranks)} ranked, {sum(r is None for _, r in self.ranks)} released"


class Steering:
    """The ranks the scheduler took (worker name -> rank), in this process."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        self._pending: tuple[float, dict[str, int]] | None = None   # (handed out at, its ranks)

    def request(self, plan: Plan, snapshot: Snapshot, settings: CoreSettings,
                estimator: Any = None) -> SteerRequest | None:
        """What to send this cycle: the changes since the last request, or None. With steering
        off, the workers still ranked are released once."""
        if self._pending is not None and plan.now - self._pending[0] < PENDING_TIMEOUT:
            return None
        self._pending = None
        if not settings.steering:
            ranks: Mapping[str, int] = {}
        else:
            prices = {s.name: (s.price, s.cores) for s in settings.sizes}
            ranks = keep_ranks(plan, snapshot, settings.victim_horizon, estimator or estimate, prices)
        if ranks == self.sent:
            return None
        workers = {w.name: w for w in snapshot.workers}
        changed: list[tuple[Worker, int | None]] = [
            (workers[name], rank) for name, rank in ranks.items() if self.sent.get(name) != rank]
        changed += [(workers[name], None) for name in self.sent if name not in ranks and name in workers]
        if not changed:
            self.sent = dict(ranks)
            return None
        self._pending = (plan.now, dict(ranks))
        req = SteerRequest(ranks=tuple(changed))
        log.debug("steering: %s (%d worker(s) ranked)", req.size, len(ranks))
        return req

    def observe(self, outcome: Outcome) -> None:
        """A steer's outcome: ``ok`` makes its ranks the ones sent."""
        if outcome.kind != "steer" or self._pending is None:
            return
        if outcome.result == "ok":
            self.sent = self._pending[1]
        self._pending = None
