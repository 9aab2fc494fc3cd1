"""Who spent what: the daemon's ledger (``[Manage] spend_ledger``) from the jobs the scheduler says
run on each node, kept across a restart, read by `nodemanager cost`, on the status page and in
/metrics; the attribution's arithmetic."""

import json
import pathlib
from dataclasses import replace

import pytest

from nodemanager.actors.clock import ManualClock
from nodemanager.cli import main
from nodemanager.configuration.config import load
from nodemanager.console.page import render_html
from nodemanager.console.status_document import status_document
from nodemanager.core.attribution import NOBODY, NodeUse, attribute, top
from nodemanager.daemon import Daemon
from nodemanager.model import Demand, JobOwner
from nodemanager.sim.cloud import SimCloud
from tests.fixtures.daemon import ScriptedScheduler

REPO = pathlib.Path(__file__).resolve().parent.parent
START = 1_000_000.0


def _config(tmp_path, ledger=True):
    text = (REPO / "config.example.ini").read_text()
    text = text.replace("port = 8989", "port = -1").replace("\nstate_dir =\n", "\nstate_dir = state\n")
    if not ledger:
        text = text.replace("spend_ledger = true", "spend_ledger = false")
    path = tmp_path / "nm.ini"
    path.write_text(text)
    return str(path)


class _Site:
    """The daemon on an in-process cloud and a scripted scheduler whose workers say whose jobs run."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.clock = ManualClock(START)
        self.sched = ScriptedScheduler(self.clock)
        self.cloud = SimCloud(clock=self.clock, sizes=load(cfg).core.sizes, boot_delay=0.0)
        self.daemon = None

    def start(self):
        self.daemon = Daemon(load(self.cfg), config_path=self.cfg, clock=self.clock, stop_timeout=5.0,
                             ports=(self.cloud, self.sched, None)).start()
        assert self.daemon.system.settle(10.0)
        return self.daemon

    def run(self, seconds, step=5.0):
        for _ in range(int(seconds / step)):
            for n in self.cloud.list_nodes():
                if n.state == "running" and n.name not in self.sched.workers:
                    self.sched.add(n.name, n.id)
                    self.sched.demand = []
            self.clock.advance(step)
            assert self.daemon.system.settle(10.0)

    def jobs(self, *owners):
        for name, w in self.sched.workers.items():
            cores = sum(o.cores for o in owners)
            self.sched.workers[name] = replace(w, jobs_by=tuple(owners), running_jobs=len(owners),
                                               cpus_busy=cores, state="busy" if owners else "idle")


@pytest.fixture
def site(tmp_path):
    made = []

    def make(ledger=True):
        s = _Site(_config(tmp_path, ledger))
        made.append(s)
        return s
    yield make
    for s in made:
        if s.daemon is not None:
            s.daemon.stop()


def _cost(cfg, capsys, *args):
    code = main(["cost", "--config", cfg, "--since", "1970-01-01", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_a_nodes_whole_life_is_shared_by_its_jobs_core_seconds_across_a_restart(site, capsys):
    s = site()
    s.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    s.start()
    s.run(20)                                        # one VM booted and joined, idle so far
    assert len(s.sched.workers) == 1
    s.jobs(JobOwner("alice", "physics", 2))
    s.run(600)
    s.daemon.stop()                                  # down for a minute while alice's job runs
    s.clock.advance(60)
    s.start()
    s.jobs(JobOwner("bob", "chemistry", 1))
    s.run(600)
    s.jobs()
    s.run(300)                                       # idle grace 60 s: drained and destroyed
    assert not [n for n in s.cloud.list_nodes() if n.state == "running"]
    s.daemon.stop()
    rows = json.loads(_cost(s.cfg, capsys, "--by", "user", "--format", "json"))["rows"]
    by = {r["user"]: r for r in rows}
    assert set(by) == {"alice", "bob"}
    # alice ran 2 cores x 660 s (the minute down included), bob 1 core x 600 s: the node's whole
    # life (its boot and idle time too) is shared 1320 : 600
    total = by["alice"]["node_hours"] + by["bob"]["node_hours"]
    assert 1260 / 3600 <= total <= 1360 / 3600
    assert by["alice"]["node_hours"] == pytest.approx(total * 1320 / 1920, rel=0.02)
    assert by["alice"]["money"] == pytest.approx(by["alice"]["node_hours"] * 0.17, rel=1e-3)
    assert (by["alice"]["core_hours"], by["bob"]["core_hours"]) == pytest.approx((1320 / 3600, 600 / 3600), rel=0.02)
    groups = json.loads(_cost(s.cfg, capsys, "--by", "group", "--format", "json"))["rows"]
    assert {r["group"] for r in groups} == {"physics", "chemistry"}
    csv = _cost(s.cfg, capsys, "--by", "size", "--format", "csv").splitlines()
    assert csv[0] == "size,node_hours,money,core_hours" and csv[1].startswith("small,")
    table = _cost(s.cfg, capsys, "--by", "user")
    # the table's share is the JSON's (the daemon's timing moves both by a few seconds)
    line = table.splitlines()[1]
    assert line.startswith("alice"), table
    assert float(line.split("%")[0].split()[-1]) == pytest.approx(100 * by["alice"]["node_hours"] / total, abs=0.15)


def test_status_page_and_metrics_show_todays_top_spenders_bounded(site):
    s = site()
    text = pathlib.Path(s.cfg).read_text().replace("spend_top = 10", "spend_top = 1")
    pathlib.Path(s.cfg).write_text(text)
    s.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    d = s.start()
    s.run(20)
    s.jobs(JobOwner("alice", "physics", 2), JobOwner("bob", "chemistry", 1))
    s.run(120)
    doc = status_document(d.status_view(), None, s.clock())
    assert [r["user"] for r in doc["top_spenders_today"]] == ["alice", "bob"]
    assert "top spenders today" in render_html(doc)
    reg = d.metrics.registry
    # one series of its own (spend_top 1), the rest as other
    assert reg.get_sample_value("nodemanager_spend_today_node_hours", {"by": "user", "name": "alice"}) > 0
    assert reg.get_sample_value("nodemanager_spend_today_node_hours", {"by": "user", "name": "other"}) > 0
    assert reg.get_sample_value("nodemanager_spend_today_node_hours", {"by": "user", "name": "bob"}) is None
    assert reg.get_sample_value("nodemanager_spend_today_money", {"by": "group", "name": "physics"}) > 0


def test_the_ledger_is_kept_without_the_option_and_cost_reads_it(tmp_path, capsys):
    """A site configuration that never names spend_ledger (as the quickstarts' do not) keeps the
    ledger: ``nodemanager cost`` answers with whose jobs ran."""
    cfg = pathlib.Path(_config(tmp_path))
    cfg.write_text("\n".join(line for line in cfg.read_text().splitlines()
                             if not line.startswith("spend_ledger")) + "\n")
    s = _Site(str(cfg))
    s.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    s.start()
    s.run(20)
    s.jobs(JobOwner("alice", "physics", 2))
    s.run(120)
    s.daemon.stop()
    rows = json.loads(_cost(str(cfg), capsys, "--by", "user", "--format", "json"))["rows"]
    assert [r["user"] for r in rows] == ["alice"] and rows[0]["node_hours"] > 0


def test_spend_ledger_false_keeps_no_ledger_nor_series(site, capsys):
    s = site(ledger=False)
    s.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    d = s.start()
    s.run(20)
    s.jobs(JobOwner("alice", "physics", 2))
    s.run(60)
    assert "top_spenders_today" not in status_document(d.status_view(), None, s.clock())
    assert d.metrics.registry.get_sample_value("nodemanager_spend_today_node_hours",
                                               {"by": "user", "name": "alice"}) is None
    d.stop()
    assert main(["cost", "--config", s.cfg]) == 1
    assert "spend_ledger is off" in capsys.readouterr().err


def test_attribution_shares_idle_time_pro_rata_windows_and_bounds_the_rows():
    uses = [NodeUse("i-1", "small", 1.0, 0.0, 3600.0, {("alice", "g1"): 3 * 1800.0, ("bob", "g1"): 1800.0}),
            NodeUse("i-2", "big", 2.0, 0.0, 1800.0, {}),
            NodeUse("i-3", "small", 1.0, 7200.0, 10800.0, {("carol", "g2"): 100.0})]
    by = {r.name: r for r in attribute(uses, 0.0, 3600.0, "user")}
    assert (by["alice"].node_hours, by["bob"].node_hours, by[NOBODY].node_hours) == (0.75, 0.25, 0.5)
    assert by[NOBODY].money == 1.0 and "carol" not in by
    # a window holding half a node's life takes half its hours, split by its whole life's shares
    half = {r.name: r.node_hours for r in attribute(uses, 1800.0, 3600.0, "user")}
    assert half == {"alice": 0.375, "bob": 0.125}
    rows = attribute(uses, 0.0, 1e9, "user")
    bounded = top(rows, 2)
    assert [r.name for r in bounded][-1] == "other" and len(bounded) == 3
    assert sum(r.money for r in bounded) == pytest.approx(sum(r.money for r in rows))


def test_the_simulator_says_who_spent_what_from_the_swf_user_and_group(tmp_path, capsys):
    # (submit, run time, cores, user, group): user 7 runs 4 cores twice as long as user 9 runs 4
    jobs = [(1000, 1200, 4, 7, 1), (1000, 600, 4, 9, 2)]
    trace = tmp_path / "t.swf"
    trace.write_text("; Version: 2.2\n; Computer: synthetic\n; UnixStartTime: 0\n" + "".join(
        f"{i} {s} 0 {r} {c} -1 -1 {c} 1800 -1 1 {u} {g} -1 1 1 -1 -1\n"
        for i, (s, r, c, u, g) in enumerate(jobs, 1)))
    code = main(["simulate", "--trace", str(trace), "--cores-per-node", "8", "--jobs", "1", "--json",
                 "--by", "user"])
    out = capsys.readouterr()
    assert code == 0, out.err
    [run] = json.loads(out.out)["runs"]
    by = {r["user"]: r for r in run["spend"]}
    assert set(by) == {"user 7", "user 9"}  # both on one 8-core node
    assert by["user 7"]["node_hours"] + by["user 9"]["node_hours"] == pytest.approx(run["paid_node_hours"], abs=1e-3)
    assert by["user 7"]["node_hours"] == pytest.approx(2 * by["user 9"]["node_hours"], rel=0.01)
    assert by["user 7"]["core_hours"] == pytest.approx(4 * 1200 / 3600, rel=0.01)
    code = main(["simulate", "--trace", str(trace), "--cores-per-node", "8", "--jobs", "1", "--by", "group"])
    text = capsys.readouterr().out
    assert "who spent what under nodemanager, by group" in text and "group 1" in text and "group 2" in text
