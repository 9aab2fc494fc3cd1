"""A schedule's words read into a :class:`~nodemanager.core.schedule.Schedule`: the cron
expression's five fields (``minute hour day-of-month month day-of-week`` with ``*``, numbers,
``a-b`` ranges, ``/step``, comma lists and English names such as ``jan`` and ``mon``; day-of-week
0 and 7 are Sunday), the duration and the time zone (an IANA name; by default the machine's own
zone). Every mistake is a ValueError naming the field and the value that is wrong.
"""

from __future__ import annotations

import os
from datetime import timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nodemanager.configuration.values import parse_duration
from nodemanager.core.schedule import Schedule

__all__ = ["parse_schedule", "local_zone"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# name, lowest, highest, names (index + offset is the value)
_FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS))


def local_zone() -> tuple[str, tzinfo]:
    """The machine's time zone (``TZ``, then ``/etc/localtime``), UTC when neither names one."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return name, ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            key = target.split("zoneinfo/", 1)[1]
            return key, ZoneInfo(key)
        with open("/etc/localtime", "rb") as f:
            return "local time", ZoneInfo.from_file(f, key="localtime")
    except (OSError, ValueError, ZoneInfoNotFoundError):
        return "UTC", timezone.utc


def _value(word: str, names: tuple[str, ...], what: str) -> int:
    w = word.strip().lower()
    if w.isdigit():
        return int(w)
    if w[:3] in names and len(w) >= 3:
        return names.index(w[:3]) + (1 if names is _MONTHS else 0)
    raise ValueError(f"{what}: '{word}' is not a number" + (f" or a name like {names[1]}" if names else ""))


def _field(text: str, what: str, low: int, high: int, names: tuple[str, ...]) -> tuple[frozenset[int], bool]:
    out: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ValueError(f"{what}: empty item in '{text}'")
        rng, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(f"{what}: step '{step_text}' must be a whole number above 0")
            step = int(step_text)
        if rng == "*":
            a, b = low, high
        elif "-" in rng:
            first, _, last = rng.partition("-")
            a, b = _value(first, names, what), _value(last, names, what)
        else:
            a = _value(rng, names, what)
            b = high if step_text else a
        for v in (a, b):
            if not low <= v <= high:
                raise ValueError(f"{what}: {v} is outside {low}-{high}")
        if a > b:
            raise ValueError(f"{what}: range {a}-{b} runs backwards")
        out.update(range(a, b + 1, step))
    return frozenset(out), text == "*"


def parse_schedule(cron: str, duration: float | str, tz: str | None = None) -> Schedule:
    """A :class:`Schedule` from a cron expression, a duration (seconds, or words like ``8h``) and
    an IANA zone name (None or empty: the machine's zone); ValueError saying what is wrong."""
    words = cron.split()
    if len(words) != 5:
        raise ValueError(f"schedule '{cron}': expected 5 cron fields (minute hour day-of-month month "
                         f"day-of-week), got {len(words)}")
    parsed = [_field(w, what, low, high, names) for w, (what, low, high, names) in zip(words, _FIELDS)]
    seconds = parse_duration(duration) if isinstance(duration, str) else float(duration)
    if not seconds > 0:
        raise ValueError(f"duration must be above 0 (got {duration})")
    zone: tzinfo
    if tz:
        try:
            zone_name, zone = tz, ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone '{tz}' (expected an IANA name like Europe/Paris)") from None
    else:
        zone_name, zone = local_zone()
    weekdays = frozenset(v % 7 for v in parsed[4][0])
    return Schedule(cron=" ".join(words), duration=seconds, zone=zone_name, minutes=parsed[0][0],
                    hours=parsed[1][0], days=parsed[2][0], months=parsed[3][0], weekdays=weekdays,
                    any_day=parsed[2][1], any_weekday=parsed[4][1], tz=zone)
