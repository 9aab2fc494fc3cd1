"""A ``[Size]``'s warm capacity schedule: ``warm_schedule`` (cron), ``warm_duration`` and
``warm_time_zone`` read into one :class:`nodemanager.core.schedule.Schedule`."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["warm_schedule"]


def warm_schedule(problem: Callable[[str, str, str], None], section: str, values: dict[str, Any]) -> None:
    """Replace the three options in ``values`` by ``warm_schedule``, the parsed schedule; what is
    wrong goes to ``problem(section, option, text)``."""
    from nodemanager.configuration.cron import parse_schedule
    cron, duration = values.pop("warm_schedule", None), values.pop("warm_duration", None)
    zone = values.pop("warm_time_zone", None)
    if cron is None:
        for option, given in (("warm_duration", duration), ("warm_time_zone", zone)):
            if given is not None:
                problem(section, option, "needs warm_schedule")
        return
    if duration is None:
        problem(section, "warm_schedule", "needs warm_duration (how long each window stays open)")
        return
    try:
        values["warm_schedule"] = parse_schedule(cron, duration, zone or None)
    except ValueError as exc:
        problem(section, "warm_schedule", str(exc))
