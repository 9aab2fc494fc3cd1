"""The daemon's actors (Pykka): a fixed, small set whatever the number of nodes.

See :mod:`nodemanager.actors.system` (supervision, watchdog, fatal errors),
:mod:`nodemanager.actors.roles` (pollers, controller, actuator pool) and
:mod:`nodemanager.actors.clock` (injected time: ``ManualClock`` for tests, ``RealClock``).
"""
