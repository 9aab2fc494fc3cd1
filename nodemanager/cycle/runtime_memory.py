"""The controller's memory for runtime prediction (``runtime_prediction = recent``): the recent
finished runtimes per user and job name, and per user, learned from the scheduler polls.

Each poll's ``finished`` jobs (completed since the poll before, as the adapter learns them) are
remembered; each poll's workers come back with ``predicted_end_times`` set
(:func:`nodemanager.core.runtime_prediction.predict_ends`). Bounded: :data:`KEEP` runtimes per
key, the :data:`MAX_KEYS` keys used last. :meth:`RuntimeMemory.doc` / :meth:`RuntimeMemory.from_doc`
are what :class:`nodemanager.cycle.memories.Memories` keeps in the state dir.

The estimate each job got the first time it was seen running (a job never seen: the one it
would have got), and its limit, are compared with its runtime when it finishes:
:meth:`RuntimeMemory.accuracy` is what replays print.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import replace
from typing import Any, Iterable, Sequence

from nodemanager.core.demand_runtime import predicted_demand
from nodemanager.core.runtime_prediction import Accuracy, accuracy, predict_ends, predict_runtime
from nodemanager.model import Demand, FinishedJob, RunningJob, Worker
from nodemanager.scheduler.port import SchedulerPoll

__all__ = ["RuntimeMemory", "KEEP", "MAX_KEYS"]

KEEP = 2
MAX_KEYS = 100_000
MAX_RATIOS = 100_000

_Key = tuple[str, str | None]   # (user, job name), None: any name of that user


class RuntimeMemory:
    """Recent finished runtimes per (user, name) and per user, and the running jobs last seen."""

    def __init__(self, keep: int = KEEP, max_keys: int = MAX_KEYS) -> None:
        self.keep, self.max_keys = keep, max_keys
        self._runtimes: OrderedDict[_Key, deque[float]] = OrderedDict()
        self._running: dict[str, tuple[RunningJob, float | None]] = {}   # id -> (job, first estimate)
        self._seen: dict[str, tuple[Worker, Worker]] = {}   # name -> (worker polled, worker out)
        self._ratios: deque[tuple[float, float]] = deque(maxlen=MAX_RATIOS)  # (predicted, limit) / actual
        self.version = 0   # counts the runtimes recorded (the state dir's copy is rewritten when it moved)

    def recent(self, user: str, name: str | None) -> Sequence[float]:
        """The remembered runtimes of ``user``'s jobs named ``name`` (None: of any name), oldest first."""
        return tuple(self._runtimes.get((user, name), ()))

    def record(self, user: str, name: str | None, runtime: float) -> None:
        """Remember one finished job's runtime, under its name and under its user."""
        self.version += 1
        for key in ((user, name), (user, None)) if name is not None else ((user, None),):
            runs = self._runtimes.pop(key, None) or deque(maxlen=self.keep)
            runs.append(runtime)
            self._runtimes[key] = runs
        while len(self._runtimes) > self.max_keys:
            self._runtimes.popitem(last=False)

    def workers(self, poll: SchedulerPoll, mode: str) -> tuple[Worker, ...]:
        """``poll``'s workers as the core sees them: with predicted ends when ``mode`` (the
        ``runtime_prediction`` option) is ``recent``, else as polled."""
        if mode == "off":
            return poll.workers
        self.learn(poll.finished)
        return self.observe(poll.workers)

    def demand(self, demand: tuple[Demand, ...], mode: str) -> tuple[Demand, ...]:
        """The queued demand as the size choice prices it: with predicted runtimes when ``mode``
        is ``recent`` (:func:`nodemanager.core.demand_runtime.predicted_demand`), else as polled.
        Reads what :meth:`workers` learned from the same poll, so call it after."""
        return demand if mode == "off" else predicted_demand(demand, self._recent_of)

    def learn(self, finished: Iterable[FinishedJob]) -> None:
        """Remember completed jobs, and how their estimates compared with their runtimes."""
        for done in finished:
            job = done.job
            runtime = max(done.end - job.start, 0.0)
            seen = self._running.pop(job.job_id, None)
            first = seen[1] if seen is not None else predict_runtime(self._recent(job), job.limit)
            if runtime > 0 and first is not None and job.limit:
                self._ratios.append((first / runtime, job.limit / runtime))
            self.record(job.user, job.name, runtime)

    def observe(self, workers: Sequence[Worker]) -> tuple[Worker, ...]:
        """One poll's workers with their jobs' predicted ends. A worker record seen before comes
        back as the same object."""
        out: list[Worker] = []
        changed = len(workers) != len(self._seen)
        seen: dict[str, tuple[Worker, Worker]] = {}
        for w in workers:
            before = self._seen.get(w.name)
            if before is not None and before[0] is w:
                new = before[1]
            elif before is not None and before[0].jobs == w.jobs:
                ends = before[1].predicted_end_times
                new = replace(w, predicted_end_times=ends) if ends else w
            else:
                changed = True
                for job in w.jobs:
                    if job.job_id not in self._running:
                        self._running[job.job_id] = (job, predict_runtime(self._recent(job), job.limit))
                ends = predict_ends(w, self._recent_of)
                new = replace(w, predicted_end_times=ends) if ends else w
            seen[w.name] = (w, new)
            out.append(new)
        if changed:  # jobs killed or gone unseen: their first estimates are no longer needed
            running = {j.job_id for w, _ in seen.values() for j in w.jobs}
            for job_id in [k for k in self._running if k not in running]:
                del self._running[job_id]
        self._seen = seen
        return tuple(out)

    def _recent_of(self, user: str, name: str | None) -> Sequence[float]:
        runs = self._runtimes.get((user, name))
        return tuple(runs) if runs else ()

    def _recent(self, job: RunningJob) -> Sequence[float]:
        same = self._recent_of(job.user, job.name) if job.name is not None else ()
        return same or self._recent_of(job.user, None)

    def accuracy(self) -> tuple[Accuracy, Accuracy]:
        """How the first prediction of each finished job with a limit compared with its runtime,
        and how its limit (the requested time) did."""
        return (accuracy(p for p, _ in self._ratios), accuracy(r for _, r in self._ratios))

    # -- the state dir (:mod:`nodemanager.cycle.memories` writes the file) ------------------------

    def doc(self) -> dict[str, Any]:
        """The runtimes as JSON-ready data (the running jobs and the accuracy figures are not kept)."""
        return {"runtimes": [[user, name, list(runs)] for (user, name), runs in self._runtimes.items()]}

    @classmethod
    def from_doc(cls, doc: Any, keep: int = KEEP, max_keys: int = MAX_KEYS) -> RuntimeMemory:
        """The memory :meth:`doc` gave; ValueError (or KeyError, TypeError) when malformed."""
        memory = cls(keep, max_keys)
        for user, name, runs in doc["runtimes"]:
            if not isinstance(user, str) or not (name is None or isinstance(name, str)):
                raise ValueError(f"bad key {user!r}, {name!r}")
            memory._runtimes[(user, name)] = deque((float(r) for r in runs), maxlen=keep)
        while len(memory._runtimes) > max_keys:
            memory._runtimes.popitem(last=False)
        return memory
