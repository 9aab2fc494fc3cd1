"""Budgets over time kept in the store: on a cloud that drops a destroyed VM from its listing at once
(GCE, Azure, OpenStack; here the simulated cloud), the listing cannot count the hour's destroys
after a restart; the actuator's own record, kept in the store, does."""

from __future__ import annotations

import logging
import pathlib

import pytest

from nodemanager.actors.clock import ManualClock
from nodemanager.store.postgres import PostgresStore
from nodemanager.store.sqlite import SqliteStore
from tests.test_daemon import daemons, run_for, write_config  # noqa: F401  (daemons: a fixture)
from tests.test_ha_admin import ha_config, heads  # noqa: F401  (heads: a fixture)
from tests.test_ha_admin import run_for as ha_run_for


def _count_destroys(world) -> list[str]:
    """The ids of the nodes destroyed in ``world`` from now on (the list grows)."""
    destroyed: list[str] = []
    real = world.cloud.destroy_node

    def counted(node):
        destroyed.append(node.id)
        return real(node)

    world.cloud.destroy_node = counted
    return destroyed


def test_restarts_destroy_at_most_max_destroys_per_hour_on_a_cloud_that_forgets_destroyed_vms(
        tmp_path, daemons, caplog):  # noqa: F811
    _restarts_destroy_once_an_hour(tmp_path, daemons, caplog, "",
                                   lambda: SqliteStore(str(tmp_path / "state" / "demo.db"), read_only=True))


@pytest.mark.postgres
def test_a_head_starting_on_the_shared_postgresql_store_counts_the_destroys_of_the_one_before(
        tmp_path, daemons, caplog, postgres_url):  # noqa: F811
    _restarts_destroy_once_an_hour(tmp_path, daemons, caplog, f"\n[Store]\nurl = {postgres_url}\n",
                                   lambda: PostgresStore(postgres_url, read_only=True))


def _restarts_destroy_once_an_hour(tmp_path, daemons, caplog, extra, reader):  # noqa: F811
    caplog.set_level(logging.INFO, "nodemanager")
    cfg = write_config(tmp_path / "nm.ini", extra=extra)
    text = open(cfg).read().replace("max_destroys_per_hour = 0", "max_destroys_per_hour = 1")
    open(cfg, "w").write(text)
    clock = ManualClock(1_000_000.0)
    d = daemons(cfg, clock=clock).start()
    destroyed = _count_destroys(d.world)
    run_for(d, 600)                                  # boots, the jobs end, idle_grace passes: one goes
    assert len(destroyed) == 1
    gone = destroyed[0]
    assert d.world.sim_cloud.node(gone).state == "terminated"
    assert all(n.id != gone for n in d.world.cloud.list_nodes())      # the listing forgot it at once
    for _ in range(3):                               # three restarts within the hour
        d.stop()
        caplog.clear()
        d = daemons(cfg, clock=clock, ports=(d.world.cloud, d.world.scheduler, d.world)).start()
        run_for(d, 300)
        # the new process holds drained nodes back on the budget, counting the previous one's destroy
        assert any("blocked by budget: destroy held back: max_destroys_per_hour 1 reached (1 in the last hour)"
                   in r.getMessage() for r in caplog.records)
    assert len(destroyed) == 1, f"{len(destroyed)} destroys within the hour: {destroyed}"
    kept = reader()
    assert gone in kept.actions(0.0)["destroy"]
    kept.close()
    run_for(d, 3600 - 1500 + 300)                    # an hour after the first, the next may go
    assert len(destroyed) >= 2


@pytest.mark.postgres
def test_a_new_ha_leader_on_the_shared_store_counts_the_old_leaders_destroys(
        tmp_path, etcd, heads, postgres_url, caplog):  # noqa: F811
    caplog.set_level(logging.INFO, "nodemanager")
    clock = ManualClock(1_000_000.0)
    extra = f"\n[Store]\nurl = {postgres_url}\n"

    def cfg(name):
        path = pathlib.Path(ha_config(tmp_path / f"{name}.ini", etcd.url))
        path.write_text(path.read_text().replace("max_destroys_per_hour = 0", "max_destroys_per_hour = 1") + extra)
        return str(path)

    a = heads(cfg("a"), "head1:1", clock)
    a.ha.lease.step()                                      # head1 leads
    b = heads(cfg("b"), "head2:2", clock, ports=(a.world.cloud, a.world.scheduler, a.world))
    destroyed = _count_destroys(a.world)
    a.start(), b.start()
    for _ in range(120):                                   # until the leader destroyed one
        ha_run_for(clock, [a, b], 5)
        if destroyed:
            break
    assert len(destroyed) == 1
    assert all(n.id != destroyed[0] for n in a.world.cloud.list_nodes())   # the listing forgot it
    a.stop()                                               # releases the lease: head2 takes over
    caplog.clear()
    b.ha.lease.step()
    ha_run_for(clock, [b], 900)
    assert b.ha.lease.view().leading
    assert len(destroyed) == 1, f"{len(destroyed)} destroys within the hour: {destroyed}"
    assert any("max_destroys_per_hour 1 reached (1 in the last hour)" in r.getMessage() for r in caplog.records)
