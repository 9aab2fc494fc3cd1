"""Boot reservations: the pure settling rule (core.reservations), the journal file
(nodemanager.cycle.journal) and the actuator that writes it before every create and reads it on start."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
from dataclasses import replace

import pytest

from nodemanager.cycle.actuate import BOOT_LISTING_TIMEOUT, Actuator, Task
from nodemanager.cloud.port import TAG_REQUEST
from nodemanager.core.reservations import Reservation, from_line, settle, to_line
from nodemanager.cycle.journal import ReservationJournal, journal_path
from nodemanager.model import BootRequest, CloudNode, frozen_map
from nodemanager.configuration.settings import CloudSettings, ManageSettings
from nodemanager.sim.cloud import SimCloud
from tests.fixtures.daemon import SIZES

R1 = Reservation(token="r1.100", name="c-small-1", size="small", at=100.0)


def node(name, token=None, state="running"):
    tags = {TAG_REQUEST: token} if token else {}
    return CloudNode(id=f"i-{name}", name=name, size="small", launched_at=100.0, state=state, tags=frozen_map(tags))


def test_a_reservation_is_open_until_listed_by_its_token_or_too_old():
    assert settle([R1], [], 150.0, 600.0).open == (R1,)
    assert settle([R1], [node("c-small-1", "r1.100")], 150.0, 600.0).listed == ((R1, node("c-small-1", "r1.100")),)
    # a node of another request under the same name does not settle it; a terminated one neither
    assert settle([R1], [node("c-small-1", "r9.1")], 150.0, 600.0).open == (R1,)
    assert settle([R1], [node("x", "r1.100", state="terminated")], 150.0, 600.0).open == (R1,)
    # a node that lost its tags matches by name
    assert settle([R1], [node("c-small-1")], 150.0, 600.0).listed[0][0] == R1
    assert settle([R1], [], 701.0, 600.0).expired == (R1,)


def test_journal_lines_round_trip_and_bad_ones_say_what_is_wrong():
    assert from_line(to_line(R1)) == R1
    for text, why in (('{"token": "a"', "not JSON"), ("[]", "not a JSON object"),
                      ('{"token": "a", "name": "n", "size": "s"}', "missing at"),
                      ('{"token": "", "name": "n", "size": "s", "at": 1}', "non-empty"),
                      ('{"token": "a", "name": "n", "size": "s", "at": true}', "number")):
        try:
            from_line(text)
        except ValueError as err:
            assert why in str(err), (text, err)
        else:
            raise AssertionError(text)


def test_the_journal_survives_a_torn_last_line_and_compacts(tmp_path, caplog):
    journal = ReservationJournal(str(tmp_path / "state" / "c.reservations"))
    assert journal.load() == []
    r2 = replace(R1, token="r2.100", name="c-small-2")
    journal.record(R1)
    journal.record(r2)
    with open(journal.path, "a") as fh:
        fh.write('{"token": "r3.1')                   # a crash in the middle of an append
    with caplog.at_level(logging.WARNING, "nodemanager.journal"):
        assert journal.load() == [R1, r2]
    assert f"{journal.path}:3: reservation line skipped: not JSON" in caplog.text
    journal.keep([r2])
    assert journal.load() == [r2]
    journal.keep([])
    assert (tmp_path / "state" / "c.reservations").read_text() == ""


def test_a_journal_only_for_a_cloud_that_outlives_the_process():
    def settings(driver, state_dir="/var/lib/nm"):
        from nodemanager.configuration.settings import Settings
        return Settings(cloud=CloudSettings(driver=driver, cluster="prod"), manage=ManageSettings(state_dir=state_dir))
    assert ReservationJournal.for_settings(settings("ec2")).path == "/var/lib/nm/prod.reservations"
    assert journal_path(settings("gce")) == "/var/lib/nm/prod.reservations"
    assert ReservationJournal.for_settings(settings("simulated")) is None
    assert ReservationJournal.for_settings(settings("dummy")) is None
    assert ReservationJournal.for_settings(settings("ec2", state_dir="")) is None


def _actuator(time_now, settings, sched, cloud, journal, first=0):
    ids = iter(f"req{i}" for i in range(first, 1000))
    return Actuator(cloud, sched, settings, clock=time_now, request_ids=lambda: next(ids), journal=journal)


def test_a_state_dir_that_cannot_be_written_boots_nothing(tmp_path, time_now, nm_settings, scripted_scheduler):
    (tmp_path / "afile").write_text("")
    journal = ReservationJournal(str(tmp_path / "afile" / "testcluster.reservations"))
    cloud = SimCloud(clock=time_now, sizes=SIZES, cluster="testcluster", boot_delay=0.0)
    act = _actuator(time_now, nm_settings, scripted_scheduler, cloud, journal)
    [out] = act.run(Task(BootRequest("small", 2, "demand")))
    assert out.result == "failed" and cloud.calls["create_node"] == 0
    assert f"could not be recorded in {journal.path}" in out.detail and "no create without one" in out.detail
    assert act.state().in_flight == ()


def test_a_boot_of_the_previous_process_holds_its_name_and_demand_until_listed(
        tmp_path, time_now, nm_settings, scripted_scheduler, caplog):
    journal = ReservationJournal(str(tmp_path / "testcluster.reservations"))
    cloud = SimCloud(clock=time_now, sizes=SIZES, cluster="testcluster", boot_delay=0.0)
    before = _actuator(time_now, nm_settings, scripted_scheduler, cloud, journal)
    [out] = before.run(Task(BootRequest("small", 1, "demand")))
    assert out.result == "ok" and len(journal.load()) == 1       # recorded before the create
    time_now.advance(5)
    with caplog.at_level(logging.INFO, "nodemanager.actuate"):
        after = _actuator(time_now, nm_settings, scripted_scheduler, cloud, journal, first=100)
    assert "1 boot reservation(s) of a previous process" in caplog.text and "testcluster-small-1" in caplog.text
    [flight] = after.state().in_flight                           # the planner counts it as booting
    assert flight.action == "boot" and flight.request_id == journal.load()[0].token
    after.observe_listing([])                                    # a listing that lags
    [out] = after.run(Task(BootRequest("small", 1, "more demand")))
    assert out.result == "ok"
    assert sorted(n.name for n in cloud.list_nodes()) == ["testcluster-small-1", "testcluster-small-2"]
    settled = after.observe_listing(cloud.list_nodes())
    assert [o.result for o in settled] == ["ok"] and "sent by a previous process" in settled[0].detail
    assert after.state().in_flight == () and journal.load() == []    # compacted once listed


def test_a_reservation_never_listed_is_given_up_after_the_listing_timeout(
        tmp_path, time_now, nm_settings, scripted_scheduler):
    journal = ReservationJournal(str(tmp_path / "testcluster.reservations"))
    journal.record(Reservation(token="gone.1", name="testcluster-small-1", size="small", at=time_now.now))
    cloud = SimCloud(clock=time_now, sizes=SIZES, cluster="testcluster", boot_delay=0.0)
    act = _actuator(time_now, nm_settings, scripted_scheduler, cloud, journal)
    time_now.advance(BOOT_LISTING_TIMEOUT + 1)
    [out] = act.observe_listing([])
    assert out.result == "failed" and "never listed; given up" in out.detail
    assert act.state().in_flight == () and journal.load() == []


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 64 KiB tmpfs holding a journal whose last page has 10 bytes free, and a filler file
    over every other page: the next append is a short write, then ENOSPC."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        journal = mnt / "demo.reservations"
        journal.write_text(" " * (4096 - 11) + "\n")  # a blank line: load() skips it
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield journal
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_tears_no_reservation_and_the_controller_boots_nothing(full_tmpfs, caplog):
    """A nearly full state_dir used to take part of a reservation line as written: the create it
    guards was sent, and a restart skipped the torn line. Whole lines or no create, and the
    operator reads why in one line per refused boot."""
    from tests.test_controller import Loop
    from tests.fixtures.daemon import sim_settings

    before = full_tmpfs.read_bytes()
    loop = Loop(sim_settings())
    journal = ReservationJournal(str(full_tmpfs))
    loop.actuator = Actuator(loop.world.cloud, loop.world.scheduler, loop.settings, clock=loop.time,
                             journal=journal)
    loop.ctl.actuator = loop.actuator
    caplog.set_level(logging.WARNING, "nodemanager")
    loop.run(120)
    boots = [o for r in loop.reports for o in r.outcomes if o.kind == "boot"]
    assert {o.result for o in boots} == {"failed", "skipped"}   # refused, then retried after a backoff
    assert loop.world.sim_cloud.calls["create_node"] == 0 and loop.world.sim_cloud.live_count() == 0
    assert full_tmpfs.read_bytes() == before and journal.load() == []   # no torn line left behind
    told = [r.getMessage() for r in caplog.records if r.getMessage().startswith("outcome boot")]
    assert told and all(f"could not be recorded in {full_tmpfs}: No space left on device" in m
                        and "no create without one" in m for m in told)
