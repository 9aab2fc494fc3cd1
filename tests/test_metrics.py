"""Metrics: what an operator's dashboards and alerts read, from sample cycle reports."""

from __future__ import annotations

import dataclasses

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nodemanager.cloud.port import ErrorKind
from nodemanager.console.metrics import Metrics, frozen_reason
from nodemanager.model import CloudNode, CycleReport, Freeze, Outcome, Plan, Size, Snapshot, Worker
from nodemanager.scheduler.draining_stats import DrainingStats
from tests.fixtures.observability import SIZES, T0, Clock, sample_report


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def families(m: Metrics):
    return list(text_string_to_metric_families(generate_latest(m.registry).decode()))


@pytest.fixture
def metrics(clock: Clock) -> Metrics:
    return Metrics(sizes=SIZES, clock=clock)


def test_each_daemon_has_its_own_registry_and_the_global_one_stays_clean(metrics: Metrics) -> None:
    other = Metrics(sizes=SIZES)
    metrics.observe(sample_report())
    assert value(metrics, "nodemanager_cycles_total") == 1
    assert value(other, "nodemanager_cycles_total") == 0
    assert not [f for f in REGISTRY.collect() if f.name.startswith("nodemanager")]


def test_names_follow_prometheus_conventions(metrics: Metrics) -> None:
    metrics.observe(sample_report())
    metrics.observe_call("cloud", "list_nodes", 0.2)
    names = set()
    for fam in families(metrics):
        names.add(fam.name)
        assert fam.name.startswith("nodemanager_"), fam.name
        if fam.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in fam.samples), fam.name
        assert not any(unit in fam.name for unit in ("_ms", "milliseconds", "_minutes", "_hours"))
    assert {"nodemanager_nodes", "nodemanager_paid_node_seconds", "nodemanager_call_duration_seconds",
            "nodemanager_matrix_info", "nodemanager_actions_frozen"} <= names


def test_no_node_name_or_id_ever_appears_in_a_label(metrics: Metrics) -> None:
    report = sample_report()
    metrics.observe(report)
    metrics.observe(sample_report(T0 + 30))
    identities = {c.id for c in report.snapshot.cloud_nodes} | \
        {c.name for c in report.snapshot.cloud_nodes} | {w.name for w in report.snapshot.workers}
    for fam in families(metrics):
        for sample in fam.samples:
            assert not identities & set(sample.labels.values()), (sample.name, sample.labels)


def test_nodes_are_counted_by_tuple_and_size(metrics: Metrics) -> None:
    metrics.observe(sample_report())
    idle_exceeded = dict(worker_state="idle", window="open", boot_grace="boot exceeded",
                         idle_grace="idle exceeded", size="small")
    assert value(metrics, "nodemanager_nodes", **idle_exceeded) == 3
    booting = dict(worker_state="unpaired", window="closed", boot_grace="boot wait",
                   idle_grace="not idle", size="large")
    assert value(metrics, "nodemanager_nodes", **booting) == 1
    assert sum(s.value for f in families(metrics) if f.name == "nodemanager_nodes"
               for s in f.samples) == 8


def test_a_tuple_that_empties_disappears_at_the_next_cycle(metrics: Metrics) -> None:
    report = sample_report()
    metrics.observe(report)
    without_boot = dataclasses.replace(report.plan, nodes=tuple(
        e for e in report.plan.nodes if e.node_id != "i-boot"))
    metrics.observe(dataclasses.replace(report, plan=without_boot))
    booting = dict(worker_state="unpaired", window="closed", boot_grace="boot wait",
                   idle_grace="not idle", size="large")
    assert value(metrics, "nodemanager_nodes", **booting) is None


def test_raw_scheduler_states_are_counted_and_odd_ones_bounded(metrics: Metrics) -> None:
    report = sample_report()
    odd = Worker("w10", "slurm", state="something <weird> with spaces")
    snap = dataclasses.replace(report.snapshot, workers=report.snapshot.workers + (odd,))
    metrics.observe(dataclasses.replace(report, snapshot=snap))
    assert value(metrics, "nodemanager_workers", state="idle") == 4
    assert value(metrics, "nodemanager_workers", state="down*") == 1
    assert value(metrics, "nodemanager_workers", state="drained/retiring") == 1
    assert value(metrics, "nodemanager_workers", state="other") == 1


def test_actions_decided_and_carried_out(metrics: Metrics) -> None:
    metrics.observe(sample_report())
    assert value(metrics, "nodemanager_actions_decided_total", action="drain") == 1
    assert value(metrics, "nodemanager_actions_decided_total", action="destroy") == 1
    assert value(metrics, "nodemanager_actions_decided_total", action="boot") == 1
    assert value(metrics, "nodemanager_actions_total", action="drain", result="ok") == 1
    assert value(metrics, "nodemanager_actions_total", action="boot", result="failed") == 1
    assert value(metrics, "nodemanager_boot_failures_total", size="large") == 1
    assert value(metrics, "nodemanager_nodes_blocked", blocked_by="min_nodes",
                 matrix_action="START_DRAIN") == 1
    assert value(metrics, "nodemanager_nodes_planned", action="drain") == 1


def test_boots_are_counted_by_size(metrics: Metrics) -> None:
    report = sample_report()
    ok = Outcome("boot", "nm-small-9", "ok", "created i-9", T0, size="small")
    metrics.observe(dataclasses.replace(report, outcomes=(ok, ok)))
    assert value(metrics, "nodemanager_boots_total", size="small") == 2
    assert value(metrics, "nodemanager_boot_failures_total", size="small") is None


def test_paid_time_is_split_by_what_nodes_do_over_the_cycle_interval(metrics: Metrics) -> None:
    metrics.observe(sample_report(T0))
    assert value(metrics, "nodemanager_paid_node_seconds_total", state="idle", size="small") is None
    metrics.observe(sample_report(T0 + 30))
    # small: i-idle, i-held, i-min idle; i-busy busy; i-down down. large: i-grace idle,
    # i-boot booting, i-drain draining (busy, but ours to drain).
    assert value(metrics, "nodemanager_paid_node_seconds_total", state="idle", size="small") == 90
    assert value(metrics, "nodemanager_paid_node_seconds_total", state="busy", size="small") == 30
    assert value(metrics, "nodemanager_paid_node_seconds_total", state="down", size="small") == 30
    assert value(metrics, "nodemanager_paid_node_seconds_total", state="booting", size="large") == 30
    assert value(metrics, "nodemanager_paid_node_seconds_total", state="draining",
                 size="large") == 30
    assert value(metrics, "nodemanager_paid_node_seconds_total", state="busy", size="large") is None
    # idle: 3 small at 0.20/h + 1 large at 0.80/h for 30 s
    assert value(metrics, "nodemanager_estimated_cost_total", state="idle") == \
        pytest.approx((3 * 0.20 + 0.80) * 30 / 3600)


def test_a_long_gap_between_cycles_is_not_booked_as_paid_time(clock: Clock) -> None:
    metrics = Metrics(sizes=SIZES, clock=clock, max_interval=120)
    metrics.observe(sample_report(T0))
    metrics.observe(sample_report(T0 + 3600))
    assert value(metrics, "nodemanager_paid_node_seconds_total", state="busy", size="small") == 120


def test_spend_per_hour_sums_the_prices_of_running_nodes(metrics: Metrics) -> None:
    report = sample_report()
    gone = CloudNode("i-gone", "nm-large-9", "large", T0 - 100, state="terminated")
    snap = dataclasses.replace(report.snapshot, cloud_nodes=report.snapshot.cloud_nodes + (gone,))
    metrics.observe(dataclasses.replace(report, snapshot=snap))
    assert value(metrics, "nodemanager_estimated_spend_per_hour", size="small") == \
        pytest.approx(5 * 0.20)
    assert value(metrics, "nodemanager_estimated_spend_per_hour", size="large") == \
        pytest.approx(3 * 0.80)



def test_charges_follow_the_clouds_billing_rules(clock: Clock) -> None:
    hourly = Size("hourly", cores=4, ram_mb=8000, price=1.0, billing_period=3600)
    per_second = Size("sec", cores=4, ram_mb=8000, price=3.6, min_charge=60)
    metrics = Metrics(sizes=(hourly, per_second), clock=clock)

    def cycle(now: float, *nodes: CloudNode) -> None:
        snap = Snapshot(now=now, polled_at={"cloud": now, "scheduler": now}, cloud_nodes=nodes)
        metrics.observe(CycleReport(snapshot=snap, plan=Plan(now=now)))

    def charged(size: str) -> float | None:
        return value(metrics, "nodemanager_estimated_charges_total", size=size)

    old = CloudNode("i-old", "n1", "hourly", T0 - 1800)
    cycle(T0, old)                                   # its first hour was paid before we looked
    assert charged("hourly") == 0
    new = CloudNode("i-new", "n2", "sec", T0 + 10)
    cycle(T0 + 20, old, new)                         # 10 s up: the 60 s minimum charge
    assert charged("sec") == pytest.approx(3.6 * 60 / 3600)
    cycle(T0 + 1700, old, new)                       # still inside the old node's first hour
    assert charged("hourly") == 0
    assert charged("sec") == pytest.approx(3.6 * 1690 / 3600)
    cycle(T0 + 1810, old, new)                       # a new hour started: charged in full at once
    assert charged("hourly") == pytest.approx(1.0)
    cycle(T0 + 3000, old)                            # the per-second node is gone: no more charges
    assert charged("hourly") == pytest.approx(1.0) and charged("sec") == pytest.approx(3.6 * 1800 / 3600)



def test_a_give_back_just_after_a_new_billing_period_began_is_counted_late(clock: Clock) -> None:
    hourly = Size("hourly", cores=4, ram_mb=8000, price=1.0, billing_period=3600, shutdown_window=120)
    metrics = Metrics(sizes=(hourly,), clock=clock)
    launched = T0 - 10_000

    def destroyed(at: float, result: str = "ok") -> None:
        snap = Snapshot(now=at, polled_at={"cloud": at, "scheduler": at})
        done = Outcome("destroy", "i-1", result, "destroyed", at, "hourly", launched)
        metrics.observe(CycleReport(snapshot=snap, plan=Plan(now=at), outcomes=(done,)))

    destroyed(launched + 3 * 3600 - 30)      # in the window, before the hour ran out: on time
    destroyed(launched + 500)                # within the first hour: nothing better was possible
    destroyed(launched + 3 * 3600 + 60, result="failed")
    assert value(metrics, "nodemanager_late_give_backs_total", size="hourly") == 0
    destroyed(launched + 3 * 3600 + 60)      # a minute into the fourth hour: paid for nothing
    assert value(metrics, "nodemanager_late_give_backs_total", size="hourly") == 1


def test_drains_their_age_and_waste(metrics: Metrics) -> None:
    metrics.observe(sample_report(T0))
    assert value(metrics, "nodemanager_drains_in_progress") == 1
    assert value(metrics, "nodemanager_drain_oldest_age_seconds") == 1800
    assert value(metrics, "nodemanager_foreign_drains") == 1
    metrics.observe(sample_report(T0 + 60))
    # w8 drains with 16 cores, 6 busy: 10 idle cores for 60 s; the foreign drain is not ours
    assert value(metrics, "nodemanager_drain_unclaimed_core_seconds_total") == 600


def test_badput_counts_what_the_adapters_total_grew_by(metrics: Metrics) -> None:
    metrics.observe_draining(DrainingStats(badput=1000))
    assert value(metrics, "nodemanager_drain_badput_seconds_total") == 0  # history before we looked
    metrics.observe_draining(DrainingStats(badput=1400))
    assert value(metrics, "nodemanager_drain_badput_seconds_total") == 400
    metrics.observe_draining(DrainingStats(badput=0))     # a new adapter: a new baseline, never negative
    metrics.observe_draining(DrainingStats(badput=50))
    assert value(metrics, "nodemanager_drain_badput_seconds_total") == 450


def test_demand(metrics: Metrics) -> None:
    metrics.observe(sample_report())
    assert value(metrics, "nodemanager_demand_jobs") == 7
    assert value(metrics, "nodemanager_demand_cpus") == 2 * 16 + 5
    assert value(metrics, "nodemanager_demand_oldest_wait_seconds") == 600


def test_poll_age_is_measured_when_scraped(metrics: Metrics, clock: Clock) -> None:
    metrics.observe(sample_report(T0))
    assert value(metrics, "nodemanager_poll_age_seconds", input="cloud") == 20
    clock.now += 100  # the daemon hangs: ages keep growing
    assert value(metrics, "nodemanager_poll_age_seconds", input="cloud") == 120
    assert value(metrics, "nodemanager_last_poll_timestamp_seconds", input="scheduler") == T0 - 5
    assert value(metrics, "nodemanager_last_cycle_timestamp_seconds") == T0


def test_call_latency_and_errors_by_kind(metrics: Metrics) -> None:
    metrics.observe_call("cloud", "create_node", 0.3)
    metrics.observe_call("cloud", "create_node", 2.0, ErrorKind.QUOTA)
    metrics.observe_call("scheduler", "poll", 0.01, "transient")
    assert value(metrics, "nodemanager_call_duration_seconds_count", target="cloud",
                 call="create_node") == 2
    assert value(metrics, "nodemanager_call_duration_seconds_bucket", target="cloud",
                 call="create_node", le="0.5") == 1
    assert value(metrics, "nodemanager_call_errors_total", target="cloud", call="create_node",
                 kind="quota") == 1
    assert value(metrics, "nodemanager_call_errors_total", target="scheduler", call="poll",
                 kind="transient") == 1


@pytest.mark.parametrize("target, call", [("database", "poll"), ("cloud", "List Nodes"),
                                          ("cloud", "node-i-0123456789abcdef")])
def test_call_labels_stay_bounded(metrics: Metrics, target: str, call: str) -> None:
    with pytest.raises(ValueError):
        metrics.observe_call(target, call, 0.1)


def test_matrix_reloads_and_the_hash_in_force(metrics: Metrics) -> None:
    metrics.observe_matrix_reload(True, "1" * 64)
    metrics.observe_matrix_reload(False)
    assert value(metrics, "nodemanager_matrix_reloads_total", result="ok") == 1
    assert value(metrics, "nodemanager_matrix_reloads_total", result="error") == 1
    assert value(metrics, "nodemanager_matrix_info", sha256="1" * 64) == 1
    metrics.observe(sample_report(matrix_error="m.matrix:3: unknown value 'idel'"))
    assert value(metrics, "nodemanager_matrix_info", sha256="ab" * 32) == 1
    assert value(metrics, "nodemanager_matrix_info", sha256="1" * 64) is None
    assert value(metrics, "nodemanager_matrix_error") == 1
    metrics.observe(sample_report())
    assert value(metrics, "nodemanager_matrix_error") == 0


@pytest.mark.parametrize("frozen, frozen_by, paused, reason", [
    (None, None, None, None),
    ("input is stale (scheduler poll is 400s old; poll_stale_after 300s)", Freeze.STALE, None, "stale"),
    ("6 of 8 nodes are down or never came up", Freeze.MASS_DOWN, None, "mass_down"),
    (None, None, "maintenance", "paused"),
    ("quota check failed", None, None, "other"),
])
def test_frozen_state_and_why(metrics: Metrics, frozen: str | None, frozen_by: Freeze | None,
                              paused: str | None, reason: str | None) -> None:
    report = sample_report(frozen=frozen, frozen_by=frozen_by, paused=paused)
    assert frozen_reason(report.plan, paused) == reason
    metrics.observe(report)
    for r in ("stale", "mass_down", "paused", "other"):
        assert value(metrics, "nodemanager_actions_frozen", reason=r) == (1 if r == reason else 0)


def test_why_not_counts_each_binding_reason_with_a_bounded_label(metrics: Metrics) -> None:
    from nodemanager.console.whynot import DEMAND_REASONS, NODE_REASONS
    metrics.observe(sample_report())
    assert value(metrics, "nodemanager_why_not", subject="node", reason="min_nodes") == 1
    assert value(metrics, "nodemanager_why_not", subject="node", reason="held") == 1
    assert value(metrics, "nodemanager_why_not", subject="node", reason="matrix") == 3
    assert value(metrics, "nodemanager_why_not", subject="demand", reason="max_nodes") == 1
    assert value(metrics, "nodemanager_why_not", subject="demand", reason="quota") == 0
    family = next(f for f in families(metrics) if f.name == "nodemanager_why_not")
    assert {(s.labels["subject"], s.labels["reason"]) for s in family.samples} == \
        {("node", r) for r in NODE_REASONS} | {("demand", r) for r in DEMAND_REASONS}


def _core_report(now: float, nodes: tuple[CloudNode, ...], workers: tuple[Worker, ...] = (),
                 in_flight: tuple = (), **snap_kw) -> CycleReport:
    """A report whose plan the real core made (the facts metrics read are the core's)."""
    import policy_matrix
    from nodemanager.core import plan
    from nodemanager.scheduler import classified
    from tests.fixtures.observability import CORE
    snap = Snapshot(now=now, polled_at={"cloud": now, "scheduler": now}, cloud_nodes=nodes,
                    workers=tuple(classified(w) for w in workers), in_flight=in_flight, **snap_kw)
    return CycleReport(snapshot=snap, plan=plan(snap, CORE, policy_matrix.load_default()))


def test_paid_time_and_the_core_agree_on_which_vms_are_gone(metrics: Metrics) -> None:
    # one definition of "gone" (model.GONE_STATES): a terminating VM is not paid; a stopped one
    # is still ours, listed and planned for, so its time counts
    nodes = (CloudNode("i-leaving", "n1", "large", T0 - 4000, state="shutting-down"),
             CloudNode("i-stopped", "n2", "small", T0 - 4000, state="stopped"))
    for t in (T0, T0 + 60):
        metrics.observe(_core_report(t, nodes))
    paid = {s.labels["size"]: s.value for f in families(metrics) if f.name == "nodemanager_paid_node_seconds"
            for s in f.samples if s.name.endswith("_total")}
    assert paid == {"small": 60.0}
    assert value(metrics, "nodemanager_estimated_spend_per_hour", size="large") is None


def test_a_drain_being_cancelled_is_no_drain_under_way_as_the_core_says(metrics: Metrics) -> None:
    from nodemanager.model import InFlight
    nodes = (CloudNode("i-1", "w1", "small", T0 - 4000, hostname="w1"),
             CloudNode("i-2", "w2", "small", T0 - 4000, hostname="w2"))
    workers = (Worker("w1", "slurm", state="drng", cpus=4, cpus_busy=4, running_jobs=1, last_heard=T0,
                      draining=True, drain_reason="nodemanager: idle"),
               Worker("w2", "slurm", state="drng", cpus=4, cpus_busy=4, running_jobs=1, last_heard=T0,
                      draining=True, drain_reason="nodemanager: idle"))
    flights = (InFlight("i-1", "drain", T0 - 600, request_id="a"), InFlight("i-2", "drain", T0 - 300, request_id="b"),
               InFlight("i-2", "cancel_drain", T0 - 10))
    report = _core_report(T0, nodes, workers, flights)
    assert [e.our_drain_since for e in report.plan.nodes] == [T0 - 600, None]
    metrics.observe(report)
    assert value(metrics, "nodemanager_drains_in_progress") == 1
    assert value(metrics, "nodemanager_drain_oldest_age_seconds") == 600


@pytest.mark.parametrize("snap_kw, reason", [
    (dict(paused="maintenance"), "paused"),
    (dict(cloud_clock_skew=900.0), "clock_skew"),
])
def test_the_frozen_reason_is_the_cores_typed_one(metrics: Metrics, snap_kw: dict, reason: str) -> None:
    nodes = (CloudNode("i-1", "n1", "small", T0 - 4000),)
    report = _core_report(T0, nodes, **snap_kw)
    assert report.plan.frozen_by == reason
    metrics.observe(report)
    assert value(metrics, "nodemanager_actions_frozen", reason=reason) == 1


def test_a_stale_input_and_a_mass_of_down_nodes_are_told_apart_by_type(metrics: Metrics) -> None:
    stale = _core_report(T0, (CloudNode("i-1", "n1", "small", T0 - 4000),))
    stale = dataclasses.replace(stale, snapshot=dataclasses.replace(
        stale.snapshot, polled_at={"cloud": T0, "scheduler": T0 - 3600}))
    from nodemanager.core import plan
    import policy_matrix
    from tests.fixtures.observability import CORE
    stale = dataclasses.replace(stale, plan=plan(stale.snapshot, CORE, policy_matrix.load_default()))
    assert stale.plan.frozen_by == "stale"
    metrics.observe(stale)
    assert value(metrics, "nodemanager_actions_frozen", reason="stale") == 1
    down = tuple(CloudNode(f"i-{k}", f"n{k}", "small", T0 - 4000, hostname=f"w{k}") for k in range(8))
    workers = tuple(Worker(f"w{k}", "slurm", state="down*", cpus=4, last_heard=T0 - 30) for k in range(8))
    report = _core_report(T0 + 30, down, workers)
    assert report.plan.frozen_by == "mass_down", report.plan.frozen
    metrics.observe(report)
    assert value(metrics, "nodemanager_actions_frozen", reason="mass_down") == 1


def test_labels_from_queue_and_scheduler_data_stay_bounded_in_a_real_scrape(status_server, clock: Clock) -> None:
    """3,000 queued jobs no size can run, each of its own signature, and 60 workers in odd states
    used to give 3,000 and 60 series: the /metrics page keeps the largest few and sums the rest
    as ``other``; the status page still names every signature."""
    import policy_matrix
    import requests

    from nodemanager.core import plan
    from nodemanager.model import Demand
    from nodemanager.console.status_document import StatusView
    from tests.core_world import settings, snap

    demand = [Demand(cpus=1, ram_mb=1000, count=1 + (i == 7) * 50, sizes=frozenset(),
                     unmatched=f"no size can run jobs like {i}.0 (signature {i:08x}): it asks too much")
              for i in range(3000)]
    workers = [Worker(f"w{i}", "slurm", state=f"odd{i}") for i in range(60)]
    s = snap(demand=demand, workers=workers)
    report = CycleReport(snapshot=s, plan=plan(s, settings(), policy_matrix.load_default()))
    status_server.metrics.observe(report)
    status_server.holder["view"] = StatusView(report=report, last_cycle_at=clock.now)
    base = f"http://127.0.0.1:{status_server.address[1]}"
    scraped = {f.name: f.samples for f in text_string_to_metric_families(requests.get(base + "/metrics", timeout=5).text)}
    unmatched = {smp.labels["signature"]: smp.value for smp in scraped["nodemanager_unmatched_jobs"]}
    assert len(unmatched) == 21 and sum(unmatched.values()) == 3050   # the 20 largest and other
    assert unmatched["1 cpus, 1000 MB, signature 00000007"] == 51            # the largest is kept
    assert unmatched["other"] == 3050 - sum(v for k, v in unmatched.items() if k != "other")
    states = {smp.labels["state"]: smp.value for smp in scraped["nodemanager_workers"]}
    assert len(states) == 21 and sum(states.values()) == 60
    page = requests.get(base + "/status.json", timeout=5).json()["why_not_demand"]
    assert len({w["key"] for w in page if w["reason"] == "unmatched"}) == 3000
