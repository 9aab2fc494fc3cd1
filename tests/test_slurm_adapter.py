"""The SLURM adapter against a real slurmctld with six slurmd (tests/fixtures/slurm.py), real jobs.

Each test starts from a reset cluster: no jobs, every node idle. The slurmd-killed case waits for
SLURM's own timeout (about 16 s with SlurmdTimeout=5) and comes last.
"""

from __future__ import annotations

import signal
import stat
import time

import pytest

from nodemanager.console.metrics import Metrics
from nodemanager.scheduler.port import (Confirmation, DrainRefused, DrainSchedule, DrainTicket, Scheduler,
                                        SchedulerError)
from nodemanager.scheduler.slurm import DESTROYED_REASON, SlurmOptions, SlurmScheduler
from nodemanager.configuration.settings import SchedulerSettings

pytestmark = pytest.mark.slurm

GRACEFUL, QUICK, FAST = DrainSchedule.GRACEFUL, DrainSchedule.QUICK, DrainSchedule.FAST


@pytest.fixture
def sched(slurm) -> SlurmScheduler:
    """The adapter as the daemon builds it, from [Scheduler] options."""
    return SlurmScheduler.from_settings(SchedulerSettings("slurm", slurm.scheduler_options))


def worker(sched: SlurmScheduler, name: str):
    return {w.name: w for w in sched.poll().workers}[name]


def running(slurm, *args: str, node: str, settle: str | set[str] | None = None) -> int:
    """Submit a job pinned to ``node`` and wait until it runs (and the node shows ``settle``)."""
    job = slurm.sbatch("-w", node, *args)
    slurm.wait_job(job, "RUNNING")
    if settle:
        slurm.wait_state(node, settle)
    return job


def test_adapter_implements_the_scheduler_port(sched):
    assert isinstance(sched, Scheduler)
    assert sched.name == "slurm"


def test_poll_reports_states_as_sinfo_prints_them(slurm, sched):
    jobs = [slurm.sbatch("-w", "node1", "-c1", "-t", "10"), slurm.sbatch("-w", "node2", "-c2"),
            slurm.sbatch("-w", "node3", "-c1")]
    for job in jobs:
        slurm.wait_job(job, "RUNNING")
    slurm.wait_states({"node1": {"mix"}, "node2": {"alloc"}, "node3": {"mix"}})
    slurm.set_node("node3", "State=DRAIN", "Reason=admin: reboot later")
    slurm.set_node("node4", "State=DRAIN", "Reason=admin: bad disk")
    slurm.wait_states({"node1": {"mix"}, "node2": {"alloc"}, "node3": {"drng"}, "node4": {"drain"},
                       "node5": {"idle"}})
    t0 = time.time()
    poll = sched.poll()
    assert {w.name: w.state for w in poll.workers} == slurm.states()
    w = {x.name: x for x in poll.workers}
    assert (w["node1"].cpus, w["node1"].cpus_busy, w["node1"].running_jobs) == (2, 1, 1)
    assert (w["node2"].cpus_busy, w["node2"].running_jobs, w["node2"].job_end_times) == (2, 1, ())
    assert len(w["node1"].job_end_times) == 1 and 590 < w["node1"].job_end_times[0] - t0 < 610
    assert w["node3"].draining and w["node4"].draining and not w["node1"].draining
    assert w["node4"].drain_reason == "admin: bad disk" and w["node4"].drain_request_id is None
    assert w["node5"].ram_mb == 1000 and w["node5"].address == "127.0.0.1"
    assert all(x.registered_at and x.registered_at <= poll.polled_at for x in poll.workers)
    assert all(x.last_heard == poll.polled_at for x in poll.workers)
    assert poll.demand == ()


def test_idle_since_follows_the_last_job(slurm, sched):
    before = worker(sched, "node5").state_since
    t_submit = int(time.time())
    job = slurm.sbatch("-w", "node5", "-c1", wrap="sleep 1")
    slurm.wait_job(job, "COMPLETED", timeout=20)
    slurm.wait_state("node5", "idle")
    after = worker(sched, "node5")
    assert after.state == "idle"
    assert before <= t_submit <= after.state_since


def test_a_completed_job_reaches_the_runtime_memory_with_its_user_name_and_runtime(slurm):
    """squeue keeps a completed job's record for MinJobAge: the poll after it ended reports it once,
    and the controller's runtime memory learns it under its user and job name."""
    import getpass

    import policy_matrix
    from nodemanager.configuration.settings import CoreSettings, Settings
    from nodemanager.cycle.controller import Controller
    sched = SlurmScheduler.from_settings(SchedulerSettings("slurm", slurm.scheduler_options), finished_limit=100)
    ctl = Controller(Settings(core=CoreSettings(runtime_prediction="recent")), policy_matrix.load_default(),
                     None, clock=time.time, dry_run=True)
    ctl.cycle([], time.time(), sched.poll())   # jobs that ended before the first poll are not learned
    job = slurm.sbatch("-w", "node5", "-c1", "-J", "nm-sim", "-t", "5", wrap="sleep 2")
    slurm.wait_job(job, "COMPLETED", timeout=20)
    poll = sched.poll()
    ctl.cycle([], time.time(), poll)
    (done,) = poll.finished
    assert (done.job.job_id, done.job.user, done.job.name, done.job.limit) == (str(job), getpass.getuser(),
                                                                                "nm-sim", 300.0)
    assert 2.0 <= done.end - done.job.start <= 4.0
    assert ctl.memories.runtimes.recent(getpass.getuser(), "nm-sim") == (done.end - done.job.start,)
    again = sched.poll()                       # still listed by squeue: not reported twice
    ctl.cycle([], time.time(), again)
    assert again.finished == () and len(ctl.memories.runtimes.recent(getpass.getuser(), "nm-sim")) == 1


def test_a_running_jobs_user_account_and_cores_are_read_for_who_spent_what(slurm, sched):
    import getpass
    job = running(slurm, "-c2", "--account", "physics", node="node4")
    try:
        owners = worker(sched, "node4").jobs_by
    finally:
        slurm.scancel(job)
    assert [(o.user, o.cores) for o in owners] == [(getpass.getuser(), 2)]
    assert owners[0].group == "physics"
    assert worker(sched, "node5").jobs_by == ()


def test_the_controller_expects_a_running_job_to_end_when_its_users_jobs_of_that_name_do(slurm):
    """With runtime prediction on, a running job is named on every node it holds (user, job name,
    start, time limit); the controller's snapshot expects it to end one learned runtime after
    its start, not at its one-hour limit, and the victim estimate's time to go follows."""
    import getpass

    import policy_matrix
    from nodemanager.configuration.settings import CoreSettings, Settings
    from nodemanager.core.runtime_prediction import expected_end_times
    from nodemanager.core.victims import estimate
    from nodemanager.cycle.controller import Controller
    from nodemanager.snapshot import dumps, loads
    sched = SlurmScheduler.from_settings(SchedulerSettings("slurm", slurm.scheduler_options), finished_limit=100)
    ctl = Controller(Settings(core=CoreSettings(runtime_prediction="recent")), policy_matrix.load_default(),
                     None, clock=time.time, dry_run=True)
    user = getpass.getuser()
    ctl.memories.runtimes.record(user, "nm-fit", 600.0)   # as a finished job teaches it
    job = running(slurm, "-N2", "-c1", "-J", "nm-fit", "-t", "60", node="node2,node3")
    try:
        poll = sched.poll()
        report = ctl.cycle([], time.time(), poll)
    finally:
        slurm.scancel(job)
    now = report.snapshot.now
    on = {w.name: w for w in report.snapshot.workers}
    for name in ("node2", "node3"):
        (named,) = on[name].jobs
        assert (named.job_id, named.user, named.name, named.limit) == (str(job), user, "nm-fit", 3600.0)
        assert expected_end_times(on[name], now) == (named.start + 600.0,)
        assert on[name].job_end_times == (named.start + 3600.0,)   # the limit stays the guarantee
        assert abs(estimate(on[name], now).time_to_go - (named.start + 600.0 - now)) < 1.0
    assert on["node4"].jobs == ()
    # the daemon's snapshot (what `nodemanager plan` and `plan --live` plan) keeps the predictions
    again = {w.name: w for w in loads(dumps(report.snapshot)).workers}
    assert [expected_end_times(again[n], now) for n in ("node2", "node3", "node4")] == [
        expected_end_times(on[n], now) for n in ("node2", "node3", "node4")]


def test_cloud_id_from_the_node_comment(slurm, sched):
    slurm.set_node("node6", "Comment=instance-id=i-0123abcd")
    try:
        assert worker(sched, "node6").cloud_id == "i-0123abcd"
    finally:
        slurm.set_node("node6", "Comment=")
    assert worker(sched, "node6").cloud_id is None


def test_a_gone_vms_instance_id_leaves_the_comment_and_a_new_vm_writes_its_own(slurm, sched):
    """The comment names the VM behind the node: a destroyed VM's id is taken out of it (the rest
    of the comment kept), and a VM booted under the name has its own id written there, so a boot
    script that fails to update it leaves no other VM's id for the node to answer with."""
    slurm.set_node("node6", "Comment=rack-4 instance-id=i-0aaaaaaa")
    try:
        slurm.stop_slurmd("node6")
        sched.node_destroyed("node6")
        gone = worker(sched, "node6")
        assert gone.cloud_id is None
        slurm.set_node("node6", "Comment=rack-4 instance-id=i-0aaaaaaa")   # as a failed boot script left it
        sched.node_booted("node6", "i-0bbbbbbb")
        assert worker(sched, "node6").cloud_id == "i-0bbbbbbb"
        assert "rack-4" in slurm.run("scontrol", "show", "node", "node6").stdout
    finally:
        slurm.set_node("node6", "Comment=")


def test_idle_node_drain_confirm_destroy(slurm, sched):
    w = worker(sched, "node1")
    assert w.state == "idle"
    ticket = sched.drain(w, GRACEFUL, "idle exceeded")
    assert slurm.states()["node1"] == "drain"
    polled = worker(sched, "node1")
    assert polled.drain_request_id == ticket.request_id
    assert polled.drain_reason == f"nodemanager: idle exceeded [req={ticket.request_id}]"
    assert ticket.daemon_start == polled.registered_at
    ok = sched.confirm_drained(ticket)
    assert ok == Confirmation(True, ok.reason) and ok.reason
    # The VM goes away (its slurmd dies with it), then the adapter marks the node.
    slurm.stop_slurmd("node1")
    sched.node_destroyed("node1")
    gone = worker(sched, "node1")
    assert gone.state in ("down", "down*") and not gone.draining
    assert gone.drain_reason == DESTROYED_REASON
    # A new VM with the same name registers and is not born drained (ReturnToService=2).
    slurm.start_slurmd("node1")
    slurm.wait_state("node1", "idle")
    stats = sched.draining_stats()
    assert (stats.started, stats.completed, stats.refused) == (1, 1, 0)


def test_busy_node_drains_only_after_its_job_ends(slurm, sched):
    job = running(slurm, "-c1", node="node2", settle="mix")
    w = worker(sched, "node2")
    assert (w.state, w.running_jobs) == ("mix", 1)
    ticket = sched.drain(w, GRACEFUL, "victim")
    assert slurm.states()["node2"] == "drng"
    refused = sched.confirm_drained(ticket)
    assert not refused.ok and "'drng'" in refused.reason
    assert slurm.job_state(job) == "RUNNING"          # graceful: the job keeps running
    slurm.scancel(job)
    slurm.wait_state("node2", "drain")
    assert sched.confirm_drained(ticket).ok


def test_cancel_drain_resumes_and_the_waiting_job_runs_there(slurm, sched):
    ticket = sched.drain(worker(sched, "node3"), GRACEFUL, "idle exceeded")
    job = slurm.sbatch("-w", "node3", "-c1")
    slurm.wait_for(lambda: sched.poll().demand, 10, "the pinned job to show as demand")
    assert slurm.job_state(job) == "PENDING"
    sched.cancel_drain(ticket)
    slurm.wait_job(job, "RUNNING")
    assert not worker(sched, "node3").draining
    assert sched.draining_stats().cancelled == 1
    assert not sched.confirm_drained(ticket).ok


def test_node_that_got_a_job_after_the_snapshot_is_refused_and_kept(slurm, sched):
    snapshot = worker(sched, "node4")
    assert snapshot.state == "idle"
    job = running(slurm, "-c1", node="node4")
    with pytest.raises(DrainRefused, match="node4: became busy since the snapshot"):
        sched.drain(snapshot, GRACEFUL, "idle exceeded")
    now = worker(sched, "node4")
    assert not now.draining and now.running_jobs == 1
    assert slurm.job_state(job) == "RUNNING"
    assert (sched.draining_stats().refused, sched.draining_stats().started) == (1, 0)


class _JobSlipsIn(SlurmScheduler):
    """Lets a real job land on the node after the adapter's check, just before its DRAIN update
    (the window SLURM cannot close for us: it has no check expression)."""

    def __init__(self, slurm, options) -> None:
        super().__init__(options)
        self.slurm = slurm
        self.job: int | None = None

    def _scontrol_update(self, name: str, *settings: str) -> None:
        if "State=DRAIN" in settings and self.job is None:
            self.job = running(self.slurm, "-c1", node=name)
        super()._scontrol_update(name, *settings)


def test_job_landing_while_the_drain_is_set_undoes_our_drain(slurm):
    sched = _JobSlipsIn(slurm, SlurmOptions(slurm_conf=str(slurm.conf)))
    with pytest.raises(DrainRefused, match="node5: became busy .* while the drain was set; drain undone"):
        sched.drain(worker(sched, "node5"), GRACEFUL, "idle exceeded")
    slurm.wait_state("node5", {"mix"})
    assert slurm.job_state(sched.job) == "RUNNING"
    assert not worker(sched, "node5").draining


def test_a_drain_that_is_not_ours_is_never_confirmed_cancelled_or_escalated(slurm, sched):
    slurm.set_node("node5", "State=DRAIN", "Reason=admin: bad disk")
    with pytest.raises(DrainRefused, match="already draining"):
        sched.drain(worker(sched, "node5"), GRACEFUL, "idle exceeded")
    # Our drain, then an operator re-drains the node with their own reason.
    ticket = sched.drain(worker(sched, "node6"), GRACEFUL, "idle exceeded")
    slurm.set_node("node6", "State=DRAIN", "Reason=admin: keep for debugging")
    assert slurm.states()["node6"] == "drain"
    refused = sched.confirm_drained(ticket)
    assert not refused.ok and "not ours" in refused.reason
    with pytest.raises(SchedulerError, match="not ours"):
        sched.cancel_drain(ticket)
    with pytest.raises(DrainRefused, match="not ours"):
        sched.escalate(ticket, FAST)
    assert slurm.states()["node6"] == "drain"
    forged = DrainTicket(worker="node5", request_id="feedbeef", reason="", started_at=0.0)
    assert not sched.confirm_drained(forged).ok


def test_escalation_quick_requeues_fast_cancels_the_rest(slurm, sched):
    requeueable = running(slurm, "-c1", node="node6")
    pinned = running(slurm, "-c1", "--no-requeue", node="node6", settle="alloc")
    metrics = Metrics(sizes=())
    metrics.observe_draining(sched.draining_stats())    # as the daemon does after each poll
    ticket = sched.drain(worker(sched, "node6"), GRACEFUL, "victim")
    sched.escalate(ticket, QUICK)
    # The requeued job leaves node6 (and may run elsewhere); the --no-requeue one stays.
    slurm.wait_for(lambda: "node6" not in _job_nodes(slurm, requeueable), 15, "job off node6")
    assert slurm.job_state(pinned) == "RUNNING"
    assert slurm.wait_state("node6", {"drng"}) == "drng"
    sched.escalate(ticket, FAST)
    slurm.wait_job(pinned, "CANCELLED")
    slurm.wait_state("node6", "drain")
    assert sched.confirm_drained(ticket).ok
    stats = sched.draining_stats()
    assert stats.escalated == 2
    node6 = {n.name: n for n in stats.nodes}["node6"]
    assert node6.badput > 0 and stats.badput == node6.badput
    metrics.observe_draining(stats)                      # the requeued and the cancelled job's runtime
    assert metrics.registry.get_sample_value("nodemanager_drain_badput_seconds_total") == stats.badput


def _job_nodes(slurm, job_id: int) -> str:
    out = slurm.run("squeue", "-h", "-j", str(job_id), "-o", "%T %N", check=False).stdout.split()
    return out[1] if len(out) > 1 and out[0] in ("RUNNING", "COMPLETING") else ""


def test_fast_drain_kills_at_once(slurm, sched):
    job = running(slurm, "-c1", "--no-requeue", node="node5", settle="mix")
    ticket = sched.drain(worker(sched, "node5"), "fast", "kill now")   # as a PlanItem spells it
    assert ticket.schedule is FAST
    slurm.wait_job(job, "CANCELLED")
    slurm.wait_state("node5", "drain")
    assert sched.confirm_drained(ticket).ok


def test_unclaimed_core_seconds_are_counted_while_our_drain_holds_cores(slurm):
    now = [1000.0]
    sched = SlurmScheduler(SlurmOptions(slurm_conf=str(slurm.conf)), clock=lambda: now[0])
    job = running(slurm, "-c1", node="node2", settle="mix")
    sched.drain(worker(sched, "node2"), GRACEFUL, "victim")
    now[0] = 1010.0
    sched.poll()                                         # 1 free core × 10 s
    slurm.scancel(job)
    slurm.wait_state("node2", "drain")
    now[0] = 1030.0
    sched.poll()                                         # 2 free cores × 20 s
    stats = sched.draining_stats()
    node2 = {n.name: n for n in stats.nodes}["node2"]
    assert node2.unclaimed == pytest.approx(50.0) and stats.unclaimed == pytest.approx(50.0)
    assert node2.draining and "nodemanager: victim" in node2.drain_reason


def test_demand_from_pending_jobs(slurm, sched):
    for job in [slurm.sbatch("-w", n, "-c2") for n in slurm.nodes]:
        slurm.wait_job(job, "RUNNING")
    slurm.sbatch("-c1", "--mem=300", "-J", "short")
    slurm.sbatch("-c1", "--mem=300", "-J", "long")
    slurm.sbatch("-N2", "-c2", "--mem-per-cpu=200")
    slurm.sbatch("-c1", "--array=1-3")
    slurm.sbatch("-c1", "--hold")                         # held: not demand
    got = slurm.wait_for(lambda: _demand(sched) if sum(_demand(sched).values()) == 7 else None,
                         10, "7 nodes' worth of demand")
    assert got == {(1, 300): 2, (2, 400): 2, (1, 100): 3}
    assert {(d.user, d.name) for d in sched.poll().demand} == {(None, None)}


def test_with_runtime_prediction_demand_is_grouped_by_user_and_job_name(slurm, sched):
    """The spot choice prices a group by its user's recent runtimes for that job name, so the
    pending jobs alike but for their name are two groups, each naming its user and name."""
    import getpass
    for job in [slurm.sbatch("-w", n, "-c2") for n in slurm.nodes]:
        slurm.wait_job(job, "RUNNING")
    slurm.sbatch("-c1", "--mem=300", "-J", "short")
    slurm.sbatch("-c1", "--mem=300", "-J", "long")
    slurm.sbatch("-c1", "--mem=300", "-J", "long")
    predicting = SlurmScheduler.from_settings(SchedulerSettings("slurm", slurm.scheduler_options),
                                              finished_limit=100)
    got = slurm.wait_for(lambda: {(d.cpus, d.user, d.name): d.count for d in predicting.poll().demand
                                  if d.ram_mb == 300} or None, 10, "the pending jobs as demand")
    me = getpass.getuser()
    assert got == {(1, me, "short"): 1, (1, me, "long"): 2}


def _demand(sched):
    return {(d.cpus, d.ram_mb): d.count for d in sched.poll().demand}


def test_unreachable_controller_is_a_scheduler_error_naming_the_command(slurm, tmp_path):
    text = slurm.conf.read_text()
    port = next(line for line in text.splitlines() if line.startswith("SlurmctldPort="))
    conf = tmp_path / "slurm.conf"
    conf.write_text(text.replace(port, "SlurmctldPort=1").replace("MessageTimeout=5", "MessageTimeout=1"))
    sched = SlurmScheduler(SlurmOptions(slurm_conf=str(conf), timeout=20))
    # 22.05's sinfo --json exits 0 here, with an "errors" entry and no stderr .
    with pytest.raises(SchedulerError, match=r"^sinfo --json: SLURM reported an error: Unspecified error"):
        sched.poll()


def _fake_bin(tmp_path, script: str):
    path = tmp_path / "sinfo"
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path)


def test_garbage_and_hanging_commands_are_scheduler_errors(tmp_path):
    sched = SlurmScheduler(SlurmOptions(bin_dir=_fake_bin(tmp_path, "echo '{\"nodes\": [' ")))
    with pytest.raises(SchedulerError, match=r"sinfo --json: reply is not valid JSON \(line \d+ column"):
        sched.poll()
    sched = SlurmScheduler(SlurmOptions(bin_dir=_fake_bin(tmp_path, "exec sleep 5"), timeout=0.3))
    with pytest.raises(SchedulerError, match=r"sinfo --json: timed out after 0.3s"):
        sched.poll()
    sched = SlurmScheduler(SlurmOptions(bin_dir=str(tmp_path / "nowhere")))
    with pytest.raises(SchedulerError, match="not found") as err:
        sched.poll()
    assert not err.value.transient


def test_options_are_checked_with_the_option_named():
    opts = SlurmOptions.from_mapping({"slurm_conf": "/x/slurm.conf", "timeout": "1m",
                                      "mark_destroyed": "FUTURE", "partition": "cloud, big",
                                      "cloud_id_field": "extra"})
    assert (opts.slurm_conf, opts.timeout, opts.mark_destroyed) == ("/x/slurm.conf", 60.0, "future")
    assert opts.partitions == frozenset({"cloud", "big"}) and opts.cloud_id_fields == ("extra",)
    with pytest.raises(ValueError, match=r"\[Scheduler\] timeout: expected a duration like 300, 5m or 1h, got 'soon'"):
        SlurmOptions.from_mapping({"timeout": "soon"})
    with pytest.raises(ValueError, match=r"\[Scheduler\] mark_destroyed: expected one of down, future"):
        SlurmOptions.from_mapping({"mark_destroyed": "gone"})
    with pytest.raises(ValueError, match=r"\[Scheduler\] collector: not an option of type slurm"):
        SlurmOptions.from_mapping({"collector": "cm"})


def test_bad_option_from_the_config_is_a_config_error_naming_file_and_option():
    from nodemanager.configuration.config import ConfigError

    with pytest.raises(ConfigError, match=r"^nm.ini: \[Scheduler\] timeout: expected a duration"):
        SlurmScheduler.from_settings(SchedulerSettings("slurm", {"timeout": "-3"}), source="nm.ini")


def test_every_documented_option_is_one_the_config_accepts():
    from nodemanager.scheduler.slurm_kind import KIND

    SlurmOptions.from_mapping({k: "" if k != "timeout" else "5" for k in KIND.options})


def test_mark_destroyed_future_hides_the_node_until_it_registers_again(slurm):
    sched = SlurmScheduler(SlurmOptions(slurm_conf=str(slurm.conf), mark_destroyed="future"))
    ticket = sched.drain(worker(sched, "node3"), GRACEFUL, "idle exceeded")
    assert sched.confirm_drained(ticket).ok
    slurm.stop_slurmd("node3")
    sched.node_destroyed("node3")
    assert "node3" not in {w.name for w in sched.poll().workers}
    slurm.start_slurmd("node3")
    slurm.wait_state("node3", "idle")


def test_killed_slurmd_goes_down_and_is_classified_down(slurm, sched):
    import policy_matrix
    from nodemanager.scheduler.slurm_classify import classify_slurm
    from policy_matrix.vocabulary import BOOT_EXCEEDED, CLOSED, DOWN, IDLE, NOT_IDLE, Action, StateTuple

    assert classify_slurm(worker(sched, "node6").state).state == IDLE
    heard = worker(sched, "node6").last_heard
    slurm.stop_slurmd("node6", signal.SIGKILL)
    slurm.wait_state("node6", "down*", timeout=40)
    w = worker(sched, "node6")
    assert w.state == "down*"
    c = classify_slurm(w.state)
    assert c.state == DOWN
    tuple_ = StateTuple(c.state, CLOSED, BOOT_EXCEEDED, NOT_IDLE)
    assert policy_matrix.load_default().lookup(tuple_).action is Action.START_SHUTDOWN
    assert w.last_heard == heard                        # no longer heard from
    sched.node_destroyed("node6")
    assert worker(sched, "node6").drain_reason == DESTROYED_REASON


# -- hostile and large replies from canned sinfo/squeue commands ---------

def _canned(tmp_path, sinfo: str, squeue: str) -> str:
    """A bin_dir whose sinfo and squeue print these replies (the adapter runs them as the real ones),
    and whose scontrol shows no node (no refused node hidden from sinfo)."""
    for name, text in (("sinfo", sinfo), ("squeue", squeue), ("scontrol", "")):
        (tmp_path / f"{name}.json").write_text(text)
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\nexec cat {tmp_path / name}.json\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path)


def _node_text(name: str, cpus: str = "4", state: str = "idle") -> str:
    return (f'{{"name": "{name}", "state": "{state}", "state_flags": [], "cpus": {cpus}, "alloc_cpus": 0, '
            f'"real_memory": 8000, "last_busy": 1000, "slurmd_start_time": 900, "reason": ""}}')


def _job_text(job_id: int, state: str = "PENDING", nodes: str = "", cpus: str = "1", end: int = 0) -> str:
    return (f'{{"job_id": {job_id}, "job_state": "{state}", "nodes": "{nodes}", "cpus": {cpus}, '
            f'"node_count": 1, "memory_per_cpu": 100, "state_reason": "Resources", "partition": "debug", '
            f'"submit_time": 500, "time_limit": 60, "end_time": {end}}}')


def test_a_hostile_reply_leaves_the_job_out_warns_once_an_hour_and_the_poll_succeeds(tmp_path, caplog):
    from nodemanager.actors.clock import ManualClock

    sinfo = '{"errors": [], "nodes": [%s, %s]}' % (_node_text("n1", state="mixed"), _node_text("n2", "Infinity"))
    squeue = '{"errors": [], "jobs": [%s, %s, %s]}' % (
        _job_text(1), _job_text(2, cpus="NaN"), _job_text(3, "RUNNING", "n1", cpus="1e400"))
    clock = ManualClock(10_000.0)
    sched = SlurmScheduler(SlurmOptions(bin_dir=_canned(tmp_path, sinfo, squeue)), clock=clock)
    with caplog.at_level("WARNING", logger="nodemanager.scheduler.slurm"):
        poll = sched.poll()
        assert [(d.cpus, d.count) for d in poll.demand] == [(1, 1)]          # job 2 is no demand
        workers = {w.name: w for w in poll.workers}
        assert (workers["n1"].running_jobs, workers["n2"].cpus) == (1, 0)    # job 3 still holds n1
        assert {(p.kind, p.name, p.field, p.reason) for p in poll.problems} == {
            ("job", "2", "cpus", "not_finite"), ("job", "3", "cpus", "not_finite"), ("node", "n2", "cpus", "not_finite")}
        assert "slurm poll: job 2: field 'cpus' is not finite: nan; the job is left out of demand" in caplog.text
        assert len(caplog.records) == 3
        clock.advance(3599)
        sched.poll()
        assert len(caplog.records) == 3                                      # not again within the hour
        clock.advance(1)
        sched.poll()
        assert len(caplog.records) == 6
    metrics = Metrics()
    metrics.observe_record_problems(poll.problems)
    value = metrics.registry.get_sample_value
    assert value("nodemanager_scheduler_records_skipped_total", {"kind": "job", "reason": "not_finite"}) == 2
    assert value("nodemanager_scheduler_records_skipped_total", {"kind": "node", "reason": "not_finite"}) == 1


@pytest.mark.parametrize("reply", ['{"nodes": [{"cpus": 1%s}]}' % ("0" * 5000), "[" * 100_000 + "]" * 100_000],
                         ids=["5000-digit-number", "nested-100000-deep"])
def test_a_reply_the_decoder_refuses_is_a_scheduler_error(tmp_path, reply):
    sched = SlurmScheduler(SlurmOptions(bin_dir=_canned(tmp_path, reply, '{"jobs": []}')))
    with pytest.raises(SchedulerError, match=r"^sinfo --json: reply cannot be decoded"):
        sched.poll()


def test_jobs_are_counted_on_the_nodes_they_hold(tmp_path):
    """The per-node job index gives what a scan of every job for every node gave."""
    sinfo = '{"nodes": [%s]}' % ", ".join(_node_text(f"n{i}", state="mixed") for i in range(1, 6))
    squeue = '{"jobs": [%s]}' % ", ".join([
        _job_text(1, "RUNNING", "n[1-2]", end=3000), _job_text(2, "COMPLETING", "n2", end=2000),
        _job_text(3), _job_text(4, "COMPLETED", "n3", end=1500), _job_text(5, "RUNNING", "n1,n1", end=2500),
        _job_text(6, "SUSPENDED", "n4"), _job_text(7, "RUNNING", "n9")])
    sched = SlurmScheduler(SlurmOptions(bin_dir=_canned(tmp_path, sinfo, squeue)))
    got = {w.name: (w.running_jobs, w.job_end_times) for w in sched.poll().workers}
    assert got == {"n1": (2, (2500.0, 3000.0)), "n2": (2, (2000.0, 3000.0)), "n3": (0, ()),
                   "n4": (1, ()), "n5": (0, ())}


def test_completed_records_without_a_user_or_times_are_skipped_naming_the_job(tmp_path, caplog):
    from nodemanager.actors.clock import ManualClock

    def done(job_id: int, user: str, start: str, end: int) -> str:
        return (f'{{"job_id": {job_id}, "job_state": "COMPLETED", "user_name": "{user}", "name": "fit", '
                f'"start_time": {start}, "end_time": {end}, "time_limit": 60}}')

    squeue = '{"jobs": [%s, %s, %s, %s]}' % (done(1, "alice", "10100", 10400), done(2, "", "10100", 10400),
                                             done(3, "bob", '"soon"', 10400), done(4, "carol", "8000", 9000))
    sched = SlurmScheduler(SlurmOptions(bin_dir=_canned(tmp_path, '{"nodes": []}', squeue)),
                           clock=ManualClock(10_000.0), finished_limit=10)
    with caplog.at_level("WARNING", logger="nodemanager.scheduler.slurm"):
        finished = sched.poll().finished
    assert [(f.job.job_id, f.job.user, f.job.name, f.end - f.job.start, f.job.limit) for f in finished] == [
        ("1", "alice", "fit", 300.0, 3600.0)]
    skipped = [r.getMessage() for r in caplog.records if "its runtime is not learned" in r.getMessage()]
    # job 4 ended before the adapter's first poll: not this process's to learn, and no problem
    assert [m.split(":")[1].strip() for m in skipped] == ["job 2", "job 3"]
    assert "user_name is missing" in skipped[0] and "start_time is not a number: 'soon'" in skipped[1]


def test_a_running_job_without_a_user_leaves_its_nodes_ends_at_their_limits_naming_job_and_node(tmp_path, caplog):
    """A running record that cannot be named is skipped with a warning naming the job and its nodes;
    the nodes it holds name no job (their ends stay the time limits), the other nodes are named."""
    from nodemanager.actors.clock import ManualClock

    def run(job_id: int, user: str, nodes: str, start: int = 1500) -> str:
        return (f'{{"job_id": {job_id}, "job_state": "RUNNING", "nodes": "{nodes}", "cpus": 2, '
                f'"user_name": "{user}", "name": "fit", "start_time": {start}, "end_time": {start + 3600}, '
                f'"time_limit": 60}}')

    sinfo = '{"nodes": [%s]}' % ", ".join(_node_text(f"n{i}", state="mixed") for i in range(1, 4))
    squeue = '{"jobs": [%s, %s, %s]}' % (run(1, "alice", "n[1-2]"), run(2, "", "n2"), run(3, "bob", "n3", 0))
    sched = SlurmScheduler(SlurmOptions(bin_dir=_canned(tmp_path, sinfo, squeue)), clock=ManualClock(2000.0),
                           finished_limit=10)
    with caplog.at_level("WARNING", logger="nodemanager.scheduler.slurm"):
        jobs = {w.name: w.jobs for w in sched.poll().workers}
    (alice,) = jobs["n1"]
    assert (alice.job_id, alice.user, alice.name, alice.start, alice.limit) == ("1", "alice", "fit", 1500.0, 3600.0)
    assert jobs["n2"] == () and jobs["n3"] == ()
    told = [r.getMessage() for r in caplog.records if "stay their time limits" in r.getMessage()]
    assert len(told) == 2
    assert "job 2: field 'user_name' is missing" in told[0] and "on n2 " in told[0]
    assert "job 3: field 'start_time' is missing" in told[1] and "on n3 " in told[1]
    # without runtime prediction nothing is named and nothing is told
    plain = SlurmScheduler(SlurmOptions(bin_dir=_canned(tmp_path, sinfo, squeue)), clock=ManualClock(2000.0))
    assert all(w.jobs == () for w in plain.poll().workers)
