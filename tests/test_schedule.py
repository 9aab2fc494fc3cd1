"""Schedules: cron + duration + time zone, with daylight saving changes, and their errors."""

import math
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from nodemanager.configuration.cron import parse_schedule
from nodemanager.core.schedule import active, last_start, next_change


def at(text, zone="Europe/Paris"):
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


def test_weeknight_window_in_the_sites_zone():
    s = parse_schedule("0 22 * * mon-fri", "8h", "Europe/Paris")
    assert s.text == "'0 22 * * mon-fri' for 8h (Europe/Paris)"
    assert active(s, at("2026-11-23T22:00"))          # Monday 22:00 opens
    assert active(s, at("2026-11-24T05:59"))          # still open the next morning
    assert not active(s, at("2026-11-24T06:00"))      # 8 h later it closes
    assert not active(s, at("2026-11-23T21:59"))
    assert active(s, at("2026-11-28T01:00"))          # Friday night's window runs into Saturday
    assert not active(s, at("2026-11-28T22:30"))      # Saturday opens none
    # the same instant is outside the window in UTC terms of a zone an hour behind
    assert not active(parse_schedule("0 22 * * mon-fri", 8 * 3600, "UTC"), at("2026-11-23T22:30"))


def test_duration_is_elapsed_time_across_the_spring_change():
    # Paris skips 02:00-03:00 on 2026-03-29: a 01:30 start for 2h ends at 04:30 local
    s = parse_schedule("30 1 * * *", "2h", "Europe/Paris")
    assert active(s, at("2026-03-29T04:29"))
    assert not active(s, at("2026-03-29T04:31"))
    # a start in the skipped hour opens at the same offset after the change (03:30 local)
    g = parse_schedule("30 2 * * *", "1h", "Europe/Paris")
    assert last_start(g, at("2026-03-29T03:45")) == at("2026-03-29T03:30")
    assert not active(g, at("2026-03-29T03:15"))


def test_a_start_in_the_repeated_autumn_hour_opens_once():
    s = parse_schedule("30 2 * * *", "20m", "Europe/Paris")
    first = at("2026-10-25T02:30")                    # fold 0: the first 02:30 (summer time)
    assert active(s, first + 600)
    assert not active(s, first + 3600 + 600)          # the second 02:30 opens nothing


def test_steps_lists_ranges_and_either_day_rule():
    s = parse_schedule("*/15 9-17 1,15 * 0", 600, "UTC")
    assert s.minutes == {0, 15, 30, 45} and s.hours == set(range(9, 18))
    assert active(s, at("2026-11-15T09:05", "UTC"))   # the 15th (a Sunday too)
    assert active(s, at("2026-11-22T09:05", "UTC"))   # a Sunday, not the 1st or 15th: either rule
    assert active(s, at("2026-12-01T09:05", "UTC"))   # the 1st, a Tuesday
    assert not active(s, at("2026-11-24T09:05", "UTC"))
    assert parse_schedule("0 0 * * 7", 60, "UTC").weekdays == {0}   # 7 is Sunday too


def test_next_change_is_when_active_turns():
    s = parse_schedule("0 8 * * mon-fri", "10h", "Europe/Paris")
    # Friday evening: closed until Monday 08:00; then open until 18:00
    assert next_change(s, at("2026-11-27T19:00")) == at("2026-11-30T08:00")
    assert next_change(s, at("2026-11-30T08:00")) == at("2026-11-30T18:00")
    assert next_change(s, at("2026-11-30T07:59:59")) == at("2026-11-30T08:00")
    # windows opening inside an open one carry it on: hourly starts for 90 minutes close once
    chained = parse_schedule("0 9-12 * * *", "90m", "UTC")
    assert next_change(chained, at("2026-11-30T09:10", "UTC")) == at("2026-11-30T13:30", "UTC")
    # across the spring change the window's end is elapsed time (01:30 + 2h = 04:30 local)
    assert next_change(parse_schedule("30 1 * * *", "2h", "Europe/Paris"), at("2026-03-29T02:00")) == at("2026-03-29T04:30")
    # a window that never opens (30 February) never changes; an always-open one answers early, not never
    assert next_change(parse_schedule("0 0 30 2 *", "1h", "UTC"), 0.0) == math.inf
    always = parse_schedule("* * * * *", "1h", "UTC")
    assert active(always, next_change(always, 0.0))


def test_a_window_longer_than_a_day():
    s = parse_schedule("0 18 * * fri", "2d", "America/New_York")
    assert active(s, at("2026-11-29T17:00", "America/New_York"))   # Sunday afternoon
    assert not active(s, at("2026-11-29T18:01", "America/New_York"))


def test_default_zone_is_the_machines(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    s = parse_schedule("0 9 * * *", "1h")
    assert s.zone == "Asia/Tokyo"
    assert active(s, at("2026-11-24T09:30", "Asia/Tokyo"))


@pytest.mark.parametrize("cron, duration, tz, words", [
    ("0 22 * *", "8h", "UTC", "expected 5 cron fields"),
    ("61 * * * *", "8h", "UTC", "minute: 61 is outside 0-59"),
    ("0 22 * * fry", "8h", "UTC", "day of week: 'fry' is not a number or a name like mon"),
    ("0 5-2 * * *", "8h", "UTC", "hour: range 5-2 runs backwards"),
    ("*/0 * * * *", "8h", "UTC", "minute: step '0'"),
    ("0 22 * * *", "0", "UTC", "duration must be above 0"),
    ("0 22 * * *", "8 hours", "UTC", "expected a duration like 300"),
    ("0 22 * * *", "8h", "Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
])
def test_errors_say_what_is_wrong(cron, duration, tz, words):
    with pytest.raises(ValueError, match=words.replace("*", r"\*")):
        parse_schedule(cron, duration, tz)
