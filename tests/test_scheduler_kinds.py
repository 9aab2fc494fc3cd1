"""A scheduler is one module and one line in ``SCHEDULER_KINDS``: the toy third scheduler
(``tests/fixtures/toy_scheduler.py``) registered by one line is accepted with its own options by
the configuration, its workers in a snapshot are read by its classifier through ``nodemanager
plan``, and ``nodemanager check`` builds its adapter, polls it and runs its own checks. The
shipped kinds (the simulated pool among them) and cloud families answer from the same records."""

from __future__ import annotations

import json

import pytest

from nodemanager.cli import main
from nodemanager.configuration import kinds
from nodemanager.configuration.config import ConfigError, loads
from tests.core_world import plan_json

NOW = 1_800_000_000.0
SIZE = "[Size small]\ncores = 2\nram_mb = 8000\nprice = 0.10\n"
TOY = "[Scheduler]\ntype = toy\nqueue = main\n"


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(kinds, "SCHEDULER_KINDS", (*kinds.SCHEDULER_KINDS, "tests.fixtures.toy_scheduler"))


def _pair(i: int, state: str) -> tuple[dict, dict]:
    node = {"id": f"i-{i}", "name": f"toy-{i}", "size": "small", "launched_at": NOW - 7200}
    worker = {"name": f"toy-{i}", "scheduler": "toy", "state": state, "cloud_id": f"i-{i}",
              "last_heard": NOW - 5, "registered_at": NOW - 7100, "state_since": NOW - 3000, "cpus": 2}
    return node, worker


def test_a_registered_scheduler_plans_its_workers_by_its_own_words(tmp_path, capsys, toy):
    out = plan_json(tmp_path, capsys, SIZE + TOY, NOW, [_pair(1, "vacant"), _pair(2, "working")])
    nodes = {n["id"]: n for n in out["nodes"]}
    # vacant for 50 minutes: idle past its grace, drained; working: busy, kept
    assert (nodes["i-1"]["tuple"]["worker_state"], nodes["i-1"]["action"]) == ("idle", "drain")
    assert "toy: vacant" in nodes["i-1"]["reason"]
    assert (nodes["i-2"]["tuple"]["worker_state"], nodes["i-2"]["action"]) == ("busy", None)


def test_a_registered_schedulers_options_are_checked_as_the_shipped_ones(tmp_path, toy):
    assert loads(SIZE + TOY).scheduler.options == {"queue": "main"}
    with pytest.raises(ConfigError, match=r"site.ini:7: \[Scheduler\] queues: unknown option for type toy; did you mean 'queue'\?"):
        loads(SIZE + "[Scheduler]\ntype = toy\nqueues = main\n", "site.ini")


def test_check_builds_polls_and_asks_a_registered_scheduler(tmp_path, capsys, toy):
    (tmp_path / "nm.ini").write_text(SIZE + TOY + f"""
[Cloud]
driver = dummy
cluster = toytest
[Manage]
port = -1
state_dir = {tmp_path / "state"}
""")
    main(["check", "--config", str(tmp_path / "nm.ini"), "--format", "json"])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert checks["scheduler"]["ok"] and "toy: 1 worker(s)" in checks["scheduler"]["detail"]
    assert checks["toy queue"] == {**checks["toy queue"], "ok": True, "detail": "reads queue main"}


def test_an_unregistered_scheduler_is_refused_naming_the_registered_ones():
    with pytest.raises(ConfigError, match="type: expected one of slurm, htcondor, simulated, got 'toy'"):
        loads(SIZE + TOY, "site.ini")


def test_the_shipped_kinds_answer_what_was_asked_of_their_names():
    schedulers = kinds.scheduler_kinds()
    assert list(schedulers) == ["slurm", "htcondor", "simulated"]
    assert schedulers["simulated"].build is None and schedulers["htcondor"].native_ad
    assert [k.name for k in kinds.cloud_kinds().values()] == ["simulated", "libcloud"]
    assert kinds.in_process("simulated") and kinds.in_process("dummy") and not kinds.in_process("ec2")
    assert kinds.cloud_kind("gce").image_required("gce") and not kinds.cloud_kind("simulated").image_required("simulated")
