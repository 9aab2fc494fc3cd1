"""Several clouds in one deployment: a config with two ``[Cloud NAME]`` sections (two EC2 regions
of the local EC2 endpoint, through the fault proxy) read by the config loader, the cloud port the
daemon builds from it, and the real Controller and Actuator over a scripted scheduler and a
virtual clock. Jobs boot in the cheaper region, move to the other on ``InsufficientInstanceCapacity``
and come back when the breaker's probe succeeds; a region that stops answering freezes its own
nodes only; two clouds' VMs are never confused, even when the clouds give them the same id."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from nodemanager.configuration import config
from nodemanager.console.status_document import StatusView, status_document
from nodemanager.model import Demand
from nodemanager.commands.node_text import why_text
from nodemanager.console.metrics import Metrics
from nodemanager.console.page import render_html as page_html
from nodemanager.ports import build_cloud
from tests.fixtures.moto import EC2_IMAGE
from tests.test_cloud_gce import gce_api, service_key  # noqa: F401  (fixtures)
from tests.test_faults_ec2 import Ec2Loop

pytestmark = pytest.mark.ec2

EAST, WEST = "us-east-1", "us-west-2"


def two_regions(port: int, cluster: str, *, east_price: float = 0.10, west_price: float = 0.12) -> str:
    return f"""
[Cloud]
driver = ec2
key = AKIDNODEMANAGERTEST
secret = moto-secret-not-real
host = 127.0.0.1
port = {port}
secure = no
cluster = {cluster}
calls_per_second = 1000
quota_backoff = 300
capacity_cooldown = 300

[Cloud Create]
image = {EC2_IMAGE}

[Cloud east]
region = {EAST}

[Cloud west]
region = {WEST}
""" + "".join(f"""
[Size {region}-small]
cloud = {region}
instance_type = t3.small
cores = 2
ram_mb = 4096
price = {price}
""" for region, price in (("east", east_price), ("west", west_price)))


class CloudsLoop(Ec2Loop):
    """:class:`Ec2Loop` over the cloud port the daemon builds from ``settings`` (several clouds)."""

    def start(self, ec2_cloud, cluster=None):
        import policy_matrix
        from nodemanager.cycle.actuate import Actuator
        from nodemanager.cycle.controller import Controller
        if not self.settings.clouds:   # Ec2Loop's own settings, before the test's are set
            return super().start(ec2_cloud, cluster)
        self.cloud = build_cloud(self.settings, self.time)
        self.actuator = Actuator(self.cloud, self.sched, self.settings, clock=self.time)
        self.ctl = Controller(self.settings, policy_matrix.load_default(), self.actuator, clock=self.time)


@pytest.fixture
def cluster():
    return f"multi-{uuid.uuid4().hex[:10]}"


def make_loop(ec2_cloud, ec2_proxy, text: str) -> CloudsLoop:
    settings = config.loads(text)
    loop = CloudsLoop(ec2_cloud, ec2_proxy, max_nodes=10, job_seconds=100000.0)
    core = replace(loop.settings.core, sizes=settings.core.sizes, size_digests=settings.core.size_digests,
                   cloud_max_nodes=settings.core.cloud_max_nodes)
    loop.settings = replace(settings, core=core, poll=loop.settings.poll)
    loop.start(ec2_cloud)
    return loop


def booted(loop, since=0):
    return [o.size for r in loop.reports[since:] for o in r.outcomes if o.kind == "boot" and o.result == "ok"]


@pytest.fixture
def ec2_cloud_in(moto_server):
    """A one-region adapter on the EC2 endpoint itself (not the proxy: no fault injected) for
    checking what each region holds."""
    from nodemanager.cloud.libcloud_driver import LibcloudCloud
    from nodemanager.configuration.settings import CloudSettings

    def make(cluster, region):
        return LibcloudCloud(CloudSettings(
            driver="ec2", cluster=cluster, calls_per_second=0.0,
            driver_args={"key": "AKIDNODEMANAGERTEST", "secret": "moto-secret-not-real", "region": region,
                         "host": "127.0.0.1", "port": str(moto_server.port), "secure": "no"},
            create_args={"image": EC2_IMAGE}))
    return make


def in_region(ec2_cloud_in, cluster, region):
    return sorted(n.name for n in ec2_cloud_in(cluster, region).list_nodes() if n.state in ("pending", "running"))


def test_jobs_boot_in_the_cheaper_region_move_on_a_capacity_error_and_come_back(
        ec2_cloud, ec2_proxy, ec2_cloud_in, cluster):
    loop = make_loop(ec2_cloud, ec2_proxy, two_regions(ec2_proxy.port, cluster))
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert booted(loop) == ["east-small"]
    assert in_region(ec2_cloud_in, cluster, EAST) == [f"{cluster}-east-small-1"]
    assert in_region(ec2_cloud_in, cluster, WEST) == []
    listed = loop.reports[-1].snapshot.cloud_nodes
    assert [n.cloud for n in listed] == ["east"] and listed[0].id.startswith("east:i-")

    # the cheaper region has no capacity: its breaker opens and the job goes west
    ec2_proxy.fail("RunInstances", 500, "InsufficientInstanceCapacity", times=1, region=EAST)
    n = len(loop.reports)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert booted(loop, n) == ["west-small"]
    assert in_region(ec2_cloud_in, cluster, WEST) == [f"{cluster}-west-small-1"]
    report = loop.reports[-1]
    assert list(report.snapshot.open_breakers) == ["east-small"]
    # the status page says where queued work goes and why the other cloud lost
    first = next(r for r in loop.reports[n:] if r.plan.boots).plan.clouds
    assert [c.cloud for c in first] == ["east"] and first[0].lost == ("west: dearer (west-small at 0.12/h per job, "
                                                                     "east-small at 0.1/h)",)
    report = next(r for r in loop.reports[n:] if [b.size for b in r.plan.boots] == ["west-small"])
    doc = status_document(StatusView(report=report, last_cycle_at=loop.time.now), None, loop.time.now)
    placements = doc["placement"]
    assert [p["cloud"] for p in placements] == ["west"]
    assert placements[0]["why"].startswith("1 job(s) of 2 cpus, 1000 MB go to cloud west (west-small); east: ")
    assert "east-small: capacity breaker open" in placements[0]["why"]
    assert "[cloud] 1 job(s) of 2 cpus, 1000 MB go to cloud west" in why_text(doc, None)
    assert "go to cloud west" in page_html(doc)
    loop.sched.demand = []

    # the cooldown ends: one probe boot in the cheaper region succeeds, and work comes back there
    loop.time.advance(300.0)
    n = len(loop.reports)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert booted(loop, n) == ["east-small"]
    assert not loop.reports[-1].snapshot.open_breakers
    n = len(loop.reports)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=2)]
    loop.run(3)
    assert booted(loop, n) == ["east-small", "east-small"]
    assert len(in_region(ec2_cloud_in, cluster, EAST)) == 4


def test_a_region_that_stops_answering_freezes_only_its_own_nodes(ec2_cloud, ec2_proxy, ec2_cloud_in, cluster):
    loop = make_loop(ec2_cloud, ec2_proxy, two_regions(ec2_proxy.port, cluster, west_price=0.09))
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(2)
    ec2_proxy.fail("RunInstances", 500, "InsufficientInstanceCapacity", times=1, region=WEST)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert sorted(booted(loop)) == ["east-small", "west-small"]
    east, west = in_region(ec2_cloud_in, cluster, EAST), in_region(ec2_cloud_in, cluster, WEST)
    assert len(east) == len(west) == 1

    # west stops answering; past poll_stale_after its listing is too old to act on
    ec2_proxy.fail("DescribeInstances", 503, "Unavailable", times=0, region=WEST)
    loop.run(30)   # 150 s
    report = loop.reports[-1]
    assert report.snapshot.cloud_polled["west"] < loop.time.now - 120
    metrics = Metrics(sizes=loop.settings.core.sizes, clock=loop.time)
    metrics.observe(report)
    age = {i: metrics.registry.get_sample_value("nodemanager_poll_age_seconds", {"input": i})
           for i in ("cloud", "cloud:east", "cloud:west")}
    assert age["cloud"] == age["cloud:east"] == 5.0 and age["cloud:west"] >= 150  # one step since the cycle
    # both nodes' jobs end: east's node goes back, west's is held where it is
    for name in list(loop.sched.workers):
        loop.sched.set_jobs(name, 0)
    loop.job_end.clear()
    loop.run(40)   # past idle_grace
    assert in_region(ec2_cloud_in, cluster, EAST) == []
    assert in_region(ec2_cloud_in, cluster, WEST) == west
    explained = {e.name: e for e in loop.reports[-1].plan.nodes}
    held = explained[west[0]]
    assert held.blocked_by == "stale" and "cloud west's listing is" in held.reason
    assert not [o for r in loop.reports for o in r.outcomes if o.node.startswith("west:") and o.kind != "boot"]

    # new nodes are not bought in the silent region, though it is the cheaper one (one job takes
    # its idle node: the scheduler still hears from it)
    n = len(loop.reports)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=2)]
    loop.run(3)
    assert booted(loop, n) == ["east-small"]
    choice = next(r for r in loop.reports[n:] if r.plan.boots).plan.clouds[0]
    assert choice.cloud == "east" and "west-small: not booted: cloud west's listing is" in choice.lost[0]

    # west answers again: once idle, its node is given back too
    ec2_proxy.faults.clear()
    for name in list(loop.sched.workers):
        loop.sched.set_jobs(name, 0)
    loop.job_end.clear()
    loop.run(40)
    assert in_region(ec2_cloud_in, cluster, WEST) == []


def test_two_clouds_that_give_the_same_ids_are_never_confused(tmp_path):
    """Two clouds (libcloud's dummy cloud, in process) that list a VM each under the same id."""
    from nodemanager.model import Size
    text = """
[Cloud]
driver = dummy
cluster = twins
calls_per_second = 1000
[Cloud a]
creds = 0
[Cloud b]
creds = 0
[Size small-a]
cloud = a
cores = 2
ram_mb = 4096
price = 0.1
[Size small-b]
cloud = b
cores = 2
ram_mb = 4096
price = 0.1
"""
    settings = config.loads(text)
    cloud = build_cloud(settings, lambda: 1000.0)
    sizes = {s.name: s for s in settings.core.sizes}
    assert isinstance(sizes["small-a"], Size) and sizes["small-a"].cloud == "a"
    one = cloud.create_node(sizes["small-a"], "twins-small-a-1", {"nodemanager-cluster": "twins"})
    two = cloud.create_node(sizes["small-b"], "twins-small-b-1", {"nodemanager-cluster": "twins"})
    # cloud b gives its VM the id cloud a gave its own (ids are unique per cloud only)
    raw = one.id.split(":", 1)[1]
    next(n for n in cloud.clouds["b"]._driver.list_nodes() if n.name == two.name).id = raw
    two = next(n for n in cloud.list_nodes() if n.cloud == "b")
    assert two.id == f"b:{raw}" and one.id == f"a:{raw}"
    listed = cloud.list_nodes()
    assert sorted((n.cloud, n.name) for n in listed) == [("a", "twins-small-a-1"), ("b", "twins-small-b-1")]
    assert len({n.id for n in listed}) == 2
    # tags and a destroy reach the node's own cloud only
    cloud.set_tags(two, {"nodemanager-drain": "x"})
    cloud.destroy_node(one)
    after = {n.cloud: n for n in cloud.list_nodes() if n.state == "running"}
    assert list(after) == ["b"] and after["b"].tags.get("nodemanager-drain") == "x"
    assert "nodemanager-drain" not in {k for n in cloud.clouds["a"].list_nodes() for k in n.tags}


START = "(TARGET.WantCloud =?= undefined) || (TARGET.WantCloud == MY.Cloud)"


def test_a_job_that_must_stay_in_one_cloud_boots_there_though_another_is_cheaper(
        ec2_cloud, ec2_proxy, ec2_cloud_in, cluster, condor):
    """HTCondor: ``+WantCloud`` with the documented START, matched by classad2 against each size's
    offline ad (its ``attributes``); SLURM: a feature per cloud and ``--constraint``."""
    import classad2

    from nodemanager.configuration.settings import SchedulerSettings
    from nodemanager.scheduler.htcondor import HTCondorScheduler
    from nodemanager.scheduler.htcondor_bindings import Htcondor2Bindings
    from tests.test_slurm_match import demand as slurm_demand, pending

    text = two_regions(ec2_proxy.port, cluster)
    for region in ("east", "west"):
        text = text.replace(f"cloud = {region}\n", f'cloud = {region}\nattributes = Cloud = "{region}"\n'
                            f"features = {region}\n")
    assert text.count("features =") == 2
    loop = make_loop(ec2_cloud, ec2_proxy, text)
    sizes = loop.settings.core.sizes
    requirements = classad2.ExprTree('(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") '
                                     '&& (TARGET.Memory >= RequestMemory)')
    condor.sim.submit(RequestCpus=2, RequestMemory=1000, Requirements=requirements, WantCloud="west")
    condor.sim.submit(RequestCpus=2, RequestMemory=1000, Requirements=requirements)
    htc = HTCondorScheduler.from_settings(SchedulerSettings("htcondor", {"machine_start": START}),
                                          bindings=Htcondor2Bindings(module=condor.sim), clock=condor.clock,
                                          sizes=sizes)
    demand = htc.poll().demand
    assert sorted((d.count, tuple(sorted(d.sizes or ()))) for d in demand) == [
        (1, ("east-small", "west-small")), (1, ("west-small",))]
    loop.sched.demand = list(demand)
    loop.run(3)
    assert sorted(booted(loop)) == ["east-small", "west-small"]
    assert in_region(ec2_cloud_in, cluster, WEST) == [f"{cluster}-west-small-1"]
    choices = {c.cloud: c for c in next(r for r in loop.reports if r.plan.boots).plan.clouds}
    assert choices["west"].lost == ("east: these jobs may not run there (east-small)",)

    # SLURM: --constraint=west asks for the west sizes only
    slurm = slurm_demand(pending(1, features="west", memory_per_cpu=500, cpus=2), sizes=sizes)
    assert [d.sizes for d in slurm] == [frozenset({"west-small"})]


@pytest.mark.parametrize("sizes, words", [
    ("[Size a]\ncloud = nort\ncores = 2\nram_mb = 1\nprice = 1\n",
     "13: [Size a] cloud: names cloud 'nort': with several clouds each size sets cloud = one of east, west"),
    ("[Size a]\ncores = 2\nram_mb = 1\nprice = 1\n",
     "12: [Size a]: names no cloud: with several clouds each size sets cloud = one of east, west"),
])
def test_a_size_that_names_no_configured_cloud_is_refused_at_its_line(sizes, words):
    text = ("[Cloud]\ndriver = ec2\ncluster = physics\nkey = k\nsecret = s\n[Cloud Create]\nimage = ami-1\n"
            "[Cloud east]\nregion = us-east-1\n[Cloud west]\nregion = us-west-2\n" + sizes)
    with pytest.raises(config.ConfigError) as caught:
        config.loads(text, "nm.ini")
    assert [str(p) for p in caught.value.problems] == [f"nm.ini:{words}"]


def test_a_mix_of_providers_ec2_and_gce_in_one_pool(ec2_cloud, ec2_proxy, ec2_cloud_in, cluster, gce_api,
                                                    service_key, tmp_path):
    """EC2 (the local endpoint) and GCE (its request-level fake) in one pool, each size with its
    own image: the cheaper provider first, the other on a capacity error, each VM in its own cloud."""
    from tests.test_cloud_gce import IMAGE as GCE_IMAGE
    from tests.fixtures.api_gce import PROJECT, ZONE, gce_error
    assert gce_api.instances == {}
    text = f"""
[Cloud]
cluster = {cluster}
calls_per_second = 1000
capacity_cooldown = 300

[Cloud aws]
driver = ec2
key = AKIDNODEMANAGERTEST
secret = moto-secret-not-real
region = {EAST}
host = 127.0.0.1
port = {ec2_proxy.port}
secure = no

[Cloud gcp]
driver = gce
user_id = nodemanager@{PROJECT}.iam.gserviceaccount.com
key = {service_key}
project = {PROJECT}
datacenter = {ZONE}
auth_type = SA
credential_file = {tmp_path / "token.json"}
proxy_url = {gce_api.server.url}

[Size aws-small]
cloud = aws
instance_type = t3.small
image = {EC2_IMAGE}
cores = 2
ram_mb = 2048
price = 0.02

[Size gcp-small]
cloud = gcp
instance_type = n1-standard-1
image = {GCE_IMAGE}
cores = 2
ram_mb = 2048
price = 0.03
"""
    loop = make_loop(ec2_cloud, ec2_proxy, text)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert booted(loop) == ["aws-small"]
    ec2_proxy.fail("RunInstances", 500, "InsufficientInstanceCapacity", times=1)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=1)]
    loop.run(3)
    assert sorted(booted(loop)) == ["aws-small", "gcp-small"]
    assert list(gce_api.instances) == [f"{cluster}-gcp-small-1"]
    assert in_region(ec2_cloud_in, cluster, EAST) == [f"{cluster}-aws-small-1"]
    gce_api.instances[f"{cluster}-gcp-small-1"]["status"] = "RUNNING"   # GCE finished booting it
    loop.run(2)
    listed = {n.cloud: n for n in loop.reports[-1].snapshot.cloud_nodes}
    assert sorted(listed) == ["aws", "gcp"] and listed["gcp"].id.startswith("gcp:")
    # GCE stops answering: once both nodes are idle, EC2's goes back and GCE's is kept as it is
    gce_api.server.fail("GET", r"/aggregated/instances$", 503, gce_error(503, "backendError", "injected"),
                        times=1000)
    loop.run(30)
    for name in list(loop.sched.workers):
        loop.sched.set_jobs(name, 0)
    loop.job_end.clear()
    loop.run(40)
    assert in_region(ec2_cloud_in, cluster, EAST) == []
    assert list(gce_api.instances) == [f"{cluster}-gcp-small-1"]
    held = next(e for e in loop.reports[-1].plan.nodes if e.name == f"{cluster}-gcp-small-1")
    assert held.blocked_by == "stale" and "cloud gcp's listing is" in held.reason


def test_a_named_clouds_size_with_no_image_anywhere_is_refused_at_its_line():
    text = ("[Cloud]\ncluster = physics\n[Cloud east]\ndriver = ec2\nkey = k\nsecret = s\nregion = us-east-1\n"
            "[Size a]\ncloud = east\ncores = 2\nram_mb = 1\nprice = 1\n"
            "[Size b]\ncloud = east\nimage = ami-2\ncores = 2\nram_mb = 1\nprice = 1\n")
    with pytest.raises(config.ConfigError) as caught:
        config.loads(text, "nm.ini")
    assert [str(p) for p in caught.value.problems] == [
        "nm.ini:8: [Size a]: no image: cloud east (driver ec2) needs [Cloud Create] image or this size's own image"]
    settings = config.loads(text.replace("[Size b]", "image = ami-1\n[Size b]"), "nm.ini")
    assert [dict(s.create_args)["image"] for s in settings.core.sizes] == ["ami-1", "ami-2"]


def test_plan_on_a_snapshot_freezes_the_silent_clouds_nodes_and_buys_in_the_other(tmp_path, capsys):
    """``nodemanager plan`` on a several-clouds snapshot: west's listing is 10 minutes old."""
    import json

    from nodemanager.cli import main
    now = 1_800_000_000.0
    (tmp_path / "nm.ini").write_text(two_regions(1, "physics", east_price=0.12, west_price=0.10))
    nodes, workers = [], []
    for cloud in ("east", "west"):
        nodes.append({"id": f"{cloud}:i-1", "cloud": cloud, "name": f"physics-{cloud}-small-1",
                      "size": f"{cloud}-small", "launched_at": now - 7200})
        workers.append({"name": f"physics-{cloud}-small-1", "scheduler": "slurm", "state": "idle",
                        "cloud_id": "i-1", "last_heard": now - 5, "registered_at": now - 7100,
                        "state_since": now - 6000, "cpus": 2, "ram_mb": 4096})
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": now, "polled_at": {"cloud": now - 5, "scheduler": now - 5},
        "cloud_polled": {"east": now - 5, "west": now - 600},
        "cloud_nodes": nodes, "workers": workers,
        "demand": [{"cpus": 2, "ram_mb": 1000, "count": 3}]}))
    assert main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config", str(tmp_path / "nm.ini"),
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the same cloud id in both clouds: each worker pairs with its own cloud's node
    assert {n["id"]: n["worker"] for n in doc["nodes"]} == {
        "east:i-1": "physics-east-small-1", "west:i-1": "physics-west-small-1"}
    assert doc["boots"] == [{"size": "east-small", "count": 1, "reason": "1 job(s) of 2 cpus, 1000 MB"}]
    assert doc["placement"][0]["cloud"] == "east"
    assert "west: west-small: not booted: cloud west's listing is 600s old" in doc["placement"][0]["why"]


def test_a_clouds_own_max_nodes_sends_the_rest_to_the_other(ec2_cloud, ec2_proxy, ec2_cloud_in, cluster):
    text = two_regions(ec2_proxy.port, cluster).replace(f"region = {EAST}\n", f"region = {EAST}\nmax_nodes = 2\n")
    loop = make_loop(ec2_cloud, ec2_proxy, text)
    loop.sched.demand = [Demand(cpus=2, ram_mb=1000, count=3)]
    loop.run(3)
    assert sorted(booted(loop)) == ["east-small", "east-small", "west-small"]
    assert len(in_region(ec2_cloud_in, cluster, EAST)) == 2 and len(in_region(ec2_cloud_in, cluster, WEST)) == 1
    with pytest.raises(config.ConfigError, match=r"\[Cloud\] max_nodes: is a \[Cloud NAME\]'s own cap"):
        config.loads(text.replace("[Cloud]\n", "[Cloud]\nmax_nodes = 3\n"))
