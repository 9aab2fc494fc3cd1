"""What giving a node back costs, and which nodes to give back first (seeds 000 and 003).

:func:`estimate` reads, in this order of preference:

1. The pilot's ``.pilot.ad`` attributes (Sfiligoi et al. on draining waste; in the startd ad):
   ``LAST_JOB_START`` (e), ``FIRST_EXP_JOB_END`` (h), ``LAST_EXP_JOB_END`` (g, good faith; else
   ``LAST_MAX_JOB_END``, the guaranteed maximum), ``USED_FRACTION1k`` (d×1024),
   ``ADD_UNCOM_TIME1k`` (f×1024), ``ADD_FINAL_EXP_WASTE1k`` (i×1024), ``PRIORITY_FACTOR`` (l) and
   ``CAN_POSTPONE_LAST_JOB`` (m). With ``num_cores`` the node's cores::

       j = (now - e) * d          (1)   k = (h - now) * (1 - d)   (2)
       a = g - now                (3)   b = num_cores * (i + k)   (4)
       c = num_cores * (f + j)    (5)

   time_to_go = a, drain_waste = b, kill_waste = c (negative terms are clamped to 0).
   The heartbeat is the ad attribute ``PilotAdUpdated`` (epoch of the ``.pilot.ad`` file's last
   modification): older than an hour (:data:`PILOT_HEARTBEAT`) means the pilot is stuck.
   ``CAN_POSTPONE_LAST_JOB = False`` (the pilot is already winding down) is preferred on ties.
2. The running jobs' predicted ends (``Worker.predicted_end_times``, runtime prediction on):
   computed as in 4 from those ends.
3. HTCondor's own estimates: time_to_go from ``ExpectedMachineGracefulDrainingCompletion``,
   drain_waste ``ExpectedMachineGracefulDrainingBadput``, kill_waste
   ``ExpectedMachineQuickDrainingBadput`` (the draining design calls it ``...FastDrainingBadput``; both read).
4. SLURM job end times (``Worker.job_end_times``): time_to_go until the last job ends; drain waste
   is the cores left idle while waiting for it (jobs assumed to share the busy cores evenly); kill
   waste is the busy cores times the time since the node entered its state (a lower bound).
5. Nothing known: an idle node costs nothing; a busy one is assumed to go away never (infinite
   time) with kill waste as in 4.

:func:`order_victims`: stuck nodes first; then nodes that can go within the horizon, least drain
waste first; then the rest, least kill waste first. Ties: lower priority, winding down, the
size that wastes most kept (dearer, then more cores: with several sizes idle the big one goes
first), sooner, then node id.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

from nodemanager.classad.values import ad_number
from nodemanager.core.runtime_prediction import expected_end_times
from nodemanager.model import VictimCost, Worker

__all__ = ["estimate", "order_victims", "Estimator", "PILOT_HEARTBEAT", "PILOT_HEARTBEAT_ATTR"]

Estimator = Callable[[Worker, float], VictimCost]

PILOT_HEARTBEAT = 3600.0
PILOT_HEARTBEAT_ATTR = "PilotAdUpdated"
_PILOT_ATTRS = ("LAST_JOB_START", "FIRST_EXP_JOB_END", "LAST_EXP_JOB_END", "LAST_MAX_JOB_END",
                "USED_FRACTION1k", "ADD_UNCOM_TIME1k", "ADD_FINAL_EXP_WASTE1k")


def _cores(worker: Worker) -> float:
    return float(worker.cpus or worker.cpus_busy or 1)


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return None


def _pilot(ad: Mapping[str, Any], cores: float, now: float) -> VictimCost:
    n = {k: ad_number(ad, k) for k in _PILOT_ATTRS}
    d = min(max((n["USED_FRACTION1k"] or 0.0) / 1024.0, 0.0), 1.0)
    e = n["LAST_JOB_START"] if n["LAST_JOB_START"] is not None else now
    f = (n["ADD_UNCOM_TIME1k"] or 0.0) / 1024.0
    g = n["LAST_EXP_JOB_END"] if n["LAST_EXP_JOB_END"] is not None else n["LAST_MAX_JOB_END"]
    h = n["FIRST_EXP_JOB_END"] if n["FIRST_EXP_JOB_END"] is not None else now
    i = (n["ADD_FINAL_EXP_WASTE1k"] or 0.0) / 1024.0
    j = max(now - e, 0.0) * d                                   # (1)
    k = max(h - now, 0.0) * (1.0 - d)                           # (2)
    a = max(g - now, 0.0) if g is not None else math.inf        # (3)
    b = cores * (i + k)                                         # (4)
    c = cores * (f + j)                                         # (5)
    beat = ad_number(ad, PILOT_HEARTBEAT_ATTR)
    stuck = beat is not None and now - beat > PILOT_HEARTBEAT
    postpone = _bool(ad.get("CAN_POSTPONE_LAST_JOB"))
    return VictimCost(time_to_go=a, drain_waste=b, kill_waste=c, stuck=stuck,
                      priority=ad_number(ad, "PRIORITY_FACTOR") or 0.0,
                      winding_down=postpone is False)


def _kill_lower_bound(worker: Worker, now: float) -> float:
    if worker.state_since <= 0:
        return 0.0
    return float(worker.cpus_busy or (_cores(worker) if worker.running_jobs else 0)) * max(
        now - worker.state_since, 0.0)


def _from_ends(worker: Worker, job_ends: Iterable[float], cores: float, now: float) -> VictimCost:
    ends = sorted(max(t, now) for t in job_ends)
    last = ends[-1]
    busy = float(worker.cpus_busy or cores)
    per_job = busy / len(ends)
    idle_cores = max(cores - busy, 0.0)
    waste = sum((last - t) * per_job for t in ends) + idle_cores * (last - now)
    return VictimCost(time_to_go=last - now, drain_waste=waste, kill_waste=_kill_lower_bound(worker, now))


def estimate(worker: Worker, now: float) -> VictimCost:
    """The default estimator: see the module docstring for the sources and formulas."""
    ad = worker.ad
    cores = _cores(worker)
    if ad and any(k in ad for k in _PILOT_ATTRS):
        return _pilot(ad, cores, now)
    if worker.predicted_end_times:  # our own good-faith estimate beats the retirement-based one
        return _from_ends(worker, expected_end_times(worker, now), cores, now)
    if ad and ("ExpectedMachineGracefulDrainingCompletion" in ad
               or "ExpectedMachineGracefulDrainingBadput" in ad):
        done = ad_number(ad, "ExpectedMachineGracefulDrainingCompletion")
        if done is None:
            done = ad_number(ad, "ExpectedMachineQuickDrainingCompletion")
        kill = ad_number(ad, "ExpectedMachineQuickDrainingBadput")
        if kill is None:
            kill = ad_number(ad, "ExpectedMachineFastDrainingBadput")
        return VictimCost(time_to_go=max((done if done is not None else now) - now, 0.0),
                          drain_waste=ad_number(ad, "ExpectedMachineGracefulDrainingBadput") or 0.0,
                          kill_waste=kill or 0.0)
    if worker.job_end_times:
        return _from_ends(worker, worker.job_end_times, cores, now)
    if worker.running_jobs > 0 or worker.cpus_busy > 0:
        return VictimCost(time_to_go=math.inf, drain_waste=0.0,
                          kill_waste=_kill_lower_bound(worker, now))
    return VictimCost()


def order_victims(costs: Iterable[tuple[str, VictimCost]], horizon: float,
                  keeping: Mapping[str, tuple[float, int]] | None = None) -> list[str]:
    """Node ids, best victim first (see the module docstring). ``keeping``: node id -> (price
    per hour, cores) of its size, what keeping the node costs (default: all alike)."""
    kept = keeping or {}

    def key(item: tuple[str, VictimCost]) -> tuple[int, float, float, bool, float, int, float, str]:
        node_id, c = item
        price, cores = kept.get(node_id, (0.0, 0))
        if c.stuck:
            return (0, 0.0, c.priority, not c.winding_down, -price, -cores, c.time_to_go, node_id)
        if c.time_to_go <= horizon:
            return (1, c.drain_waste, c.priority, not c.winding_down, -price, -cores, c.time_to_go,
                    node_id)
        return (2, c.kill_waste, c.priority, not c.winding_down, -price, -cores, c.time_to_go, node_id)
    return [node_id for node_id, _ in sorted(costs, key=key)]
