"""``max_destroys_per_hour`` holds across an HA takeover: two real daemon processes with ``[HA]`` on
one real etcd, libcloud's EC2 driver on moto_server and a real slurmctld whose nodes never get a
slurmd (the rig of ``tests/test_ha_failover.py``): every booted VM is unpaired past its boot grace,
so the leader wants to destroy all of them all the time. With ``max_destroys_per_hour = 1`` the
leader destroys one, then holds the rest; after it is killed (-9) the new leader counts that
destroy from the cloud's records and holds its own destroys too, naming the budget on its page."""

from __future__ import annotations

import configparser
import time

import pytest

from tests.system.test_closed_loop import status
from tests.test_ha_failover import CYCLE, Head, Rig, ha_slurm, running  # noqa: F401  (ha_slurm: a fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.ec2, pytest.mark.slow]

HELD = "max_destroys_per_hour 1 reached (1 in the last hour)"


class OneDestroyRig(Rig):
    def config(self, head: Head) -> None:
        super().config(head)
        cp = configparser.ConfigParser(interpolation=None)
        cp.read(head.config)
        cp["Daemon"]["max_destroys_per_hour"] = "1"
        with head.config.open("w") as fh:
            cp.write(fh)


def _terminated(rig: Rig, head: str | None = None, after: float = 0.0) -> list[str]:
    return [i for r in rig.mutations(head, after) if r.action == "TerminateInstances" for i in r.instances]


def _held_on_page(head: Head) -> bool:
    doc = status(head.status_port) if head.proc is not None else None
    return any(HELD in (n.get("why") or "") for n in (doc or {}).get("nodes", ()))


def _last_cycle(head: Head) -> float:
    return ((status(head.status_port) or {}).get("last_cycle_at") or 0.0) if head.proc is not None else 0.0


@pytest.fixture
def one_destroy_rig(ha_slurm, moto_server, etcd, tmp_path):  # noqa: F811
    cluster, slurm = ha_slurm
    yield from running(OneDestroyRig(tmp_path, moto_server, etcd, slurm, cluster))


def test_the_new_leader_does_not_destroy_a_second_vm_within_the_hour(one_destroy_rig: Rig) -> None:
    rig = one_destroy_rig
    leader = rig.leader()
    standby = next(h for h in rig.heads if h is not leader)
    rig.wait(lambda: len(_terminated(rig)) == 1, 40, "the leader destroying one VM that never joined")
    rig.wait(lambda: _held_on_page(leader), 20, "the leader holding its next destroy by the budget")
    assert _terminated(rig) == _terminated(rig, leader.name)
    killed_at = time.monotonic()
    leader.kill()
    rig.wait(standby.leads, 30, "the standby leading")
    # the new leader plans the destroys of the VMs that never joined, and holds them by the budget
    rig.wait(lambda: _held_on_page(standby), 30, "the new leader holding its destroys by the budget")
    # ... cycle after cycle: ten more of its cycles, and still the one destroy of the old leader
    seen = _last_cycle(standby)
    rig.wait(lambda: _last_cycle(standby) >= seen + 10 * CYCLE, 30, "ten more cycles of the new leader")
    assert _held_on_page(standby)
    assert _terminated(rig, standby.name, killed_at) == [], "the new leader destroyed a second VM within the hour"
    assert len(_terminated(rig)) == 1
    rig.check_invariants()
