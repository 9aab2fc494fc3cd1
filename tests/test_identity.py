"""Deployment identity: whose VMs a daemon acts on, a renamed cluster, the default cluster name, and
what `nodemanager check` says about VMs of another deployment or another controller.

The rules are pure (``nodemanager.core.identity``); the daemon-level tests run ``nodemanager run``
and ``nodemanager check`` against libcloud's EC2 driver on moto (instances made with boto3 stand for
VMs another deployment or another controller booted)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid

import pytest

from nodemanager.core.identity import (Identity, Term, another_controller, client_token, controller_tag,
                                       joined_our_pool, sort_by_owner)
from nodemanager.model import CloudNode, frozen_map
from nodemanager.tags import TAG_CLUSTER, TAG_CONTROLLER, TAG_DEPLOYMENT, TAG_FENCE
from tests.fixtures.moto import EC2_IMAGE
from tests.test_single_instance import ec2_config, run_briefly

ME = Identity(deployment="d-ours", created_at=1000.0, controller="head1:10:2000", started_at=2000.0)


def node(name: str, launched: float, **tags: str) -> CloudNode:
    return CloudNode(id=f"i-{name}", name=name, size="small", launched_at=launched,
                     tags=frozen_map({TAG_CLUSTER: "c", **tags}))


def test_a_listing_is_sorted_by_deployment_and_untagged_vms_are_ours_only_if_older_than_the_id():
    ours = node("a", 1500, **{TAG_DEPLOYMENT: "d-ours"})
    theirs = node("b", 1500, **{TAG_DEPLOYMENT: "d-other"})
    legacy = node("c", 900)                   # an older version's VM, running before the id was made
    stray = node("d", 1100)                   # untagged, launched after: not booted by us
    owned = sort_by_owner([ours, theirs, legacy, stray], ME)
    assert owned.ours == (ours, legacy) and owned.adopted == (legacy,)
    assert owned.foreign == (theirs, stray) and owned.others == ()


def test_another_controllers_action_since_our_start_is_named_but_not_a_previous_one_or_under_ha():
    before = node("a", 1500, **{TAG_DEPLOYMENT: "d-ours", TAG_CONTROLLER: controller_tag("head2:7:100", 1999)})
    mine = node("b", 2100, **{TAG_DEPLOYMENT: "d-ours", TAG_CONTROLLER: controller_tag(ME.controller, 2100)})
    after = node("c", 2100, **{TAG_DEPLOYMENT: "d-ours", TAG_CONTROLLER: controller_tag("head2:7:100", 2050)})
    owned = sort_by_owner([before, mine, after], ME)
    assert [(n.name, c) for n, c, _ in owned.others] == [("c", "head2:7:100")]
    assert another_controller("c", owned.others) == (
        "another controller is acting on cluster c (VMs c booted or tagged by host head2 pid 7)")
    ha = Identity("d-ours", 1000.0, ME.controller, 2000.0, one_controller=False)
    assert sort_by_owner([before, mine, after], ha).others == ()


def test_under_ha_another_leaders_mark_during_our_term_is_named_but_not_the_previous_leaders():
    """A higher fence, or a mark dated past our election and the heads' clock skew, is a second
    leader; the previous leader of our election (lower fence, before our election) is not."""
    ha = Identity("d-ours", 1000.0, ME.controller, 2000.0, one_controller=False)
    term = Term(fence=40, since=3000.0, tolerance=30.0)

    def marked(name: str, at: float, fence: int) -> CloudNode:
        return node(name, 1500, **{TAG_DEPLOYMENT: "d-ours", TAG_FENCE: str(fence),
                                   TAG_CONTROLLER: controller_tag("head2:7:100", at)})
    previous = marked("a", 3010, 39)          # the old leader, its clock 10 s ahead of ours
    higher = marked("b", 3005, 41)            # a leader elected after us in another election
    late = marked("c", 3100, 12)              # another election's leader, acting well into our term
    lost = marked("d", 2990, 90)              # before our election (etcd lost its data since): not now
    owned = sort_by_owner([previous, higher, late, lost], ha, term)
    assert [n.name for n, _, _ in owned.others] == ["b", "c"]
    assert sort_by_owner([previous, higher, late, lost], ha).others == ()     # a standby: no term


def test_another_deployments_vm_is_a_second_controller_only_when_its_worker_joined_our_pool():
    theirs = node("a", 2100, **{TAG_DEPLOYMENT: "d-head2", TAG_CONTROLLER: controller_tag("head2:7:100", 2100)})
    elsewhere = node("b", 2100, **{TAG_DEPLOYMENT: "d-site2"})
    assert joined_our_pool([theirs, elsewhere], ["i-a", "i-zz"], ME) == ((theirs, "head2:7:100", 2100.0),)
    assert joined_our_pool([theirs, elsewhere], ["i-zz"], ME) == ()     # another site: its own scheduler
    ha = Identity("d-ours", 1000.0, ME.controller, 2000.0, one_controller=False)
    assert joined_our_pool([theirs], ["i-a"], ha) == ()


def test_the_client_token_is_shared_by_controllers_of_one_deployment_for_one_name_and_window():
    token = client_token("d-ours", "c-small-1", 1300.0)
    assert token == client_token("d-ours", "c-small-1", 1250.0) and len(token) <= 64
    assert token != client_token("d-other", "c-small-1", 1300.0)
    assert token != client_token("d-ours", "c-small-2", 1300.0)
    assert token != client_token("d-ours", "c-small-1", 1300.0 + 600)   # the name booted again later


def test_a_real_cloud_with_the_default_cluster_name_is_refused_naming_file_and_option(tmp_path, ec2_proxy):
    config = ec2_config(tmp_path / "nm.ini", ec2_proxy.port, state_dir=str(tmp_path / "state"))
    text = open(config).read().replace("cluster = pool1\n", "")
    open(config, "w").write(text)
    code, out = run_briefly(config)
    assert code == 2, out
    assert f"{config}:1: [Cloud] cluster: is 'nodemanager', the default" in out
    assert ec2_proxy.actions == []                  # refused before any cloud call


def _start(config: str, state_dir, cluster: str) -> tuple[subprocess.Popen, dict]:
    """``nodemanager run`` until its deployment record exists; the process and the record."""
    proc = subprocess.Popen([sys.executable, "-m", "nodemanager", "run", "--config", config],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    path = state_dir / f"{cluster}.deployment"
    deadline = time.monotonic() + 30
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no deployment record: {proc.communicate()[0][-2000:]}")
        time.sleep(0.05)
    return proc, json.loads(path.read_text())


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=30)[0]


@pytest.fixture
def boto(moto_server):
    import boto3
    return boto3.client("ec2", endpoint_url=moto_server.url, region_name="us-east-1",
                        aws_access_key_id="AKIDNODEMANAGERTEST", aws_secret_access_key="x")


def _vm(boto, cluster: str, name: str, **tags: str) -> str:
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in
                                                 {"Name": name, TAG_CLUSTER: cluster, "nodemanager-size": "small",
                                                  **tags}.items()]}]
    return boto.run_instances(ImageId=EC2_IMAGE, MinCount=1, MaxCount=1, InstanceType="t3.small",
                              TagSpecifications=spec)["Instances"][0]["InstanceId"]


def test_a_cluster_renamed_while_vms_of_the_old_name_remain_is_refused_then_accepted_once_they_are_gone(
        tmp_path, ec2_proxy, boto):
    old, new = f"old{uuid.uuid4().hex[:6]}", f"new{uuid.uuid4().hex[:6]}"
    state = tmp_path / "state"
    config = ec2_config(tmp_path / "nm.ini", ec2_proxy.port, cluster=old, state_dir=str(state))
    proc, record = _start(config, state, old)
    _stop(proc)
    # a VM the daemon booted under the old name, still running
    iid = _vm(boto, old, f"{old}-small-1", **{TAG_DEPLOYMENT: record["id"]})
    text = open(config).read()
    open(config, "w").write(text.replace(f"cluster = {old}", f"cluster = {new}"))
    code, out = run_briefly(config)
    assert code == 2, out
    assert (f"{config}: [Cloud] cluster: renamed from '{old}' to '{new}' while 1 VM(s) of '{old}' "
            f"remain ({old}-small-1 ({iid}))") in out
    assert not (state / f"{new}.deployment").exists()
    # once they are gone the rename goes through and keeps the deployment id
    boto.terminate_instances(InstanceIds=[iid])
    proc, moved = _start(config, state, new)
    out = _stop(proc)
    assert moved["id"] == record["id"] and not (state / f"{old}.deployment").exists()
    assert f"cluster renamed from {old} to {new}: no VM of {old} remains" in out


def test_check_names_another_deployments_vms_and_another_controller_beside_the_daemon_here(
        tmp_path, ec2_proxy, boto):
    cluster = f"chk{uuid.uuid4().hex[:6]}"
    state = tmp_path / "state"
    config = ec2_config(tmp_path / "nm.ini", ec2_proxy.port, cluster=cluster, state_dir=str(state),
                        status_port=0)
    theirs = _vm(boto, cluster, f"{cluster}-small-1", **{TAG_DEPLOYMENT: "d-elsewhere"})
    proc, record = _start(config, state, cluster)
    try:
        # a second head node of this deployment boots a VM a second after this daemon started
        since = float((state / f"{cluster}.lock").read_text().split()[2])
        _vm(boto, cluster, f"{cluster}-small-2", **{
            TAG_DEPLOYMENT: record["id"], TAG_CONTROLLER: controller_tag("head2:4242:1", since + 1)})
        out = subprocess.run([sys.executable, "-m", "nodemanager", "check", "--config", config,
                              "--format", "json"], capture_output=True, text=True, timeout=120).stdout
        checks = {c["name"]: c for c in json.loads(out)}
        assert checks["other deployments"]["ok"] is None
        assert theirs in checks["other deployments"]["detail"] and "d-elsewhere" in checks["other deployments"]["detail"]
        assert checks["other controllers"]["ok"] is False
        assert checks["other controllers"]["detail"] == (
            f"another controller is acting on cluster {cluster} (VMs {cluster}-small-2 booted or tagged "
            "by host head2 pid 4242)")
        assert f"id {record['id']}: 1 VM(s)" in checks["deployment"]["detail"]
    finally:
        _stop(proc)
