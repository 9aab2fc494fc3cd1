"""The daemon's cloud adapter under faults: libcloud's real EC2 driver against moto, through the
fault-injecting proxy (real HTTP error replies), driven by the real Controller and Actuator for a
few cycles on a virtual clock. The scheduler side is scripted: a worker joins for each instance.

What a user would notice is checked: how many RunInstances/TerminateInstances reached the cloud
(no retry storm, no second VM for the same demand, no second destroy), and that the pool ends
the right size.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from nodemanager.cycle.actuate import Actuator
from nodemanager.cycle.controller import Controller
from nodemanager.model import Demand, Size, provider_id
from nodemanager.configuration.settings import CloudSettings, CoreSettings, PollSettings, Settings
from tests.fixtures.daemon import ScriptedScheduler, Time

pytestmark = pytest.mark.ec2

SIZE = Size("small", cores=2, ram_mb=4096, price=0.1, instance_type="t3.small")
STEP = 5.0


class Ec2Loop:
    """Controller + Actuator over LibcloudCloud (EC2 on moto via the proxy) and a scripted scheduler
    that registers a worker for every running instance; a joining worker takes one queued job
    (busy) if there is one, and its jobs end after ``job_seconds``."""

    def __init__(self, ec2_cloud, proxy, *, max_nodes: int = 4, job_seconds: float = 30.0,
                 journal=None) -> None:
        self.time = Time(time.time())            # moto stamps launch times with the real clock
        self.proxy = proxy
        self.settings = Settings(core=CoreSettings(sizes=(SIZE,), max_nodes=max_nodes, boot_grace=600.0,
                                                   idle_grace=60.0, poll_stale_after=120.0),
                                 cloud=CloudSettings(quota_backoff=300.0),
                                 poll=PollSettings(max_backoff=60.0))
        self.sched = ScriptedScheduler(self.time)
        self.journal = journal
        self.start(ec2_cloud)
        self.reports = []
        self.job_seconds = job_seconds
        self.job_end: dict[str, float] = {}

    def start(self, ec2_cloud, cluster: str | None = None) -> None:
        """A new process: a new cloud adapter, actuator and controller (nothing kept in memory);
        the scheduler and the reservation journal (on disk) are what outlives the old one."""
        import policy_matrix
        self.cloud = ec2_cloud(cluster, clock=self.time, sleep=lambda s: self.time.advance(s))
        self.actuator = Actuator(self.cloud, self.sched, self.settings, clock=self.time, journal=self.journal)
        self.ctl = Controller(self.settings, policy_matrix.load_default(), self.actuator, clock=self.time)

    def live(self):
        return [n for n in self.cloud.list_nodes() if n.state in ("pending", "running")]

    def cycle(self):
        from nodemanager.cloud.port import CloudError
        try:
            nodes = self.cloud.list_nodes()
        except CloudError:
            nodes = self.reports[-1].snapshot.cloud_nodes if self.reports else []
        for n in nodes:
            if n.state == "running" and n.name not in self.sched.workers:
                queued = sum(d.count for d in self.sched.demand)
                self.sched.add(n.name, provider_id(n), running_jobs=1 if queued else 0)
                if queued:
                    d = self.sched.demand[0]
                    self.sched.demand = ([replace(d, count=d.count - 1)] if d.count > 1 else []) + self.sched.demand[1:]
                    self.job_end[n.name] = self.time.now + self.job_seconds
        for name, w in list(self.sched.workers.items()):
            if w.draining and not w.running_jobs and w.state != "drain":
                self.sched.workers[name] = replace(w, state="drain")     # SLURM: IDLE+DRAIN
        for name, end in list(self.job_end.items()):
            if end <= self.time.now and name in self.sched.workers:
                self.sched.set_jobs(name, 0)
                del self.job_end[name]
        live = {n.name for n in nodes if n.state in ("pending", "running")}
        for name in [w for w in self.sched.workers if w not in live]:
            del self.sched.workers[name]
        report = self.ctl.cycle(nodes, self.time.now, self.sched.poll())
        self.reports.append(report)
        return report

    def run(self, cycles: int) -> None:
        for _ in range(cycles):
            self.cycle()
            self.time.advance(STEP)

    def outcomes(self, kind: str, result: str | None = None):
        return [o for r in self.reports for o in r.outcomes if o.kind == kind and (result is None or o.result == result)]


@pytest.fixture
def loop(ec2_cloud, ec2_proxy):
    return Ec2Loop(ec2_cloud, ec2_proxy)


@pytest.mark.parametrize("status, code", [(500, "InternalError"), (503, "Unavailable")])
def test_server_errors_on_create_are_not_hammered_and_the_demand_is_met_later(loop, status, code):
    """A 5xx on RunInstances may or may not have created the VM: the actuator backs off, waits
    for a listing to show it (up to BOOT_LISTING_TIMEOUT), and boots again only after that."""
    from nodemanager.cycle.actuate import BOOT_LISTING_TIMEOUT
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=2)]
    loop.proxy.fail("RunInstances", status, code, times=2)
    loop.run(6)                                        # 30 s: backoff 10 s, then 20 s
    assert loop.proxy.count("RunInstances") == 2
    assert all("transient" in o.detail for o in loop.outcomes("boot", "failed"))
    loop.run(int(BOOT_LISTING_TIMEOUT / STEP) + 10)
    assert len(loop.outcomes("boot", "ok")) == 2
    assert loop.proxy.count("RunInstances") == 2 + 2


def test_throttled_create_is_retried_after_retry_after(loop):
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.proxy.fail("RunInstances", 429, "RequestLimitExceeded", headers={"Retry-After": "30"})
    loop.run(12)                                       # 60 s: twice the Retry-After
    assert loop.proxy.count("RunInstances") == 2 and len(loop.live()) == 1


def test_throttling_with_retry_after_is_obeyed(loop):
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.proxy.fail("RunInstances", 429, "RequestLimitExceeded", headers={"Retry-After": "30"})
    loop.cycle()
    assert loop.proxy.count("RunInstances") == 1
    failed = loop.outcomes("boot", "failed")
    assert failed and "rate_limit" in failed[0].detail and "30s" in failed[0].detail
    for _ in range(5):                                 # 25 s < Retry-After: no call at all
        loop.time.advance(STEP)
        loop.cycle()
    assert loop.proxy.count("RunInstances") == 1


@pytest.mark.parametrize("status, code, kind", [(400, "InstanceLimitExceeded", "quota"),
                                                (500, "InsufficientInstanceCapacity", "capacity")])
def test_quota_and_capacity_errors_stop_booting_that_size_for_a_while(loop, status, code, kind):
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=3)]
    loop.proxy.fail("RunInstances", status, code, times=0)         # every time
    loop.run(30)                                                    # 150 s < quota_backoff 300 s
    assert loop.proxy.count("RunInstances") == 1
    report = loop.reports[-1]
    assert SIZE.name in report.snapshot.blocked_sizes
    assert kind in loop.outcomes("boot", "failed")[0].detail
    loop.proxy.faults.clear()
    loop.run(40)                                                    # past the backoff: boots again
    assert len(loop.live()) == 3


def test_create_that_fails_but_creates_is_adopted_not_booted_twice(loop):
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.proxy.fail("RunInstances", 500, "InternalError", forward=True)
    loop.run(10)
    assert len(loop.live()) == 1
    assert loop.proxy.count("RunInstances") == 1
    assert any("raised but the node is listed" in o.detail for o in loop.outcomes("boot", "ok"))


def test_destroy_that_fails_but_destroys_is_settled_by_the_listing(loop):
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert len(loop.live()) == 1
    loop.sched.demand = []
    loop.proxy.fail("TerminateInstances", 503, "Unavailable", forward=True)
    loop.run(40)                                       # idle grace 60 s, drain, destroy
    assert loop.live() == []
    assert loop.proxy.count("TerminateInstances") >= 1
    assert loop.outcomes("destroy", "ok")


def test_a_destroyed_instance_is_terminated_once(loop):
    """Was: terminated instances still in the EC2 listing were destroyed again every cycle."""
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=2)]
    loop.run(3)
    loop.sched.demand = []
    loop.run(160)                                      # past boot_grace (600 s) of the dead VMs
    assert loop.live() == []
    assert loop.proxy.count("TerminateInstances") == 2


def test_an_ec2_endpoint_without_tls_can_be_configured(tmp_path, moto_server):
    import subprocess
    import sys
    config = tmp_path / "nm.ini"
    config.write_text(f"""[Cloud]\ndriver = ec2\nkey = AKID\nsecret = x\nregion = us-east-1
host = 127.0.0.1\nport = {moto_server.port}\nsecure = no\n[Cloud Create]\nimage = ami-12c6146b
[Scheduler]\ntype = slurm\n[Manage]\nport = -1\n[Size small]\ncores = 2\nram_mb = 1000\n""")
    config.chmod(0o600)
    proc = subprocess.Popen([sys.executable, "-m", "nodemanager", "run", "--dry-run", "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=4)
    except subprocess.TimeoutExpired:               # still running after 4 s: it started
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "Traceback" not in out, out[-800:]


def test_a_crash_after_a_create_whose_instance_the_next_listings_miss_makes_no_twin(
        ec2_cloud, ec2_proxy, moto_server, tmp_path):
    """The process dies right after RunInstances; DescribeInstances leaves the new instance out
    for a while (eventual consistency). The next process must neither boot a second instance
    under the same name nor boot again for the demand the first one covers: the reservation
    journal, written before the create, holds both until a listing shows the instance."""
    from nodemanager.cloud.port import TAG_REQUEST
    from nodemanager.cycle.journal import ReservationJournal
    journal = ReservationJournal(str(tmp_path / "state" / "test.reservations"))
    loop = Ec2Loop(ec2_cloud, ec2_proxy, journal=journal)
    cluster = loop.cloud.cluster
    truth = ec2_cloud(cluster, port=moto_server.port)               # moto directly: no lag
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.cycle()
    [first] = truth.list_nodes()
    [reserved] = journal.load()
    assert (reserved.name, reserved.token) == (first.name, first.tags[TAG_REQUEST])
    # what moto supports of idempotency: the request id reaches EC2 as the ClientToken
    assert ec2_proxy.params["RunInstances"][-1]["ClientToken"] == [reserved.token]
    ec2_proxy.hide(first.id)
    loop.start(ec2_cloud, cluster)                                   # crash: a new process
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=2)]       # one more job: one more VM
    for _ in range(6):                                               # 30 s of a lagging listing
        loop.cycle()
        loop.time.advance(STEP)
        names = [n.name for n in truth.list_nodes() if n.state in ("pending", "running")]
        assert len(names) == len(set(names)), f"two instances share a name: {sorted(names)}"
    assert ec2_proxy.count("RunInstances") == 2
    ec2_proxy.show()
    loop.run(2)
    assert [o.detail for o in loop.outcomes("boot", "ok") if "previous process" in o.detail]
    assert journal.load() == []                                      # compacted once listed
    names = sorted(n.name for n in truth.list_nodes() if n.state in ("pending", "running"))
    prefix = loop.settings.cloud.cluster
    assert names == [f"{prefix}-small-1", f"{prefix}-small-2"], names
    loop.run(int(300 / STEP))                                        # jobs end, idle VMs go
    assert ec2_proxy.count("RunInstances") == 2 and loop.live() == []


def test_a_create_that_timed_out_after_reaching_the_cloud_is_retried_with_its_client_token(
        ec2_cloud, ec2_proxy, moto_server):
    """RunInstances reaches EC2, which makes the VM, but the reply comes after the client gave up
    (libcloud's timeout); the process dies, and the listings miss the new VM for a while. The next
    process boots that name again: with the same ClientToken (deployment, name, time window),
    which EC2 answers with the first create's instance (the proxy answers a token it has seen so,
    as AWS does; moto alone would make a second VM). One VM for one job."""
    from nodemanager.core.identity import TOKEN_WINDOW
    from nodemanager.cloud.port import TAG_REQUEST
    # a clock 60 s into a ClientToken window (both creates in one window), EC2's told alike
    shift = time.time() % TOKEN_WINDOW - 60
    ec2_proxy.date_offset = -shift

    def cloud(cluster=None, **kw):
        return ec2_cloud(cluster, wall_clock=lambda: time.time() - shift, timeout=1.0, **kw)

    loop = Ec2Loop(cloud, ec2_proxy)
    loop.time.now = time.time() - shift
    loop.settings = replace(loop.settings, cloud=replace(loop.settings.cloud, deployment_id="d-tokenreplay"))
    cluster = loop.cloud.cluster
    loop.start(cloud, cluster)
    truth = ec2_cloud(cluster, port=moto_server.port)                # moto directly
    ec2_proxy.idempotent = True
    ec2_proxy.stall("RunInstances", 3.0)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.cycle()
    [boot] = loop.outcomes("boot")
    assert boot.result == "failed", boot                               # timed out at the client
    deadline = time.monotonic() + 30                                   # ... but made by the cloud
    while not truth.list_nodes():
        assert time.monotonic() < deadline, "moto never made the VM"
        time.sleep(0.2)
    [made] = truth.list_nodes()
    ec2_proxy.hide(made.id)
    loop.start(cloud, cluster)                                         # crash: a new process
    for _ in range(3):
        loop.cycle()
        loop.time.advance(STEP)
    tokens = [p["ClientToken"] for p in ec2_proxy.params["RunInstances"]]
    assert len(tokens) == 2 and tokens[0] == tokens[1], tokens         # the retry, same token
    ec2_proxy.show()
    loop.run(2)
    live = [n for n in truth.list_nodes() if n.state in ("pending", "running")]
    assert [n.id for n in live] == [made.id], live                     # one VM, the first one
    assert made.tags[TAG_REQUEST]
