"""Consolidation and lifetimes (issue 18): which busy nodes the matrix sees as ``underused`` or
``expired``, and which nodes are too young to give back. Pure.

* ``underused`` (``[Daemon] consolidate``): no job is queued and the nodes taking jobs have
  more free cores than ``consolidate_margin``; the busy node whose last job ends soonest
  (SLURM's job end times, else seed 000/003's estimate), then the one holding the least work, is
  relabelled, then the next, while the cores left free elsewhere still cover the margin.
  Drained gracefully (by a matrix that says so), it takes no new jobs and leaves when its last
  job ends; queued jobs that need its cores cancel the drain (placement's draining tier comes
  before new boots, so no VM is booted while it could take them).
* ``expired``: a busy node older than ``max_lifetime`` (0: never), or booted with other size or
  image settings than configured now (its ``TAG_SETTINGS`` against ``size_digests``).
* :func:`too_young`: a node younger than ``min_lifetime`` is not drained or destroyed by the
  matrix (no destroy shortly after a boot: issue 18's "no thrash").
* :func:`rebuy_hold`: no boot within ``rebuy_hold`` of a destroy (no boot shortly after
  giving back a node that could have served the same demand; with several sizes, any size),
  for jobs queued less than ``rebuy_hold``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from nodemanager.core.plan_node import NodeFacts
from nodemanager.core.victims import Estimator
from nodemanager.core.classify import Classification
from nodemanager.model import BootRequest, Demand, StateTuple, Unmet
from nodemanager.settings import CoreSettings
from nodemanager.tags import TAG_SETTINGS
from nodemanager.text import duration
from policy_matrix.vocabulary import BOOT_EXCEEDED, BUSY, IDLE, UNPAIRED

__all__ = ["UNDERUSED", "EXPIRED", "Relabel", "relabel", "apply_relabels", "lifetime_ends", "too_young",
           "rebuy_hold", "hold_boots", "free_cores"]

UNDERUSED = "underused"
EXPIRED = "expired"


class Relabel(NamedTuple):
    """A node's new worker_state and why, in words (for the status page and the decision log)."""

    state: str
    why: str


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


def _candidate(n: NodeFacts) -> bool:
    """A busy worker of ours, not draining, that consolidation or max_lifetime may relabel."""
    w = n.worker
    return (n.tuple.worker_state == BUSY and w is not None and not w.draining
            and n.theirs is None and "drain" not in n.flights)


def relabel(nodes: Sequence[NodeFacts], demand: Iterable[Demand], settings: CoreSettings,
            now: float, estimator: Estimator) -> Mapping[str, Relabel]:
    """Node id -> its new worker_state (``expired`` first, then ``underused``) and why. A node
    with a drain of ours under way is never relabelled (it is no capacity)."""
    out: dict[str, Relabel] = {}
    # consolidation only while no job is queued: with one, most cycles need no pass over the nodes
    spare_wanted = settings.consolidate and not any(d.count > 0 for d in demand)
    if not settings.size_digests and settings.max_lifetime <= 0 and not spare_wanted:
        return out
    # one pass picks the candidates: every later test needs one, and most nodes are none
    candidates = [n for n in nodes if _candidate(n)]
    if settings.size_digests:
        digests = dict(settings.size_digests)
        for n in candidates:
            tags = n.node.tags
            booted = tags.get(TAG_SETTINGS) if tags else None
            if booted and booted != digests.get(n.node.size, booted):
                out[n.node.id] = Relabel(EXPIRED, f"expired: booted with other [Size {n.node.size}] or "
                                                  f"[Cloud Create] settings than configured now; "
                                                  f"replaced as demand needs")
    if settings.max_lifetime > 0:
        for n in candidates:
            age = now - n.node.launched_at
            if age > settings.max_lifetime and n.node.id not in out:
                out[n.node.id] = Relabel(EXPIRED, f"expired: up {duration(age)}, past max_lifetime "
                                                  f"{duration(settings.max_lifetime)}; replaced as "
                                                  f"demand needs")
    if not spare_wanted:
        return out  # queued jobs may need any free core: nothing is spare
    # each candidate's free cores once; only busy nodes stay up anyway: an idle node's cores
    # would keep it from being given back
    free = {n.node.id: (n, free_cores(n)) for n in candidates if n.node.id not in out}
    spare = sum(cores for _, cores in free.values())
    ends = {node_id: _last_end(n, estimator, now) for node_id, (n, cores) in free.items() if cores > 0}
    # soonest end first (it leaves soonest), then the fewest busy cores (the least work held)
    for node_id in sorted(ends, key=lambda k: (ends[k], _busy(free[k][0]), k)):
        n, cores = free[node_id]
        if spare - cores < settings.consolidate_margin:
            continue
        spare -= cores
        out[node_id] = Relabel(UNDERUSED, _why(n, ends[node_id] - now, spare))
    return out


def _busy(n: NodeFacts) -> int:
    return n.worker.cpus_busy if n.worker is not None else 0


def _last_end(n: NodeFacts, estimator: Estimator, now: float) -> float:
    """When the node's last job ends: the scheduler's job end times (SLURM's, or the jobs'
    requested times) when known, else the victim estimate's time to go (seeds 000/003)."""
    w = n.worker
    if w is None:
        return now
    if w.job_end_times:
        return max(max(w.job_end_times), now)
    return now + estimator(w, now).time_to_go


def _why(n: NodeFacts, time_to_go: float, spare: int) -> str:
    w = n.worker
    jobs = (w.running_jobs or len(w.job_end_times)) if w is not None else 0
    ends = f"end within {duration(time_to_go)}" if time_to_go < float("inf") else "have no known end"
    return f"consolidating: its {jobs} job(s) {ends}, {spare} free cores elsewhere"


LIFETIME_ENDS = "max_lifetime ends"


def lifetime_ends(nodes: list[NodeFacts], settings: CoreSettings) -> list[NodeFacts]:
    """``nodes`` with each busy node's coming ``max_lifetime`` end as its next change by time
    alone (it is relabelled ``expired`` then), when that comes before the tuple's own."""
    if settings.max_lifetime <= 0:
        return nodes
    out = []
    for n in nodes:
        if _candidate(n):
            end = n.node.launched_at + settings.max_lifetime
            if n.next_change is None or end < n.next_change:
                n = n._replace(next_change=end, next_what=LIFETIME_ENDS)
        out.append(n)
    return out


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


def apply_relabels(nodes: list[NodeFacts], labels: Mapping[str, Relabel], matrix: Any) -> list[NodeFacts]:
    """``nodes`` with the relabelled ones given their new worker_state and the matrix's word on it
    (``matrix``: what :func:`nodemanager.core.plan` gets; a state its vocabulary lacks leaves the
    node as it was)."""
    if not labels:
        return nodes
    known = matrix.vocabulary.dimensions[0].values
    out = list(nodes)
    # the few relabelled nodes' places found in one pass; only those are rebuilt
    for i in [i for i, n in enumerate(nodes) if n.node.id in labels]:
        n = nodes[i]
        label = labels[n.node.id]
        if label.state not in known:
            continue
        st = StateTuple(label.state, n.tuple.window, n.tuple.boot_grace, n.tuple.idle_grace)
        match = matrix.lookup(st)
        out[i] = n._replace(cls=Classification(label.state, f"{label.why}; {n.cls.why}", n.cls.idle_since),
                            tuple=st, rule=match.rule.location, maction=match.action,
                            core_state=matrix.vocabulary.core_state(label.state))
    return out


def hold_boots(boots: list[BootRequest], hold: str | None, notes: list[str],
               unmet: list[Unmet]) -> list[BootRequest]:
    """No boots while ``hold`` says why (issue 18, no thrash): they are unmet, with the reason."""
    if not hold or not boots:
        return boots
    unmet.extend(Unmet(f"{b.count} x {b.size}", 0, "backoff", f"boot {b.count} x {b.size} held "
                       f"back: {hold}") for b in boots)
    notes.append(f"boots held back: {hold}")
    return []
