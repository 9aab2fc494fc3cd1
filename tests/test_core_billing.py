"""Billing windows at and around their edges, and grace boundaries."""

import pytest

from nodemanager.core import boot_grace_state, idle_grace_state, window_state
from nodemanager.model import Size

L = 1_000_000.0  # launch time


def size(**kw):
    return Size(name="s", cores=4, ram_mb=8000, **kw)


ARVADS = size(shutdown_windows=(54, 5, 1))


@pytest.mark.parametrize("minute, expected", [
    (0, "closed"), (53.99, "closed"), (54, "closed"), (54 + 1 / 60, "open"), (58.99, "open"),
    (59, "closed"), (60, "closed"), (113, "closed"), (114, "closed"), (114.5, "open"),
    (119, "closed"), (174.5, "open"),
])
def test_arvados_windows_strict(minute, expected):
    assert window_state(ARVADS, L, L + minute * 60).value == expected


def test_arvados_next_changes():
    assert window_state(ARVADS, L, L + 10 * 60).next_change == L + 54 * 60
    assert window_state(ARVADS, L, L + 55 * 60).next_change == L + 59 * 60
    assert window_state(ARVADS, L, L + 59 * 60).next_change == L + 114 * 60
    assert window_state(ARVADS, L, L + 54 * 60).next_what == "billing window opens"


@pytest.mark.parametrize("minute, expected", [(19, "closed"), (20, "closed"), (21, "open"),
                                              (10_000, "open")])
def test_arvados_per_minute_cloud(minute, expected):
    assert window_state(size(shutdown_windows=(20, 999999)), L, L + minute * 60).value == expected


def test_arvados_single_entry_opens_for_good():
    s = size(shutdown_windows=(10,))
    assert window_state(s, L, L + 599).value == "closed"
    assert window_state(s, L, L + 601).value == "open"
    assert window_state(s, L, L + 10**7).value == "open"


HOURLY = size(billing_period=3600, shutdown_window=300)


@pytest.mark.parametrize("elapsed, expected", [
    (0, "closed"), (3299, "closed"), (3300, "closed"), (3301, "open"), (3599, "open"),
    (3600, "closed"), (3601, "closed"), (6900, "closed"), (6901, "open"), (7199.5, "open"),
    (7200, "closed"),
])
def test_billing_period_window_anchored_at_launch(elapsed, expected):
    assert window_state(HOURLY, L, L + elapsed).value == expected


def test_billing_period_next_change():
    w = window_state(HOURLY, L, L + 100)
    assert (w.value, w.next_change) == ("closed", L + 3300)
    w = window_state(HOURLY, L, L + 3400)
    assert (w.value, w.next_change, w.next_what) == ("open", L + 3600, "billing window closes")


def test_window_survives_restart_because_it_depends_only_on_launch_time():
    # two "controllers" computing at the same instant agree, whatever they saw before
    assert window_state(HOURLY, L, L + 10_000) == window_state(HOURLY, L, L + 10_000)


@pytest.mark.parametrize("elapsed, expected", [(0, "closed"), (59, "closed"), (60, "closed"),
                                               (61, "open"), (86400, "open")])
def test_per_second_billing_after_min_charge(elapsed, expected):
    assert window_state(size(billing_period=0, min_charge=60), L, L + elapsed).value == expected


def test_per_second_without_min_charge_is_open_after_launch():
    s = size(billing_period=0, min_charge=0)
    assert window_state(s, L, L + 1).value == "open"
    assert window_state(s, L, L + 1).next_change is None


def test_unknown_size_is_open():
    assert window_state(None, L, L).value == "open"


def test_launch_in_the_future_is_closed():
    assert window_state(HOURLY, L, L - 100).value == "closed"


@pytest.mark.parametrize("elapsed, expected", [(0, "boot wait"), (1799, "boot wait"),
                                               (1800, "boot exceeded"), (1801, "boot exceeded")])
def test_boot_grace_boundary(elapsed, expected):
    assert boot_grace_state(L, L + elapsed, 1800).value == expected


def test_boot_grace_next_change():
    assert boot_grace_state(L, L + 5, 1800).next_change == L + 1800


@pytest.mark.parametrize("state, idle_for, expected", [
    ("idle", 0, "idle wait"), ("idle", 299, "idle wait"), ("idle", 300, "idle exceeded"),
    ("idle", 10**6, "idle exceeded"), ("busy", 10**6, "not idle"), ("down", 10**6, "not idle"),
    ("unpaired", 10**6, "not idle"),
])
def test_idle_grace_boundary(state, idle_for, expected):
    assert idle_grace_state(state, L, L + idle_for, 300).value == expected


def test_idle_grace_next_change():
    v = idle_grace_state("idle", L, L + 10, 300)
    assert (v.next_change, v.next_what) == (L + 300, "idle grace ends")
