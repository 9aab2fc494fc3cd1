"""What the controller learns from cycle to cycle, behind one seam: :class:`Memories`.

- ``idle``: break-even idle timing's boot+join times and idle periods per size (:mod:`.idle_memory`);
- ``first_idle``: when a worker reporting an idle-since in the future (a scheduler clock ahead of
  ours) was first seen so: it counts as idle since then (:mod:`.idle_memory`);
- ``arrivals``: the recent instants new jobs were seen, for ``wait_grace = arrivals`` (:mod:`.arrival_memory`);
- ``reclaim``: the VM time watched and the reclaims seen per spot size (:mod:`.reclaim_memory`);
- ``runtimes``: finished jobs' runtimes per user and job name (:mod:`.runtime_memory`);
- ``consolidation``: what consolidation's drains came to per size (:mod:`.consolidation_memory`);
- ``steering``: the placement ranks the scheduler took (:mod:`.steering`);
- ``breakers``: the actuator's capacity breakers (:mod:`.breakers`), kept here across a restart.

The controller asks :meth:`Memories.recall` for the snapshot's fields, hands each plan to
:meth:`Memories.observe` and calls :meth:`Memories.save` after each cycle. With a state dir
(:meth:`Memories.for_settings`), the runtimes, the reclaim rates and the capacity breakers are kept
in the store (:class:`nodemanager.cycle.store_keeper.StoreKeeper`; the JSON files of older releases,
``<cluster>.runtimes.json``, ``.reclaim.json``, ``.breakers.json``, are imported once), written: the breakers at the end of the cycle they changed in, the others when they
changed and :data:`SAVE_EVERY` has passed (and at a clean stop). The consolidation back-off is
kept the same way. The idle timing, the arrivals and the steering ranks start afresh with each process, and a new HA
leader starts its idle timing and reclaim counts afresh (:meth:`Memories.forget`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from nodemanager.configuration.settings import CoreSettings, Settings
from nodemanager.core.breaker import Breaker
from nodemanager.cycle.arrival_memory import ArrivalMemory
from nodemanager.cycle.breakers import Breakers
from nodemanager.cycle.consolidation_memory import ConsolidationMemory
from nodemanager.cycle.idle_memory import FirstIdle, IdleMemory
from nodemanager.configuration.kinds import in_process
from nodemanager.cycle.memory_file import FILES, Keeper
from nodemanager.cycle.reclaim_memory import ReclaimMemory
from nodemanager.cycle.runtime_memory import RuntimeMemory
from nodemanager.cycle.steering import Steering
from nodemanager.model import Plan, Snapshot, frozen_map
from nodemanager.scheduler.port import SchedulerPoll

__all__ = ["Memories", "SAVE_EVERY"]

SAVE_EVERY = 60.0   # seconds: the runtimes and reclaim rates are rewritten at most this often

_WHAT = {"runtimes": "runtime prediction's finished runtimes", "reclaim": "learned spot reclaim rates",
         "breakers": "capacity breakers"}


def _breakers_doc(records: Mapping[str, Breaker]) -> dict[str, Any]:
    return {"breakers": {size: [b.failures, b.until, b.error] for size, b in records.items()}}


def _breakers_from(doc: Any) -> dict[str, Breaker]:
    return {str(size): Breaker(failures=int(failures), until=float(until), error=str(error))
            for size, (failures, until, error) in doc["breakers"].items()}


class Memories:
    """The controller's memories (see the module doc); ``directory`` None: kept in this process only."""

    def __init__(self, directory: str | None = None, cluster: str = "", *, breakers: Breakers | None = None,
                 consolidation: ConsolidationMemory | None = None, keeper: Keeper = FILES) -> None:
        self.idle = IdleMemory()
        self.first_idle = FirstIdle()
        self.arrivals = ArrivalMemory()
        self.reclaim = ReclaimMemory()
        self.runtimes = RuntimeMemory()
        self.consolidation = consolidation if consolidation is not None else ConsolidationMemory()
        self.steering = Steering()
        self.breakers = breakers
        self.keeper = keeper      # the store's (StoreKeeper), or one JSON file each
        self.paths = ({what: os.path.join(directory, f"{cluster}.{what}.json") for what in _WHAT}
                      if directory else {})
        self._saved: dict[str, tuple[object, float]] = {}   # what -> (what was written, when)
        self._reclaimed = False   # a reclaim was seen since the reclaim rates were written

    @classmethod
    def for_settings(cls, settings: Settings, breakers: Breakers | None, now: float,
                     keeper: Keeper = FILES) -> Memories:
        """The memories of a daemon with ``settings``, read back from ``keeper`` (the store; the JSON
        files of its ``state_dir`` are imported once); kept in memory only without a ``state_dir``,
        in dry-run, or for a cloud that lives in this process (its VMs die with it)."""
        m = settings.manage
        keep = m.state_dir and not settings.dry_run and not in_process(settings.cloud.driver)
        memories = cls(m.state_dir if keep else None, settings.cloud.cluster, breakers=breakers,
                       consolidation=ConsolidationMemory.for_settings(settings, keeper), keeper=keeper)
        memories.load(now)
        return memories

    # -- the cycle --------------------------------------------------------------------------------

    def recall(self, poll: SchedulerPoll, core: CoreSettings, now: float) -> dict[str, Any]:
        """The snapshot's fields the memories give: the workers and the demand (with predicted ends and
        runtimes when runtime prediction is on), each size's idle grace, the recent arrivals (with
        ``wait_grace = arrivals``), the reclaim rates and the consolidation back-off."""
        workers, ahead = self.first_idle.workers(self.runtimes.workers(poll, core.prediction), now)
        return {"workers": workers, "scheduler_clock_ahead": ahead,
                "demand": self.runtimes.demand(poll.demand, core.prediction),
                "idle_graces": self.idle.for_plan(core),
                "arrivals": self.arrivals.observe(poll, now) if core.wait_grace == "arrivals" else (),
                "reclaim_rates": frozen_map(self.reclaim.rates(core, now)),
                "consolidation_backoff": frozen_map(self.consolidation.backoffs(now, core.consolidate_backoff))}

    def observe(self, snap: Snapshot, plan: Plan, now: float, matrix: Any,
                core: CoreSettings) -> Mapping[str, tuple[float, str]] | None:
        """Learn from one plan; the idle graces to plan with now when one changed, else None."""
        graces = self.idle.watch(snap, plan, now, matrix, core)
        self._reclaimed |= self.reclaim.observe(plan.nodes, core.sizes, now)
        if core.consolidate_backoff:   # the matrix is read only then (a harness may have none)
            self.consolidation.observe(plan, now, matrix.vocabulary.core_state, core)
        return graces

    def forget(self) -> None:
        """Start the idle timing, arrivals and reclaim counts afresh (a new HA leader), as a first
        start does."""
        self.idle, self.arrivals, self.reclaim = IdleMemory(), ArrivalMemory(), ReclaimMemory()

    # -- the state dir ----------------------------------------------------------------------------

    def save(self, now: float, force: bool = False) -> None:
        """Write what changed to the state dir: the breakers at once, the runtimes and reclaim rates
        when :data:`SAVE_EVERY` passed since they were last written (or a reclaim was seen), or
        with ``force`` (a clean stop)."""
        if not self.paths:
            return
        if self.breakers is not None:
            records = self.breakers.records()
            if self._changed("breakers", records):
                self._write("breakers", records, _breakers_doc(records), now)
        if self._due("runtimes", now, force) and self._changed("runtimes", self.runtimes.version):
            self._write("runtimes", self.runtimes.version, self.runtimes.doc(), now)
        if self._reclaimed or self._due("reclaim", now, force):
            doc = self.reclaim.doc()
            if self._changed("reclaim", doc):
                self._write("reclaim", doc, doc, now)
            self._reclaimed = False

    def load(self, now: float) -> None:
        """Read the memories back from the state dir (a missing file: empty; a bad one: one warning
        naming it, and that memory starts empty)."""
        if not self.paths:
            return
        runtimes = self.keeper.load("runtimes", self.paths["runtimes"], RuntimeMemory.from_doc, _WHAT["runtimes"])
        if runtimes is not None:
            self.runtimes = runtimes
        self._saved["runtimes"] = (self.runtimes.version, now)
        reclaim = self.keeper.load("reclaim", self.paths["reclaim"], ReclaimMemory.from_doc, _WHAT["reclaim"])
        if reclaim is not None:
            self.reclaim = reclaim
        self._saved["reclaim"] = (self.reclaim.doc(), now)
        records = self.keeper.load("breakers", self.paths["breakers"], _breakers_from, _WHAT["breakers"])
        if records and self.breakers is not None:
            self.breakers.restore(records, now)
        self._saved["breakers"] = (records or {}, now)

    def _due(self, what: str, now: float, force: bool) -> bool:
        saved = self._saved.get(what)
        return force or saved is None or now - saved[1] >= SAVE_EVERY

    def _changed(self, what: str, state: object) -> bool:
        saved = self._saved.get(what)
        return saved is None or saved[0] != state

    def _write(self, what: str, state: object, doc: Any, now: float) -> None:
        self.keeper.save(what, self.paths[what], doc, _WHAT[what])
        self._saved[what] = (state, now)   # a failed write is warned about once, tried again at the next change
