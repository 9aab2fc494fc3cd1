"""The ``[Budget NAME]`` sections: disruption budgets by reason and schedule
(:class:`~nodemanager.configuration.settings.DisruptionBudget`)."""

from __future__ import annotations

from typing import Any, Callable

from nodemanager.configuration.reader import Reader
from nodemanager.configuration.settings import DisruptionBudget
from nodemanager.configuration.values import parse_names
from nodemanager.configuration.cron import parse_schedule
from nodemanager.core.reasons import budget_words
from nodemanager.core.schedule import Schedule

__all__ = ["BUDGET_OPTIONS", "budget_sections"]

BUDGET_OPTIONS: dict[str, Callable[[str], Any]] = {"reasons": parse_names, "nodes": str, "schedule": str, "duration": str, "time_zone": str}


def _nodes(text: str) -> tuple[int, float | None]:
    """``3`` (nodes) or ``10%`` (of the nodes up) as (nodes, percent)."""
    t = text.strip()
    try:
        if t.endswith("%"):
            pct = float(t[:-1])
            if not 0 <= pct <= 100:
                raise ValueError
            return 0, pct
        n = int(t)
        if n < 0:
            raise ValueError
        return n, None
    except ValueError:
        raise ValueError("expected a node count like 2 or a percentage like 10%") from None


def budget_sections(r: Reader) -> tuple[DisruptionBudget, ...]:
    """Every ``[Budget NAME]`` section read, problems recorded in ``r``."""
    out = []
    for section in r.cp.sections():
        if not section.startswith("Budget "):
            continue
        values = r.typed(section, BUDGET_OPTIONS)
        reasons = frozenset(values.get("reasons", ()))
        known = budget_words()
        unknown = sorted(reasons - set(known))
        if unknown:
            r.problem(section, "reasons", f"unknown reason {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        if "nodes" not in values:
            r.problem(section, None, "missing required option nodes")
            continue
        try:
            nodes, percent = _nodes(values["nodes"])
        except ValueError as exc:
            r.problem(section, "nodes", f"{exc}, got {values['nodes']!r}")
            continue
        schedule: Schedule | None = None
        cron, duration = values.get("schedule", "").strip(), values.get("duration", "").strip()
        if bool(cron) != bool(duration):
            r.problem(section, "schedule" if cron else "duration",
                      "schedule and duration go together (a window opens at the schedule and lasts the duration)")
        elif cron:
            try:
                schedule = parse_schedule(cron, duration, values.get("time_zone", "").strip() or None)
            except ValueError as exc:
                r.problem(section, "schedule", str(exc))
        elif values.get("time_zone"):
            r.problem(section, "time_zone", "a time zone needs a schedule")
        out.append(DisruptionBudget(name=section[7:].strip(), reasons=reasons, nodes=nodes, percent=percent,
                                    schedule=schedule))
    return tuple(out)
