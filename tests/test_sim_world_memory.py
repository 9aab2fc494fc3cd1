"""The simulated world at scale: what it holds per node, and that holding less changes no ad."""

import tracemalloc

from nodemanager.commands.bench import measure
from nodemanager.model import Size
from nodemanager.sim.cloud import SimCloud
from nodemanager.sim.startd import Job, SimStartd

T0 = 1_000_000.0

# A draining startd's p-slot ad, key order included (as the adapter and the collector copy see it).
DRAINING_PSLOT_AD = {
    "MyType": "Machine", "Name": "slot1@wn1.sim.internal", "Machine": "wn1.sim.internal",
    "MyAddress": "<127.0.0.1:9618?alias=wn1.sim.internal&sock=startd>", "SlotID": 1,
    "SlotType": "Partitionable", "PartitionableSlot": True, "TotalSlotCpus": 8, "TotalCpus": 8,
    "TotalSlotMemory": 16000, "TotalMemory": 16000, "MaxJobRetirementTime": 3600,
    "MachineMaxVacateTime": 600, "State": "Drained", "Activity": "Retiring",
    "EnteredCurrentState": 1000100, "EnteredCurrentActivity": 1000100, "MyCurrentTime": 1000200,
    "DaemonStartTime": 1000000, "Cpus": 2, "Memory": 13000, "NumDynamicSlots": 3,
    "ChildState": ["Claimed", "Claimed", "Claimed"], "ChildActivity": ["Retiring", "Retiring", "Retiring"],
    "ChildRetirementTimeRemaining": [3410, 3410, 3410],
    "Start": False, "JobStarts": 3, "ExpectedMachineGracefulDrainingCompletion": 1003610,
    "ExpectedMachineQuickDrainingCompletion": 1000800, "ExpectedMachineGracefulDrainingBadput": 21600,
    "ExpectedMachineQuickDrainingBadput": 4740, "TotalMachineDrainingUnclaimedTime": 200,
    "LastDrainStartTime": 1000100, "Draining": True, "DrainReason": "nodemanager: test",
    "DrainingRequestId": "1", "CloudInstanceID": "i-001", "HasDocker": True,
}


def _draining_startd() -> SimStartd:
    st = SimStartd("wn1.sim.internal", 8, 16000, T0, max_retirement=3600.0, vacate_time=600.0,
                   attrs={"CloudInstanceID": "i-001", "HasDocker": True})
    for k in range(3):
        st.start_job(Job(id=f"j{k}", cpus=2, ram_mb=1000, runtime=7200.0 + k * 100, walltime=14400.0),
                     T0 + 10)
    st.drain(T0 + 100, "graceful", reason="nodemanager: test")
    return st


def test_a_startd_keeps_no_per_instance_dict_and_publishes_the_same_ad():
    st = _draining_startd()
    assert not hasattr(st, "__dict__")  # slots: about 1 KB less a startd
    ad = st.pslot_ad(T0 + 200)
    assert list(ad.items()) == list(DRAINING_PSLOT_AD.items())
    ad["Name"] = "changed"  # every call hands out its own dict
    assert st.pslot_ad(T0 + 200)["Name"] == "slot1@wn1.sim.internal"


def test_nodes_created_with_equal_tags_share_one_map_and_set_tags_touches_one_node():
    size = Size(name="m8", cores=8, ram_mb=16000)
    cloud = SimCloud(clock=lambda: T0, sizes=(size,))
    a = cloud.create_node(size, "a", {"team": "x"})
    b = cloud.create_node(size, "b", {"team": "x"})
    c = cloud.create_node(size, "c", {"team": "y"})
    assert a.tags is b.tags and a.tags["team"] == "x"
    assert c.tags["team"] == "y" and a.tags["team"] == "x"
    cloud.set_tags(a, {"team": "z"})
    tags = {n.name: n.tags["team"] for n in cloud.list_nodes()}
    assert tags == {"a": "z", "b": "x", "c": "y"}


def test_the_bench_world_holds_under_4_8_kb_a_node():
    """The bench's simulated cloud and pool (95 % of the nodes with a startd, 70 % busy with 1-8
    jobs each) held about 7.1 KB of Python heap a node with a dict per startd and its static ad
    kept, each ad its own ints and child lists; the process must stay under 700 MB at 100,000 nodes."""
    measure(50, repeat=1)  # imports and one-off caches out of the count
    held: list[int] = []
    n = 2000
    tracemalloc.start()
    try:
        measure(n, repeat=1, tick=lambda: held.append(tracemalloc.get_traced_memory()[0]) if not held else None)
    finally:
        tracemalloc.stop()
    assert held[0] / n < 4800, f"{held[0] / n:.0f} bytes a node"


def test_equal_values_in_ads_are_shared_and_stay_each_ads_own_value():
    a, b = _draining_startd(), _draining_startd()
    ad_a, ad_b = a.pslot_ad(T0 + 200), b.pslot_ad(T0 + 200)
    for key in ("MyCurrentTime", "EnteredCurrentState", "ChildState", "ChildActivity"):
        assert ad_a[key] is ad_b[key] and ad_a[key] == DRAINING_PSLOT_AD[key]
    b.start_job(Job(id="late", cpus=1, ram_mb=100, runtime=1000.0), T0 + 300)  # one more dynamic slot
    later = b.pslot_ad(T0 + 400)
    assert later["MyCurrentTime"] == 1000400 and later["ChildActivity"] == ["Retiring"] * 4
    assert a.pslot_ad(T0 + 200)["ChildActivity"] == ["Retiring"] * 3  # the shared list unchanged


def test_workers_in_the_same_state_share_one_state_text_and_odd_values_still_read():
    from nodemanager.scheduler.htcondor_classify import shown_state

    busy = []
    for name in ("wn1", "wn2"):
        st = SimStartd(name, 8, 16000, T0)
        for k in range(3):
            st.start_job(Job(id=f"{name}.{k}", cpus=1, ram_mb=100, runtime=1000.0), T0)
        busy.append(shown_state(st.pslot_ad(T0 + 1)))
    assert busy[0] == "Unclaimed/Idle p-slot, 3 dynamic slots busy" and busy[0] is busy[1]
    assert shown_state({"State": ["odd"], "Activity": "Idle"}) == "['odd']/Idle"
    assert shown_state({"State": "Drained"}) == "Drained"
