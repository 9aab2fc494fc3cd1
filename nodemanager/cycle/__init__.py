"""The controller cycle and the memories it keeps between cycles.

Each cycle the :class:`Controller` builds a snapshot from the pollers' inputs, asks the core for a
plan, logs its decisions and hands tasks to the :class:`Actuator`, which carries them out with
retries and rate limits. What survives between cycles: the inputs' memory (listings that miss a
node, drains in flight), the actuator's memory (backoffs, names, destroys settling), the idle
periods per size, the reservation journal of creates under way and the instance lock.

No face: the rest of the tree imports the module it needs (``nodemanager.cycle.controller``,
``nodemanager.cycle.actuate``, ...).
"""
