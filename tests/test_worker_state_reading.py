"""One reading of a worker state: a worker_state a site adds to the vocabulary is treated outside
the matrix like the core state it names, by the metrics, the status page and the controller."""

from __future__ import annotations

import pathlib

import policy_matrix
from nodemanager.cycle.controller import Controller
from nodemanager.console.metrics import Metrics
from nodemanager.model import Classified, CloudNode, ItemKind, Worker
from nodemanager.scheduler.port import SchedulerPoll
from nodemanager.console.status_document import StatusView, status_document
from policy_matrix.vocabulary import default_vocabulary_path, load_vocabulary
from tests.fixtures.daemon import sim_settings

T0 = 1_000_000.0
SHIPPED = pathlib.Path(default_vocabulary_path()).read_text()
WORKER_LINE = next(line for line in SHIPPED.splitlines() if line.startswith("worker_state:"))
# a busy node running a site's priority work; a VM still being set up by the site's own hook
ADDED = "hot (like busy), provisioning (like unpaired)"
RULES = """\
hot          | * | * | * -> None
provisioning | * | * | * -> START_SHUTDOWN
"""


def site_matrix(tmp_path):
    vocabulary = tmp_path / "site.vocabulary"
    vocabulary.write_text(SHIPPED.replace(WORKER_LINE + "\n", f"{WORKER_LINE}, {ADDED}\n"))
    matrix = tmp_path / "site.matrix"
    matrix.write_text(pathlib.Path(policy_matrix.default_path()).read_text() + RULES)
    return policy_matrix.load(matrix, vocabulary=load_vocabulary(str(vocabulary)))


def node(name: str) -> CloudNode:
    return CloudNode(id=name, name=name, size="small", launched_at=T0 - 7200)


def worker(name: str, state: str, now: float) -> Worker:
    # the site's adapter classifies its own records into the added word
    return Worker(name=name, scheduler="site", state=state, last_heard=now - 5, state_since=T0 - 3600,
                  registered_at=T0 - 7000, cpus=4, cpus_busy=4, ram_mb=15200, running_jobs=1,
                  classified=Classified(state, f"the site's adapter says {state}"))


def test_a_state_added_like_busy_is_paid_busy_time_and_counted_up(tmp_path) -> None:
    settings = sim_settings()
    now = [T0]
    ctl = Controller(settings, site_matrix(tmp_path), None, clock=lambda: now[0], dry_run=True)
    metrics = Metrics(sizes=settings.core.sizes, clock=lambda: now[0])
    for t in (T0, T0 + 60):
        now[0] = t
        report = ctl.cycle([node("n1")], t, SchedulerPoll(workers=(worker("n1", "hot", t),), demand=(),
                                                          polled_at=t))
        metrics.observe(report)
    [row] = status_document(StatusView(report=report, last_cycle_at=T0 + 60), None, T0 + 60)["nodes"]
    assert row["tuple"]["worker_state"] == "hot"
    assert row["facts"]["counted_up"] is True
    paid = {(s.labels["state"], s.labels["size"]): s.value for f in metrics.registry.collect()
            for s in f.samples if s.name == "nodemanager_paid_node_seconds_total"}
    assert paid == {("busy", "small"): 60.0}


def test_a_state_added_like_unpaired_is_confirmed_by_fresh_polls_and_shut_down(tmp_path) -> None:
    # a shutdown of an unpaired node waits until this process's own fresh polls confirm it; a
    # state like unpaired is confirmed the same way, not left waiting for ever
    settings = sim_settings()
    now = [T0]
    ctl = Controller(settings, site_matrix(tmp_path), None, clock=lambda: now[0], dry_run=True)
    confirm = min(settings.core.node_stale_after, settings.core.boot_grace)
    kinds = []
    # fresh polls a minute apart (closer than poll_stale_after), until confirmed and one more
    for t in [T0 + k * 60.0 for k in range(int(confirm // 60) + 2)]:
        now[0] = t
        report = ctl.cycle([node("n1")], t, SchedulerPoll(
            workers=(worker("n1", "provisioning", t),), demand=(), polled_at=t))
        kinds.append([i.kind for i in report.plan.items])
    assert kinds[0] == [] and report.plan.nodes[0].tuple.worker_state == "provisioning"
    assert kinds[-1] == [ItemKind.DESTROY]
