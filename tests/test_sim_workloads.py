"""The seeded synthetic workloads: the same seed gives the same jobs, each shape holds its parts in
the shares stated, and the SWF written is what the replay reads back."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import replace

import pytest

from nodemanager.sim.swf import DAY, SwfReader
from nodemanager.sim.workloads import (BURST_JOBS, BURST_SHARE, LONG_SHARE, MANY_USERS, QUIET_FROM, QUIET_UNTIL,
                                       SHAPES, USER_BATCH, USER_BATCH_SPREAD, USERS, WIDE_SHARE, shaped_jobs, shaped_workload, write_swf)

DAYS, CORES = 10.0, 400


def shares(workload):
    ch: Counter[str] = Counter()
    for j, part in workload:
        ch[part] += j.runtime * j.cores
    total = sum(ch.values())
    return {p: v / total for p, v in ch.items()}, total


def test_the_same_seed_gives_the_same_jobs_and_another_seed_others():
    a = shaped_jobs("all", DAYS, CORES, 7)
    assert a == shaped_jobs("all", DAYS, CORES, 7)
    assert a != shaped_jobs("all", DAYS, CORES, 8)
    assert [j.id for j in a] == list(range(1, len(a) + 1))
    assert all(x.submit <= y.submit for x, y in zip(a, a[1:]))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_holds_its_parts_in_the_shares_stated(shape):
    workload = shaped_workload(shape, DAYS, CORES, 3)
    got, total = shares(workload)
    parts = SHAPES[shape]
    want = {"long": LONG_SHARE, "wide": WIDE_SHARE, "bursts": BURST_SHARE}
    for part, share in want.items():
        if part in parts:
            assert got[part] == pytest.approx(share, abs=0.01), part
        else:
            assert part not in got
    # the work averages the busy cores asked for (the plain mix's rate is a mean: within 10 %)
    assert total / (DAYS * DAY) == pytest.approx(CORES, rel=0.1)


def test_long_jobs_run_days_and_wide_jobs_span_whole_nodes():
    workload = shaped_workload("long-wide", DAYS, CORES, 5)
    long = [j for j, p in workload if p == "long"]
    wide = [j for j, p in workload if p == "wide"]
    assert long and all(DAY <= j.runtime <= 5 * DAY and 1 <= j.cores <= 8 for j in long)
    assert wide and all(16 <= j.cores <= 128 and j.cores % 8 == 0 for j in wide)
    assert all(j.requested_time == round(j.runtime * 1.5) for j, _ in workload)


def test_many_users_each_submit_in_batches_and_a_few_submit_most(tmp_path):
    workload = shaped_workload("users", DAYS, CORES, 4)
    by_user: dict[int, list[float]] = {}
    for j, _ in workload:
        by_user.setdefault(j.user, []).append(j.submit)
    assert len(by_user) > MANY_USERS // 2 and all(101 <= u <= 100 + MANY_USERS for u in by_user)
    counts = sorted((len(v) for v in by_user.values()), reverse=True)
    assert counts[0] > 10 * counts[-1]   # Zipf-like: the first user submits far more than the last
    # each user's jobs come in batches: consecutive submits within a batch's spread, batch after batch
    for submits in by_user.values():
        submits.sort()
        close = sum(b - a <= USER_BATCH_SPREAD for a, b in zip(submits, submits[1:]))
        assert close >= (len(submits) // USER_BATCH) * (USER_BATCH - 1) * 0.9 - 1
    path = tmp_path / "users.swf"
    with open(path, "w", encoding="utf-8") as out:
        write_swf(out, workload)
    assert {j.user for j in SwfReader(str(path))} == set(by_user)   # the user field names the user


def test_bursts_arrive_together_and_the_quiet_night_has_no_submission():
    workload = shaped_workload("all", DAYS, CORES, 2)
    night = [j for j, _ in workload if j.submit % DAY >= QUIET_FROM or j.submit % DAY < QUIET_UNTIL]
    assert not night
    burst = sorted(j.submit for j, p in workload if p == "bursts")
    # a burst's jobs arrive within a minute: some two minutes hold half a burst or more
    starts = Counter(int(t // 120) for t in burst)
    assert max(starts.values()) >= BURST_JOBS // 2
    plain = shaped_workload("long", DAYS, CORES, 2)
    assert any(j.submit % DAY >= QUIET_FROM for j, _ in plain)


def test_the_swf_written_reads_back_as_the_same_jobs(tmp_path):
    workload = shaped_workload("long-wide", 2.0, 80, 1)
    path = tmp_path / "w.swf"
    with open(path, "w", encoding="utf-8") as out:
        write_swf(out, workload, ["seed 1"])
    reader = SwfReader(str(path))
    back = list(reader)
    # the user field numbers the workload's part (read back as the job's user)
    assert back == [replace(j, user=USERS[part]) for j, part in workload]
    assert reader.header.get("Note") == "seed 1"


def test_an_unknown_shape_is_refused_with_the_shapes_named():
    with pytest.raises(ValueError, match="long-wide"):
        shaped_jobs("longwide", 1.0, 8, 1)
