"""The adapter forgets a destroyed node's address, and only that node's."""

from __future__ import annotations

from nodemanager.scheduler.port import DrainSchedule


def test_node_destroyed_forgets_only_that_startds_address(condor):
    for name in ("a.example", "b.example", "c.example"):
        condor.add(name)
    tickets = {n: condor.htc.drain(condor.worker(n), DrainSchedule.GRACEFUL, "idle exceeded")
               for n in ("a.example", "b.example")}
    condor.htc.poll()
    condor.advance(1)
    condor.htc.node_destroyed("a.example")
    condor.htc.node_destroyed("never-seen.example")     # unknown names are no error
    gone = condor.htc.confirm_drained(tickets["a.example"])
    assert not gone.ok and "a.example: no address known" in gone.reason
    kept = condor.htc.confirm_drained(tickets["b.example"])
    assert kept.ok, kept.reason
    # c was never drained; its address is still there for a drain without a fallback ad
    assert condor.htc.drain(condor.worker("c.example"), DrainSchedule.GRACEFUL, "idle exceeded")


def test_a_destroyed_name_polled_again_is_addressable_again(condor):
    condor.add("a.example")
    ticket = condor.htc.drain(condor.worker("a.example"), DrainSchedule.GRACEFUL, "idle exceeded")
    condor.advance(1)
    condor.htc.node_destroyed("a.example")
    assert not condor.htc.confirm_drained(ticket).ok
    condor.htc.poll()                                   # the startd is still in the collector
    assert condor.htc.confirm_drained(ticket).ok
