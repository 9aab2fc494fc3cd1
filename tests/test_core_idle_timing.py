"""Break-even idle timing, the pure rule: each size's idle grace from its boot+join times and how
soon its idle nodes were re-used (nodemanager.core.idle_timing)."""

import math

import pytest

from nodemanager.core.idle_timing import FLOOR, MIN_JOINS, MIN_PERIODS, break_even_grace

INF = math.inf
JOINS = [120.0, 120.0, 120.0]


def test_nodes_never_re_used_are_given_back_at_the_floor_however_long_a_boot_takes():
    grace, why = break_even_grace(JOINS, [INF] * 20, 600.0)
    assert grace == FLOOR == 60.0
    assert "idle grace 60s (the floor): break-even: boot+join 120s, 0 % of the last 20 idle periods" in why
    assert break_even_grace([30.0] * 3, [INF] * 20, 600.0)[0] == FLOOR


def test_nodes_re_used_within_a_boot_keep_the_grace_that_covers_them():
    # every idle node took a job 90 s after it went idle: waiting 90 s is cheaper than a re-boot
    # (any grace from 90 s up costs the same: the longer one, fewer jobs wait if one comes later)
    grace, why = break_even_grace(JOINS, [90.0] * 12, 600.0)
    assert grace == 600.0
    assert "100 % of the last 12 idle periods re-used within it" in why


def test_the_grace_is_the_cheapest_over_the_remembered_periods():
    # boot+join 60 s; 8 of 10 re-used after 100 s, 2 never: keeping 100 s costs 8*100 + 2*100 =
    # 1000 s of node time; giving back at 60 s costs 8*(60+60) + 2*60 = 1080 s: keep 100 s
    periods = [100.0] * 8 + [INF] * 2
    grace, why = break_even_grace([60.0] * 3, periods, 600.0)
    assert grace == 100.0
    assert "idle grace 100s: break-even: boot+join 60s, 80 % of the last 10 idle periods re-used within it" in why
    # 2 of 10 re-used after 100 s: 2*100 + 8*100 = 1000 against 2*120 + 8*60 = 720: the floor
    grace, _ = break_even_grace([60.0] * 3, [100.0] * 2 + [INF] * 8, 600.0)
    assert grace == FLOOR


def test_a_dearer_re_boot_keeps_idle_nodes_longer():
    # 8 of 10 re-used after 250 s: waiting costs 10*250 = 2500 s; giving back at 60 s costs
    # 8*(60 + re-boot) + 2*60: 1080 s when a re-boot costs 60 s, 3000 s when it costs 300 s
    periods = [250.0] * 8 + [INF] * 2
    cheap, _ = break_even_grace([60.0] * 3, periods, 600.0)
    dear, _ = break_even_grace([300.0] * 3, periods, 600.0)
    assert cheap == FLOOR and dear == 250.0
    # an endless boot keeps nodes that are re-used, never beyond idle_grace (every grace from
    # 250 s up costs the same here: ties go to the longer)
    assert break_even_grace([1e9] * 3, [250.0] * 20, 600.0)[0] == 600.0
    # ... and gives back at the floor nodes that are never re-used
    assert break_even_grace([1e9] * 3, [INF] * 20, 600.0)[0] == FLOOR


def test_never_above_the_configured_idle_grace():
    grace, why = break_even_grace([3600.0] * 5, [290.0] * 20, 300.0)
    assert grace == 300.0 and "(the configured idle_grace)" in why
    # re-used only after the configured grace: a re-boot either way, so the floor
    assert break_even_grace([60.0] * 5, [500.0] * 20, 300.0)[0] == FLOOR


def test_a_configured_grace_below_the_floor_is_kept():
    grace, _ = break_even_grace(JOINS, [INF] * 20, 30.0)
    assert grace == 30.0


def test_too_little_history_keeps_the_configured_grace_and_says_so():
    grace, why = break_even_grace(JOINS[:MIN_JOINS - 1], [INF] * 40, 300.0)
    assert grace == 300.0 and f"has 40 and {MIN_JOINS - 1}" in why
    grace, why = break_even_grace(JOINS, [INF] * (MIN_PERIODS - 1), 300.0)
    assert grace == 300.0 and f"break-even waits for {MIN_PERIODS} ended idle periods" in why


def test_bad_values_are_left_out_not_believed():
    # a clock jump back makes negative spans; NaN and an endless boot are not times either
    joins = [120.0, 120.0, 120.0, -50.0, math.nan, INF]
    periods = [INF] * 10 + [-30.0, math.nan]
    grace, why = break_even_grace(joins, periods, 600.0)
    assert grace == FLOOR and "boot+join 120s" in why and "of the last 10 idle periods" in why
    # with the bad values alone there is not enough history
    assert break_even_grace([math.nan] * 5, [math.nan] * 20, 600.0)[0] == 600.0


def test_one_stuck_boot_does_not_make_every_re_boot_dear():
    periods = [250.0] * 3 + [INF] * 7
    grace, why = break_even_grace([60.0, 60.0, 1e9], periods, 600.0)
    assert grace == FLOOR and "boot+join 60s" in why


@pytest.mark.parametrize("configured", [0.0, INF, math.nan, -5.0])
def test_a_configured_grace_that_is_no_duration_is_returned_as_it_is(configured):
    grace, _ = break_even_grace(JOINS, [INF] * 20, configured)
    assert grace == configured or (math.isnan(grace) and math.isnan(configured))


def test_a_size_billed_per_hour_keeps_the_configured_grace():
    # an idle second inside a paid hour costs nothing: the matrix's billing window decides
    grace, why = break_even_grace(JOINS, [INF] * 20, 300.0, billing_period=3600)
    assert grace == 300.0 and "break-even is for sizes billed per second" in why


def test_a_re_boot_costs_at_least_the_minimum_charge():
    # a 30 s boot billed at least 180 s: nodes re-used after 150 s are worth keeping (6*150 +
    # 4*150 = 1500 s against 6*(60 + 180) + 4*60 = 1680 s; against 780 s billed as booted)
    periods = [150.0] * 6 + [INF] * 4
    assert break_even_grace([30.0] * 3, periods, 600.0)[0] == FLOOR
    grace, why = break_even_grace([30.0] * 3, periods, 600.0, min_charge=180)
    assert grace == 150.0 and "boot+join 30s, billed at least 180s, 60 % of the last 10" in why
