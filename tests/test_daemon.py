"""The daemon wired from a config file: the embedded default on an injected clock, dry-run,
reload (good and bad files), clean stop with a call under way, and the status server."""

import json
import logging
import re
import pathlib
import threading
import urllib.request

import pytest

from nodemanager.actors.clock import ManualClock
from nodemanager.console.admin import AdminState, AdminStateError
from nodemanager.cloud.port import TAG_DESTROY
from nodemanager.configuration.config import load
from nodemanager.daemon import Daemon
from nodemanager.sim.cloud import SimCloud
from nodemanager.cycle.store_keeper import AdminBacking
from nodemanager.store.sqlite import SqliteStore
from tests.fixtures.daemon import ScriptedScheduler

REPO = pathlib.Path(__file__).resolve().parent.parent


def write_config(path, *, port="-1", idle_grace="60s", matrix="", extra=""):
    text = (REPO / "config.example.ini").read_text()
    text = text.replace("port = 8989", f"port = {port}").replace("idle_grace = 60s", f"idle_grace = {idle_grace}")
    text = text.replace("\nmatrix =\n", f"\nmatrix = {matrix}\n")
    text = text.replace("\nstate_dir =\n", "\nstate_dir = state\n")      # its own lock, beside the file
    path.write_text(text + extra)
    return str(path)


@pytest.fixture
def daemons():
    made = []

    def make(cfg, **kw):
        clock = kw.pop("clock", None) or ManualClock(1_000_000.0)
        d = Daemon(load(cfg), config_path=cfg, clock=clock, stop_timeout=kw.pop("stop_timeout", 5.0), **kw)
        made.append(d)
        return d
    yield make
    for d in made:
        d.stop()


def run_for(d, seconds, step=5.0):
    for _ in range(int(seconds / step)):
        d.clock.advance(step)
        assert d.system.settle(10.0)


def test_embedded_default_boots_drains_and_destroys(tmp_path, daemons, caplog):
    caplog.set_level(logging.INFO, "nodemanager")
    d = daemons(write_config(tmp_path / "nm.ini")).start()
    assert d.system.settle(10.0)
    run_for(d, 600)
    text = caplog.text
    assert "outcome boot" in text and "outcome drain" in text and "outcome destroy" in text
    decisions = [r.getMessage() for r in caplog.records
                 if r.getMessage().startswith("node ") and " -> " in r.getMessage()]
    assert decisions and all(re.search(r" default\.matrix:\d+ ", m) for m in decisions)
    assert all("/" not in m.split(" -> ")[0] for m in decisions)  # the rule's file name, not its path
    assert d.world.pool.stats.completed >= 12
    assert d.counters["cycles"] >= 100


def test_dry_run_never_acts(tmp_path, daemons, caplog):
    caplog.set_level(logging.INFO, "nodemanager")
    d = daemons(write_config(tmp_path / "nm.ini"), dry_run=True).start()
    run_for(d, 120)
    assert set(d.world.sim_cloud.calls) == {"list_nodes"}
    assert "dry-run: would" in caplog.text and "DRY RUN" in caplog.text


def test_reload_applies_good_files_and_rejects_bad_ones(tmp_path, daemons, caplog):
    matrix = tmp_path / "my.matrix"
    matrix.write_text((REPO / "policy_matrix" / "default.matrix").read_text())
    cfg = write_config(tmp_path / "nm.ini", matrix=str(matrix))
    d = daemons(cfg).start()
    assert d.settings.core.idle_grace == 60
    write_config(tmp_path / "nm.ini", matrix=str(matrix), idle_grace="2m")
    assert d.reload() is True
    assert d.controller.settings.core.idle_grace == 120
    # a config with an error: rejected as a whole, the error names section and option
    write_config(tmp_path / "nm.ini", matrix=str(matrix), idle_grace="soon")
    caplog.set_level(logging.ERROR, "nodemanager.daemon")
    assert d.reload() is False
    assert d.controller.settings.core.idle_grace == 120
    assert "[Daemon] idle_grace" in caplog.text
    # a broken matrix: the running matrix stays, the error is logged and reported
    good_hash = d.controller.matrix.sha256
    write_config(tmp_path / "nm.ini", matrix=str(matrix))
    matrix.write_text("this is not a matrix\n")
    assert d.reload() is False
    assert d.controller.matrix.sha256 == good_hash
    assert d.controller.matrix_error and "my.matrix" in d.controller.matrix_error
    run_for(d, 10)
    assert d.last_report.matrix_error == d.controller.matrix_error


def test_stop_abandons_a_stuck_call_safely_and_next_start_finishes_the_destroy(tmp_path, daemons):
    cfg = write_config(tmp_path / "nm.ini")
    clock = ManualClock(1_000_000.0)
    d = daemons(cfg, clock=clock, stop_timeout=0.5).start()
    run_for(d, 100)                                        # nodes booted and running jobs
    entered, release = threading.Event(), threading.Event()
    real_destroy = d.world.cloud.destroy_node

    cut_off = []

    def slow_destroy(node):          # a cloud call that hangs (outside the world's lock)
        entered.set()
        release.wait(10)
        if not cut_off:              # the process died during the call: it never reached the cloud
            real_destroy(node)

    d.world.cloud.destroy_node = slow_destroy
    for _ in range(200):
        clock.advance(5)
        d.system.settle(0.5)             # returns early unless the destroy is stuck
        if entered.is_set():
            break
    assert entered.is_set(), "no destroy happened"
    # several actuators may be stuck in destroys at once; each one must be finished later
    marked = [n for n in d.world.sim_cloud.list_nodes() if n.tags.get(TAG_DESTROY)]
    assert marked
    abandoned = d.stop()
    assert abandoned and all(a.startswith("actuator-") for a in abandoned)
    # the process would exit here; the destroys never reached the cloud
    cut_off.append(True)
    release.set()
    assert all(d.world.sim_cloud.node(n.id).state != "terminated" for n in marked)
    del d.world.cloud.destroy_node
    again = daemons(cfg, clock=clock, ports=(d.world.cloud, d.world.scheduler, d.world)).start()
    assert again.system.settle(10.0)
    assert all(d.world.sim_cloud.node(n.id).state == "terminated" for n in marked)


def test_status_server_shows_the_last_cycle(tmp_path, daemons):
    d = daemons(write_config(tmp_path / "nm.ini", port="0")).start()
    run_for(d, 60)
    with urllib.request.urlopen(d.status_server.url + "/status.json", timeout=5) as resp:
        doc = json.load(resp)
    text = json.dumps(doc)
    assert "demo-small-" in text and "default.matrix:" in text
    with urllib.request.urlopen(d.status_server.url + "/metrics", timeout=5) as resp:
        assert b"nodemanager_call_duration_seconds" in resp.read()


def test_constant_thread_count(tmp_path, daemons):
    before = threading.active_count()
    d = daemons(write_config(tmp_path / "nm.ini", extra="")).start()
    started = threading.active_count()
    assert started - before <= 8            # 2 pollers, 1 controller, 4 actuators (manual clock)
    size = d.settings.core.sizes[0]
    for i in range(2000):
        d.world.sim_cloud.create_node(size, f"extra-{i}", {})
    run_for(d, 60)
    assert threading.active_count() == started


def test_fatal_error_stops_the_daemon_with_a_clear_message(tmp_path, daemons, caplog):
    import signal as _signal
    d = daemons(write_config(tmp_path / "nm.ini"))

    def out_of_memory(*args, **kwargs):
        raise MemoryError("simulated: cannot allocate")

    d.controller.planner = out_of_memory
    saved = {s: _signal.getsignal(s) for s in (_signal.SIGHUP, _signal.SIGTERM, _signal.SIGINT)}
    caplog.set_level(logging.CRITICAL, "nodemanager")
    try:
        assert d.run() == 70
    finally:
        for s, h in saved.items():
            _signal.signal(s, h)
    assert "fatal: actor controller hit a fatal error: MemoryError" in caplog.text
    assert "nodemanager stopped by a fatal error" in caplog.text


def test_the_scheduler_adapters_drain_badput_is_exported_after_each_poll(tmp_path, daemons):
    cfg = write_config(tmp_path / "nm.ini")
    clock = ManualClock(1_000_000.0)
    sched = ScriptedScheduler(clock)
    cloud = SimCloud(clock=clock, sizes=load(cfg).core.sizes, boot_delay=0.0)
    sched.badput = 300.0           # before the first poll: history, not counted
    d = daemons(cfg, clock=clock, ports=(cloud, sched, None)).start()
    assert d.system.settle(10.0)
    run_for(d, 30)
    assert d.metrics.registry.get_sample_value("nodemanager_drain_badput_seconds_total") == 0.0
    sched.badput = 1020.0          # an escalation requeued jobs that had run 720 core-seconds
    run_for(d, 30)
    assert d.metrics.registry.get_sample_value("nodemanager_drain_badput_seconds_total") == 720.0


def test_a_hold_survives_a_restart_kept_in_the_store(tmp_path, daemons):
    cfg = write_config(tmp_path / "nm.ini")
    clock = ManualClock(1_000_000.0)
    d = daemons(cfg, clock=clock).start()
    run_for(d, 100)                                        # nodes booted and running jobs
    report = d.last_report          # hold nodes with nothing of ours under way on them
    busy = {f.node for f in report.snapshot.in_flight} | {i.node_id for i in report.plan.items}
    held = {n.id for n in d.world.sim_cloud.list_nodes() if n.state == "running" and n.id not in busy}
    assert held
    for node_id in held:
        d.admin.hold(node_id)
    d.stop()
    again = daemons(cfg, clock=clock, ports=(d.world.cloud, d.world.scheduler, d.world)).start()
    assert again.admin.held == held                        # read back from tmp_path/admin.json
    run_for(again, 900)                                    # their jobs end; idle grace is 60 s
    assert again.world.pool.stats.completed > 0
    for node_id in held:
        node = again.world.sim_cloud.node(node_id)
        assert node.state == "running" and not node.tags.get(TAG_DESTROY)
        assert not any(f.node == node_id for f in again.last_report.snapshot.in_flight)
    again.admin.release(next(iter(held)))
    kept = AdminState(store=AdminBacking(SqliteStore(str(tmp_path / "state" / "demo.db")), clock))
    kept.reload()
    assert kept.held == held - {next(iter(held))}


def test_an_unreadable_state_file_stops_the_daemon_before_it_starts(tmp_path, daemons):
    cfg = write_config(tmp_path / "nm.ini")
    text = pathlib.Path(cfg).read_text().replace("\nstate_file =\n", "\nstate_file = admin.json\n")
    pathlib.Path(cfg).write_text(text)
    (tmp_path / "admin.json").write_text('{"held": {"i-1": 1}, }')
    with pytest.raises(AdminStateError, match=r"admin\.json:1:22: the admin state is not JSON"):
        daemons(cfg)


def test_sigterm_is_served_while_a_reload_waits(tmp_path, daemons):
    """A reload blocked on something (a slow file system, say) must not hold SIGTERM back."""
    import os
    import signal
    d = daemons(write_config(tmp_path / "nm.ini"))
    entered, release, outcome = threading.Event(), threading.Event(), []

    def stuck_reload():
        entered.set()
        outcome.append("released" if release.wait(10) else "timed out")
        return False
    d.reload = stuck_reload
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)}
    d.request("reload")
    threading.Thread(target=lambda: entered.wait(10) and os.kill(os.getpid(), signal.SIGTERM),
                     daemon=True).start()
    try:
        assert d.run() == 0
        assert outcome == [], "the stop waited for the reload to give up"
    finally:
        release.set()
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_the_cost_profiles_consolidation_back_off_survives_a_restart_in_the_state_dir(tmp_path, daemons):
    """A size whose consolidation was paused before a restart stays paused after it."""
    cfg = write_config(tmp_path / "nm.ini")
    text = pathlib.Path(cfg).read_text().replace("\nprofile =\n", "\nprofile = cost\n")
    # the example file sets consolidation off; the profile's options apply where the file is silent
    text = text.replace("\nconsolidate = no\n", "\n").replace("\nconsolidate_backoff = no\n", "\n")
    pathlib.Path(cfg).write_text(text)
    (tmp_path / "state").mkdir()
    tally = {"completed": 0, "cancelled": 4, "boots_held": 0, "idle_seconds": 0.0}
    level = {"step": 3, "since": 1_000_000.0, "pauses": 1, "tally": tally, "judged": tally}
    (tmp_path / "state" / "demo.consolidation").write_text(json.dumps({"levels": {"small": level}, "drains": {}}))
    d = daemons(cfg).start()
    run_for(d, 20)
    factor, why = d.last_report.snapshot.consolidation_backoff["small"]
    assert factor == float("inf") and why.startswith("consolidation paused for ")
