"""A recurring window: a 5-field cron expression (when a window opens), a duration (how long it
stays open) and an IANA time zone (the site's wall clock; by default the machine's own zone).

:func:`parse_schedule` checks the words once (ValueError naming the field that is wrong);
:func:`active` answers "is this instant inside a window" from a Unix time, :func:`next_change`
when that answer next turns. Cron fields are
``minute hour day-of-month month day-of-week`` with ``*``, numbers, ``a-b`` ranges, ``/step``,
comma lists and English names (``jan``, ``mon``); day-of-week 0 and 7 are Sunday; when both day
fields are restricted a day matching either one opens a window (as cron does). Across a daylight
saving change a start in the skipped hour opens at the same wall-clock offset after the change,
a start in the repeated hour opens once (the first time), and the duration is elapsed time. Pure.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nodemanager.configuration.values import parse_duration

__all__ = ["Schedule", "parse_schedule", "active", "last_start", "next_change", "local_zone"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# name, lowest, highest, names (index + offset is the value)
_FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()),
           ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _DAYS))


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule; build it with :func:`parse_schedule`."""

    cron: str                      # the expression as written
    duration: float                # seconds a window stays open
    zone: str                      # the time zone's name as shown to operators
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]           # days of the month, 1-31
    months: frozenset[int]
    weekdays: frozenset[int]       # 0 = Sunday ... 6 = Saturday
    any_day: bool                  # day of month was '*'
    any_weekday: bool              # day of week was '*'
    tz: tzinfo = field(compare=False, repr=False, default=timezone.utc)

    @property
    def text(self) -> str:
        """``'0 22 * * 1-5' for 8h (Europe/Paris)``: the schedule in an operator's words."""
        return f"'{self.cron}' for {_words(self.duration)} ({self.zone})"

    def day_matches(self, d: date) -> bool:
        """Whether windows open on local date ``d`` (cron's day-of-month/day-of-week rule)."""
        if d.month not in self.months:
            return False
        dom, dow = d.day in self.days, (d.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow


def _words(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


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


def _instant(d: date, hour: int, minute: int, zone: tzinfo) -> float:
    return datetime(d.year, d.month, d.day, hour, minute, tzinfo=zone).timestamp()


def last_start(schedule: Schedule, now: float) -> float | None:
    """The latest window start at or before ``now`` no more than ``duration`` ago, or None."""
    zone = schedule.tz
    today = datetime.fromtimestamp(now, zone).date()
    oldest = datetime.fromtimestamp(now - schedule.duration, zone).date() - timedelta(days=1)
    hours, minutes = sorted(schedule.hours, reverse=True), sorted(schedule.minutes, reverse=True)
    d = today
    while d >= oldest:
        if schedule.day_matches(d):
            for h in hours:
                # the whole hour starts after now: skip its minutes
                if _instant(d, h, minutes[-1], zone) > now:
                    continue
                for m in minutes:
                    t = _instant(d, h, m, zone)
                    if t <= now:
                        return t if now - t < schedule.duration else None
        d -= timedelta(days=1)
    return None


def active(schedule: Schedule, now: float) -> bool:
    """Whether ``now`` (Unix seconds) lies in a window opened at a cron match less than
    ``duration`` ago."""
    return last_start(schedule, now) is not None


# how far ahead a next window start is looked for (a 29 February schedule opens once in 4 years)
_HORIZON_DAYS = 5 * 366
# windows chained end to end before the answer is "no sooner than this end" (an always-open one)
_CHAINED = 1000


def _next_start(schedule: Schedule, now: float) -> float:
    zone = schedule.tz
    hours, minutes = sorted(schedule.hours), sorted(schedule.minutes)
    d = datetime.fromtimestamp(now, zone).date()
    for _ in range(_HORIZON_DAYS):
        if schedule.day_matches(d):
            for h in hours:
                if _instant(d, h, minutes[-1], zone) <= now:
                    continue
                for m in minutes:
                    t = _instant(d, h, m, zone)
                    if t > now:
                        return t
        d += timedelta(days=1)
    return math.inf


def next_change(schedule: Schedule, now: float) -> float:
    """The first instant after ``now`` at which :func:`active` turns: the end of the window open
    at ``now`` (windows opening inside it carry it on), else the next window start; ``inf`` when no
    window opens within five years. It may answer early, never late: an always-open schedule
    answers after a thousand windows chained."""
    start = last_start(schedule, now)
    if start is None:
        return _next_start(schedule, now)
    end = start + schedule.duration
    for _ in range(_CHAINED):
        later = last_start(schedule, end)
        if later is None:
            return end
        end = later + schedule.duration
    return end
