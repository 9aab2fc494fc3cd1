"""What the reasons that give busy nodes back share (:mod:`nodemanager.core.reasons`: consolidation,
``max_lifetime``, settings drift), and the no-thrash rules. Pure.

* :func:`relabel_candidate`: a busy worker of ours, not draining, which those reasons may relabel
  ``underused`` or ``expired`` (:func:`relabelled`: the matrix then says what it gets).
* :func:`free_cores` and :func:`last_end`: what consolidation weighs.
* :func:`too_young`: a node younger than ``min_lifetime`` is not drained or destroyed by the
  matrix (no destroy shortly after a boot).
* :func:`rebuy_hold`: no boot within ``rebuy_hold`` of a destroy (no boot shortly after
  giving back a node that could have served the same demand; with several sizes, any size),
  for jobs queued less than ``rebuy_hold``.
"""

from __future__ import annotations

from typing import Iterable

from nodemanager.core.facts import MatrixLookup
from nodemanager.core.plan_node import NodeFacts
from nodemanager.core.runtime_prediction import expected_end_times
from nodemanager.core.victims import Estimator
from nodemanager.core.classify import Classification
from nodemanager.model import BootRequest, Demand, StateTuple, Unmet, Worker
from nodemanager.core.settings import CoreSettings
from nodemanager.text import duration
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, IDLE, UNPAIRED

__all__ = ["UNDERUSED", "EXPIRED", "relabel_candidate", "relabelled", "free_cores", "busy_cores", "last_end",
           "consolidating_why", "too_young", "rebuy_hold", "hold_boots", "worker_last_end"]

UNDERUSED = "underused"
EXPIRED = "expired"


def free_cores(n: NodeFacts) -> int:
    """Cores a node offers new jobs now: an idle worker's all, a busy one's unused, a booting
    node its size's; 0 for a node that takes no jobs (draining, down, broken)."""
    w = n.worker
    if n.core_state == UNPAIRED:
        booting = n.tuple.boot_grace != BOOT_EXCEEDED and n.size is not None
        return n.size.cores if booting and n.size is not None else 0
    if w is None or w.draining or n.theirs is not None or n.core_state not in (IDLE, BUSY):
        return 0
    cpus = w.cpus or (n.size.cores if n.size else 0)
    return cpus if n.core_state == IDLE else max(cpus - w.cpus_busy, 0)


def relabel_candidate(n: NodeFacts) -> bool:
    """A busy worker of ours, not draining, that consolidation or max_lifetime may relabel."""
    w = n.worker
    return (n.tuple.worker_state == BUSY and w is not None and not w.draining
            and n.theirs is None and "drain" not in n.flights)


def busy_cores(n: NodeFacts) -> int:
    return n.worker.cpus_busy if n.worker is not None else 0


def last_end(n: NodeFacts, estimator: Estimator, now: float) -> float:
    """When the node's last job ends: its jobs' expected ends when known (predicted, else the
    scheduler's: SLURM's, or the jobs' requested times), else the victim estimate's time to go
    (seeds 000/003)."""
    return now if n.worker is None else worker_last_end(n.worker, estimator, now)


def worker_last_end(w: Worker, estimator: Estimator, now: float) -> float:
    """:func:`last_end` of a worker."""
    ends = expected_end_times(w, now)
    if ends:
        return max(max(ends), now)
    return now + estimator(w, now).time_to_go


def consolidating_why(n: NodeFacts, time_to_go: float, spare: int) -> str:
    w = n.worker
    jobs = (w.running_jobs or len(w.job_end_times)) if w is not None else 0
    ends = f"end within {duration(time_to_go)}" if time_to_go < float("inf") else "have no known end"
    return f"consolidating: its {jobs} job(s) {ends}, {spare} free cores elsewhere"


def relabelled(n: NodeFacts, state: str, why: str, matrix: MatrixLookup, by: str) -> NodeFacts | None:
    """``n`` with worker_state ``state`` (``why`` in words, before the old words; ``by`` the
    reason relabelling it) and the matrix's word on the new tuple; None when the matrix's
    vocabulary lacks ``state`` (the node stays as it was)."""
    vocabulary = matrix.vocabulary
    if state not in vocabulary.dimensions[0].values:
        return None
    st = StateTuple(worker_state=state, window=n.tuple.window, boot_grace=n.tuple.boot_grace,
                    idle_grace=n.tuple.idle_grace)
    match = matrix.lookup(st)
    return n._replace(cls=Classification(state=state, why=f"{why}; {n.cls.why}", idle_since=n.cls.idle_since,
                                          relabelled_by=by),
                      tuple=st, rule=match.rule.location, maction=match.action,
                      core_state=vocabulary.core_state(state))


def too_young(n: NodeFacts, settings: CoreSettings, now: float) -> str | None:
    """Why a drain or destroy the matrix asks for waits (the node is younger than
    ``min_lifetime``), or None."""
    age = now - n.node.launched_at
    if settings.min_lifetime <= 0 or age >= settings.min_lifetime:
        return None
    return (f"held back: up only {duration(age)}, min_lifetime {duration(settings.min_lifetime)} "
            f"(no give-back shortly after a boot)")


def rebuy_hold(recent_destroys: Iterable[float], demand: Iterable[Demand], settings: CoreSettings,
               now: float) -> str | None:
    """Why boots wait (a destroy less than ``rebuy_hold`` ago: the node could have served this
    demand), or None. Jobs queued longer than ``rebuy_hold`` (or since an unknown time) are
    never held: a stream of destroys cannot starve them."""
    if settings.rebuy_hold <= 0 or any(d.oldest_submit is None or now - d.oldest_submit > settings.rebuy_hold
                                       for d in demand if d.count > 0):
        return None
    last = max((t for t in recent_destroys if t <= now), default=None)
    if last is None or now - last > settings.rebuy_hold:
        return None
    return (f"a node was given back {duration(now - last)} ago (rebuy_hold "
            f"{duration(settings.rebuy_hold)}: no boot right after a destroy)")


def hold_boots(boots: list[BootRequest], hold: str | None, notes: list[str],
               unmet: list[Unmet]) -> list[BootRequest]:
    """No boots while ``hold`` says why (no thrash): they are unmet, with the reason."""
    if not hold or not boots:
        return boots
    unmet.extend(Unmet(f"{b.count} x {b.size}", 0, "backoff", f"boot {b.count} x {b.size} held "
                       f"back: {hold}") for b in boots)
    notes.append(f"boots held back: {hold}")
    return []
