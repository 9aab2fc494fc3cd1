"""Drain escalation as ClassAd expressions (soft eviction first, hard kill if it
takes too long: after HTCondor's eviction policy RFC).

``[Drain] escalate_quick`` / ``escalate_fast`` are ClassAd expressions evaluated by ``classad2``
against the draining node's ad at the controller's (injected) time, e.g.::

    escalate_quick = (time() - LastDrainStartTime) > 2 * 3600
    escalate_fast  = (time() - LastDrainStartTime) > 4 * 3600 || ExpectedMachineGracefulDrainingBadput < 600

* HTCondor workers: the ad is the startd's partitionable-slot ad (every attribute the adapter
  projects: ``ExpectedMachine*``, ``NumDynamicSlots``, ``LastDrainStartTime``, pilot attributes...).
* Other workers (SLURM): an ad built from the worker's fields with HTCondor's names (``Name``,
  ``Machine``, ``State``, ``Cpus``, ``TotalCpus``, ``Memory``, ``NumDynamicSlots`` = running jobs,
  ``Draining``, ``DrainReason``, ``EnteredCurrentState``, ``LastHeardFrom``, ``DaemonStartTime``),
  plus the worker ad's plain scalar values.
* Always: ``LastDrainStartTime`` falls back to when our drain began (the in-flight record), and
  ``DrainElapsed`` is the seconds since then.

Only a real ``True`` escalates: Undefined and Error results (truthy in Python) count as false, so a
typo in an attribute name never kills jobs. ``fast`` is checked before ``quick``. ``deadline`` (if
set) escalates to fast once the drain is that old. Nothing escalates when there is nothing left to
kill (no running jobs, or every HTCondor job already being vacated/killed as harshly as asked).
"""

from __future__ import annotations

from typing import Any, Callable

from nodemanager.classad.expressions import evaluate, is_true, parse
from nodemanager.model import InFlight, Worker
from nodemanager.core.settings import DrainSettings

__all__ = ["validate_expression", "make_escalation", "escalation_ad", "Escalation"]

Escalation = Callable[[Worker, InFlight, float], "str | None"]


def validate_expression(text: str) -> None:
    """Raise ValueError (with the expression text) unless ``text`` is a usable boolean ClassAd
    expression: it must parse, and evaluated without any attributes it must not be an error
    (unknown function, bad operation) or a string/list/record/number constant."""
    import classad2

    tree = parse(text)
    try:
        probe = tree.eval(classad2.ClassAd())
    except Exception as exc:  # evaluation of a parsed tree should not raise; report it if it does
        raise ValueError(f"ClassAd expression {text!r} cannot be evaluated: {exc}") from None
    if probe is classad2.Value.Error:
        raise ValueError(f"ClassAd expression {text!r} evaluates to an error (unknown function or "
                         "an operation on the wrong types)")
    if isinstance(probe, classad2.Value):   # Undefined: it needs the node's attributes, fine
        return
    if isinstance(probe, (str, list, classad2.ClassAd)) or (
            isinstance(probe, (int, float)) and not isinstance(probe, bool)):
        raise ValueError(f"ClassAd expression {text!r} is a constant {type(probe).__name__}, "
                         "not a condition (true/false)")


_SCALARS = (str, int, float, bool)


def escalation_ad(worker: Worker, flight: InFlight, now: float) -> dict[str, Any]:
    """The ad the escalation expressions see for ``worker`` draining since ``flight.since``."""
    if worker.native_ad and worker.ad:
        ad = {k: v for k, v in worker.ad.items() if v is not None}
    else:
        ad = {k: v for k, v in worker.ad.items() if isinstance(v, _SCALARS)}
        ad.update({
            "Name": worker.name, "Machine": worker.name, "State": worker.state or "",
            "Cpus": worker.cpus - worker.cpus_busy, "TotalCpus": worker.cpus,
            "TotalSlotCpus": worker.cpus, "Memory": worker.ram_mb, "NumDynamicSlots": worker.running_jobs,
            "RunningJobs": worker.running_jobs, "Draining": worker.draining,
            "EnteredCurrentState": worker.state_since, "LastHeardFrom": worker.last_heard,
        })
        if worker.drain_reason is not None:
            ad["DrainReason"] = worker.drain_reason
        if worker.registered_at is not None:
            ad["DaemonStartTime"] = worker.registered_at
    last = ad.get("LastDrainStartTime")
    if not isinstance(last, (int, float)) or last < flight.since - 5:   # absent, or an older drain's
        ad["LastDrainStartTime"] = flight.since
    ad["DrainElapsed"] = now - flight.since
    return ad


def _nothing_left(worker: Worker, schedule: str) -> bool:
    """True if escalating to ``schedule`` would kill nothing (no jobs, or all already evicted so)."""
    if worker.running_jobs <= 0 and worker.cpus_busy <= 0:
        return True
    acts = worker.ad.get("ChildActivity") if worker.native_ad else None
    if isinstance(acts, (list, tuple)) and acts:
        done = ("Killing",) if schedule == "fast" else ("Vacating", "Killing")
        return all(a in done for a in acts)
    return False


def make_escalation(drain: DrainSettings) -> Escalation:
    """The core's escalation callback for ``[Drain]``: ``(worker, in-flight drain, now)`` →
    ``"fast"``, ``"quick"`` or None. Raises ValueError (naming the option and showing the text)
    for a bad expression, so a config error is reported at load time."""
    compiled: list[tuple[str, str]] = []
    for schedule, option, text in (("fast", "escalate_fast", drain.escalate_fast),
                                   ("quick", "escalate_quick", drain.escalate_quick)):
        text = (text or "").strip()
        if not text:
            continue
        try:
            validate_expression(text)
        except ValueError as exc:
            raise ValueError(f"[Drain] {option}: {exc}") from None
        compiled.append((schedule, text))
    deadline = float(drain.deadline or 0.0)

    def escalation(worker: Worker, flight: InFlight, now: float) -> str | None:
        if flight.action != "drain":
            return None
        if deadline > 0 and now - flight.since >= deadline and not _nothing_left(worker, "fast"):
            return "fast"
        if not compiled:
            return None
        ad = escalation_ad(worker, flight, now)
        for schedule, text in compiled:
            if _nothing_left(worker, schedule):
                continue
            if is_true(evaluate(text, ad, now)):
                return schedule
        return None

    return escalation
