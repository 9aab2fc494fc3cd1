"""The pure decision core: pair, classify, look up the matrix, plan. No I/O, no clock, no threads.

The daemon, the simulator, the status page and ``nodemanager plan`` all call :func:`plan`::

    from nodemanager.core import plan
    result = plan(snapshot, settings.core, matrix)       # -> nodemanager.model.Plan

``nodemanager.core.escalation`` (the ClassAd-based drain escalation) is imported on its own: it
needs the HTCondor bindings.
"""

from nodemanager.core.billing import (TimedValue, Schedule, boot_grace_state, idle_grace_state,
                                      schedule_for, window_state)
from nodemanager.core.classify import (Classification, classify_htcondor, classify_slurm,
                                       classify_worker, htcondor_worker_fields)
from nodemanager.core.pair import Pairing, pair
from nodemanager.core.plan import Escalation, plan, stale_inputs
from nodemanager.core.victims import Estimator, estimate, order_victims

__all__ = [
    "Classification",
    "Escalation",
    "Estimator",
    "Pairing",
    "Schedule",
    "TimedValue",
    "boot_grace_state",
    "classify_htcondor",
    "classify_slurm",
    "classify_worker",
    "estimate",
    "htcondor_worker_fields",
    "idle_grace_state",
    "order_victims",
    "pair",
    "plan",
    "schedule_for",
    "stale_inputs",
    "window_state",
]
