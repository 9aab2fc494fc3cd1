"""The pure decision core: pair, classify, look up the matrix, plan. No I/O, no clock, no threads.

The daemon, the simulator, the status page and ``nodemanager plan`` all call :func:`plan`::

    from nodemanager.core import plan
    result = plan(snapshot, settings.core, matrix)       # -> nodemanager.model.Plan

The surface: :func:`plan` and :func:`stale_inputs`; pairing (:func:`pair`); the
scheduler-independent classification rules over the adapters' verdicts (:func:`classify_worker`,
:func:`is_our_reason`, :func:`is_our_drain`, :func:`is_lost`, :func:`foreign_reason`, :func:`ad_number`); billing windows and paid time
(``*_grace_state``, :func:`window_state`, :func:`paid_seconds_for`, :func:`charged_between`,
:func:`late_give_back`); clock sanity (:func:`launch_time`, :func:`date_skew`); victim costs
(:func:`estimate`, :func:`order_victims`); boot reservations (:class:`Reservation`,
:func:`settle`, :func:`to_line`, :func:`from_line`); and the ClassAd drain escalation
(:func:`make_escalation`, :func:`validate_expression`), loaded on first use since it parses
ClassAd expressions. Importing this package loads no adapter, config, metrics or actor module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodemanager.classad.values import ad_number
from nodemanager.core.billing import (Schedule, TimedValue, boot_grace_state, charged_between,
                                      idle_grace_state, late_give_back, paid_seconds_for,
                                      schedule_for, window_state)
from nodemanager.core.classify import (Classification, classify_worker, foreign_reason,
                                       is_our_drain, is_our_reason)
from nodemanager.core.clocks import date_skew, launch_time
from nodemanager.core.facts import is_lost
from nodemanager.core.pair import Pairing, pair
from nodemanager.core.plan import Escalation, plan, stale_inputs
from nodemanager.core.reservations import Reservation, from_line, settle, to_line
from nodemanager.core.victims import Estimator, estimate, order_victims

if TYPE_CHECKING:
    from nodemanager.core.escalation import make_escalation, validate_expression

__all__ = [
    "Classification",
    "Escalation",
    "Estimator",
    "Pairing",
    "Reservation",
    "Schedule",
    "TimedValue",
    "ad_number",
    "boot_grace_state",
    "charged_between",
    "classify_worker",
    "date_skew",
    "estimate",
    "foreign_reason",
    "from_line",
    "idle_grace_state",
    "is_lost",
    "is_our_drain",
    "is_our_reason",
    "late_give_back",
    "launch_time",
    "make_escalation",
    "order_victims",
    "paid_seconds_for",
    "pair",
    "plan",
    "schedule_for",
    "settle",
    "stale_inputs",
    "to_line",
    "validate_expression",
    "window_state",
]


def __getattr__(name: str) -> Any:
    if name in ("make_escalation", "validate_expression"):
        from nodemanager.core import escalation
        return getattr(escalation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
