"""Runtime prediction: each user's recent jobs predict a running job's end (the mean of the last
two, capped by the job's own limit; the limit on a cold start), learned from what the scheduler
reports finished, kept in the state dir, and measured in replays against the requested times."""

import json

import pytest

from nodemanager.cli import main
from nodemanager.core.runtime_prediction import accuracy, expected_end_times, predict_ends, predict_runtime
from nodemanager.cycle.runtime_memory import RuntimeMemory
from nodemanager.model import FinishedJob, RunningJob, Worker
from nodemanager.scheduler.port import SchedulerPoll


def test_the_mean_of_the_last_two_capped_by_the_limit_else_the_limit():
    assert predict_runtime([100.0, 300.0, 500.0], 3600.0) == 400.0
    assert predict_runtime([5000.0, 7000.0], 3600.0) == 3600.0     # never past the job's own limit
    assert predict_runtime([], 3600.0) == 3600.0                   # cold start: the requested time
    assert predict_runtime([200.0], None) == 200.0
    assert predict_runtime([], None) is None


def _worker(*jobs, ends=()):
    return Worker(name="n1", scheduler="slurm", cpus=8, cpus_busy=len(jobs), running_jobs=len(jobs),
                  jobs=tuple(jobs), job_end_times=tuple(ends))


def _finished(job_id, user, name, start, runtime, limit=36000.0):
    return FinishedJob(job=RunningJob(job_id=job_id, user=user, start=start, name=name, limit=limit),
                       end=start + runtime)


def test_a_jobs_own_name_predicts_first_then_its_user():
    memory = RuntimeMemory()
    memory.learn([_finished("1", "alice", "sim", 0, 600), _finished("2", "alice", "sim", 0, 1000),
                  _finished("3", "alice", "fit", 0, 10000)])
    w = _worker(RunningJob(job_id="4", user="alice", start=5000.0, name="sim", limit=36000.0),
                RunningJob(job_id="5", user="alice", start=5000.0, name="new", limit=36000.0),
                RunningJob(job_id="6", user="bob", start=5000.0, name="sim", limit=7200.0),
                ends=(41000.0, 41000.0, 12200.0))
    # sim: (600 + 1000) / 2; a new name: alice's last two (1000, 10000); bob: cold, his limit
    assert predict_ends(w, memory.recent) == (5800.0, 10500.0, 12200.0)
    (seen,) = memory.observe([w])
    assert expected_end_times(seen, 5000.0) == (5800.0, 10500.0, 12200.0)
    assert seen.job_end_times == (41000.0, 41000.0, 12200.0)   # the limits stay for the eviction check
    assert expected_end_times(w, 5000.0) == w.job_end_times    # prediction off: the scheduler's ends
    # at 7000 s the "sim" job has outrun its prediction: as long again as it ran, 2000 s
    assert expected_end_times(seen, 7000.0) == (9000.0, 10500.0, 12200.0)
    # and never past its own limit (bob's job, 7200 s from 5000 s)
    assert expected_end_times(seen, 13000.0) == (21000.0, 21000.0, 13000.0)


def test_the_memory_is_bounded_per_key_and_in_keys():
    memory = RuntimeMemory(keep=2, max_keys=4)
    memory.learn(_finished(str(k), "u", "x", 0, k) for k in (1, 2, 3))
    assert memory.recent("u", "x") == (2.0, 3.0) and memory.recent("u", None) == (2.0, 3.0)
    memory.learn(_finished(str(k), f"v{k}", None, 0, 10) for k in range(5))
    assert memory.recent("u", "x") == () and memory.recent("v4", None) == (10.0,)


def test_workers_pass_unchanged_when_prediction_is_off():
    w = _worker(RunningJob(job_id="4", user="alice", start=0.0, limit=100.0), ends=(100.0,))
    poll = SchedulerPoll(workers=(w,), demand=(), polled_at=0.0,
                         finished=(_finished("1", "alice", None, 0, 10),))
    memory = RuntimeMemory()
    assert memory.workers(poll, "off") is poll.workers and memory.recent("alice", None) == ()
    (seen,) = memory.workers(poll, "recent")
    assert seen.predicted_end_times == (10.0,)


def test_accuracy_is_the_median_and_p90_of_estimate_over_actual():
    a = accuracy([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert (a.count, a.median, a.p90) == (10, 5.0, 9.0)
    assert accuracy([]).count == 0


HEAD = "; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n"


def test_a_replay_prints_the_predictors_accuracy_beside_the_requested_times(tmp_path, capsys):
    # user 7 runs executable 3 for 600 s every 1000 s and asks for 10 hours each time
    lines = "".join(f"{k} {1000 * k} 0 600 1 -1 -1 1 36000 -1 1 7 1 3 1 1 -1 -1\n" for k in range(1, 21))
    trace = tmp_path / "user.swf"
    trace.write_text(HEAD + lines)
    ini = tmp_path / "site.ini"
    ini.write_text("[Daemon]\nmax_nodes = 2\nruntime_prediction = recent\n")
    assert main(["simulate", "--trace", str(trace), "--config", str(ini), "--cores-per-node", "4",
                 "--jobs", "1", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    a = run["runtime_accuracy"]
    # the first job is predicted at its requested time, every later one at 600 s
    assert a["jobs"] == 20 and a["predicted_median"] == pytest.approx(1.0)
    assert a["requested_median"] == pytest.approx(60.0) and a["predicted_p90"] == pytest.approx(1.0)
    assert main(["simulate", "--trace", str(trace), "--config", str(ini), "--cores-per-node", "4",
                 "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert ("runtime prediction, nodemanager: predicted/actual median 1.00, p90 1.00; "
            "requested/actual median 60.00, p90 60.00 (20 finished jobs") in out
