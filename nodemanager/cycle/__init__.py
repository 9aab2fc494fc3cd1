"""The controller cycle and the memories it keeps between cycles.

Each cycle the :class:`Controller` builds a snapshot from the pollers' inputs, asks the core for a
plan, logs its decisions and hands tasks to the :class:`Actuator`, which carries them out with
retries and rate limits. What survives between cycles: the inputs' memory (listings that miss a
node, drains in flight), the actuator's memory (backoffs, names, destroys settling), the idle
periods per size, the reservation journal of creates under way and the instance lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodemanager import lazy_names

if TYPE_CHECKING:
    from nodemanager.cycle.actuate import Actuator, Task
    from nodemanager.cycle.controller import Controller
    from nodemanager.cycle.journal import ReservationJournal
    from nodemanager.cycle.lock import InstanceLock, InstanceRunning, LockError

# each public name and the private module that holds it, loaded on first use (importing the
# package loads nothing else, so any part of the tree may import one of its modules)
_HOME = {
    "Controller": "controller",
    "Actuator": "actuate",
    "Task": "actuate",
    "ReservationJournal": "journal",
    "InstanceLock": "lock",
    "InstanceRunning": "lock",
    "LockError": "lock",
}

__all__ = ["Controller", "Actuator", "Task", "ReservationJournal", "InstanceLock", "InstanceRunning",
           "LockError"]


__getattr__ = lazy_names(__name__, _HOME)
