"""Pairing cloud nodes with scheduler workers: ids first, then names/addresses; corner cases."""

from dataclasses import replace

from nodemanager.core import pair
from nodemanager.model import CloudNode, Worker

L = 1_000_000.0


def node(id, name=None, ip=None, hostname=None, launched=L):
    return CloudNode(id=id, name=name or id, size="s", launched_at=launched, private_ip=ip,
                     hostname=hostname)


def worker(name, cloud_id=None, address=None, registered=None):
    return Worker(name=name, scheduler="slurm", state="idle", cloud_id=cloud_id, address=address,
                  registered_at=registered)


def test_pairs_by_advertised_cloud_id_even_when_names_differ():
    p = pair([node("i-1", "cn-1")], [worker("something-else", cloud_id="i-1")])
    assert p.paired["i-1"].name == "something-else"
    assert "cloud id" in p.reasons["i-1"]


def test_cloud_id_beats_a_name_match():
    # w1 advertises i-2 although its name matches i-1's name: it belongs to i-2 only
    p = pair([node("i-1", "cn-1"), node("i-2", "cn-2")], [worker("cn-1", cloud_id="i-2")])
    assert p.paired["i-2"].name == "cn-1"
    assert "i-1" not in p.paired


def test_worker_advertising_an_unlisted_id_is_never_paired_by_name():
    p = pair([node("i-new", "cn-1")], [worker("cn-1", cloud_id="i-old")])
    assert p.paired == {}
    assert [w.name for w in p.orphans] == ["cn-1"]


def test_pairs_by_name_short_name_hostname_and_address():
    nodes = [node("i-1", "cn-1"), node("i-2", "vm-2", hostname="cn-2.example.org"),
             node("i-3", "vm-3", ip="10.0.0.3"), node("i-4", "cn-4")]
    workers = [worker("cn-1"), worker("cn-2"), worker("x", address="<10.0.0.3:9618?addrs=...>"),
               worker("slot1@cn-4.example.org")]
    p = pair(nodes, workers)
    assert {k: w.name for k, w in p.paired.items()} == {
        "i-1": "cn-1", "i-2": "cn-2", "i-3": "x", "i-4": "slot1@cn-4.example.org"}


def test_recycled_hostname_is_refused():
    p = pair([node("i-1", "cn-1", launched=L)], [worker("cn-1", registered=L - 3600)])
    assert p.paired == {}
    assert "recycled" in p.reasons["i-1"]


def test_record_registered_after_launch_pairs():
    p = pair([node("i-1", "cn-1", launched=L)], [worker("cn-1", registered=L + 30)])
    assert p.paired["i-1"].name == "cn-1"


def test_recycled_record_ignored_when_a_fresh_one_also_matches():
    p = pair([node("i-1", "cn-1", ip="10.0.0.1", launched=L)],
             [worker("cn-1", registered=L - 10), worker("cn-1b", address="10.0.0.1", registered=L + 5)])
    assert p.paired["i-1"].name == "cn-1b"


def test_two_workers_with_the_same_cloud_id_is_ambiguous():
    p = pair([node("i-1")], [worker("a", cloud_id="i-1"), worker("b", cloud_id="i-1")])
    assert p.paired == {}
    assert "ambiguous" in p.reasons["i-1"] and "a, b" in p.reasons["i-1"]


def test_two_workers_matching_by_name_and_address_is_ambiguous():
    p = pair([node("i-1", "cn-1", ip="10.0.0.9")], [worker("cn-1"), worker("other", address="10.0.0.9")])
    assert p.paired == {}
    assert "ambiguous" in p.reasons["i-1"]


def test_one_worker_claimed_by_two_nodes_is_ambiguous_for_both():
    p = pair([node("i-1", "cn-1"), node("i-2", "x", hostname="cn-1")], [worker("cn-1")])
    assert p.paired == {}
    assert "ambiguous" in p.reasons["i-1"] and "ambiguous" in p.reasons["i-2"]


def test_no_match_has_a_reason_and_unclaimed_workers_are_orphans():
    p = pair([node("i-1", "cn-1")], [worker("static-1")])
    assert p.paired == {}
    assert "no scheduler worker" in p.reasons["i-1"]
    assert [w.name for w in p.orphans] == ["static-1"]


def test_pairing_does_not_depend_on_input_order():
    nodes = [node(f"i-{i}", f"cn-{i}") for i in range(50)]
    workers = [worker(f"cn-{i}") for i in range(0, 50, 2)] + [worker("x", cloud_id="i-7")]
    a = pair(nodes, workers)
    b = pair(list(reversed(nodes)), list(reversed(workers)))
    assert {k: w.name for k, w in a.paired.items()} == {k: w.name for k, w in b.paired.items()}
    assert a.reasons == b.reasons


def test_a_scheduler_record_that_never_registered_does_not_pair():
    """SLURM declares node names in advance: a fresh VM must not pair with the idle record of a
    name whose slurmd never registered (it would be classed down and shut down during boot)."""
    from nodemanager.core.pair import pair
    from nodemanager.model import CloudNode, Worker
    node = CloudNode(id="i-1", name="c-small-1", size="small", launched_at=1000.0)
    never = Worker(name="c-small-1", scheduler="slurm", state="unk", registered_at=0.0)
    result = pair([node], [never])
    assert "i-1" not in result.paired
    assert "has not registered since this VM was launched" in result.reasons["i-1"]
    joined = Worker(name="c-small-1", scheduler="slurm", state="idle", registered_at=1010.0)
    assert pair([node], [joined]).paired["i-1"].name == "c-small-1"


def test_without_registered_at_a_worker_last_heard_before_launch_does_not_pair():
    """Issue 12 item 10: the scheduler gives no ``registered_at``; a record last heard before the
    VM was launched belongs to an older VM of that name (a few seconds of clock skew allowed)."""
    from dataclasses import replace

    from nodemanager.core.pair import HEARD_SKEW
    old = replace(worker("cn-1"), last_heard=L - 100)
    p = pair([node("i-1", "cn-1", launched=L)], [old])
    assert p.paired == {}
    assert "last heard 1m 40s before this VM was launched" in p.reasons["i-1"]
    for heard in (L - HEARD_SKEW, L + 30, 0.0):       # within the skew, after launch, not reported
        w = replace(worker("cn-1"), last_heard=heard)
        assert pair([node("i-1", "cn-1", launched=L)], [w]).paired["i-1"] is w


def test_a_worker_answering_to_a_nodes_name_with_another_instance_id_is_a_conflict():
    """An HTCondor startd with a wrong CloudInstanceID (or a SLURM comment naming the previous VM),
    registered since the VM's launch: it may be the node's worker, so the node is in conflict;
    the same record older than the launch (the previous VM's), or one whose id is a live listed
    VM's, is none."""
    wrong = worker("cn-1", cloud_id="i-previous", registered=L + 30)
    p = pair([node("i-1", "cn-1")], [wrong])
    assert p.paired == {} and p.conflicts == {"i-1"} and p.ambiguous == frozenset()
    assert "worker cn-1 answers to its name or address but says it is instance i-previous" in p.reasons["i-1"]
    by_address = worker("slot1@vm-x", cloud_id="i-previous", address="10.0.0.9", registered=L + 30)
    assert pair([node("i-1", "cn-1", ip="10.0.0.9")], [by_address]).conflicts == {"i-1"}
    older = worker("cn-1", cloud_id="i-previous", registered=L - 3600)
    assert pair([node("i-1", "cn-1")], [older]).conflicts == frozenset()
    twin = pair([node("i-1", "cn-1"), node("i-previous", "cn-9")], [wrong])
    assert twin.conflicts == frozenset() and twin.paired["i-previous"] is wrong
    gone = pair([node("i-1", "cn-1"), replace(node("i-previous", "cn-9"), state="terminated")], [wrong])
    assert gone.conflicts == {"i-1"}


def test_the_last_check_looks_at_every_worker_that_answers_to_the_node_whatever_its_id():
    from nodemanager.core.pair import candidates
    n = node("i-1", "cn-1", ip="10.0.0.1")
    ws = [worker("cn-1", cloud_id="i-previous"), worker("other", address="10.0.0.1"),
          worker("x", cloud_id="i-1"), worker("cn-2", cloud_id="i-2")]
    assert [w.name for w in candidates(n, ws)] == ["cn-1", "other", "x"]
