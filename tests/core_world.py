"""Builders for decision-core tests: sizes, settings and snapshots with readable defaults."""

from __future__ import annotations

from nodemanager.model import CloudNode, Demand, InFlight, Size, Snapshot, Worker
from nodemanager.scheduler import classified
from nodemanager.configuration.settings import CoreSettings

NOW = 1_000_000.0
SMALL = Size(name="small", cores=4, ram_mb=16000, price=0.2, billing_period=0, min_charge=0)
LARGE = Size(name="large", cores=16, ram_mb=64000, price=0.8, billing_period=0, min_charge=0)
HOURLY = Size(name="hourly", cores=4, ram_mb=16000, price=0.3, billing_period=3600,
              shutdown_window=300)


def settings(**kw) -> CoreSettings:
    base = dict(sizes=(SMALL, LARGE, HOURLY), min_nodes=0, max_nodes=1000, max_total_price=0.0,
                boot_grace=600.0, idle_grace=300.0, node_stale_after=600.0,
                poll_stale_after=300.0, max_concurrent_drains=1000, max_destroys_per_hour=0,
                down_freeze_count=1000, down_freeze_fraction=1.0, node_mem_scaling=0.95)
    base.update(kw)
    return CoreSettings(**base)


def node(id: str, size: str = "small", age: float = 7200.0, **kw) -> CloudNode:
    return CloudNode(id=id, name=id, size=size, launched_at=NOW - age, **kw)


def worker(name: str, state: str = "idle", idle_for: float = 1000.0, **kw) -> Worker:
    # a SLURM drain never evicts (as the SLURM adapter says)
    base = dict(name=name, scheduler="slurm", state=state, last_heard=NOW - 10,
                state_since=NOW - idle_for, registered_at=NOW - 7000, cpus=4, ram_mb=15200,
                retirement_end=float("inf"))
    if state in ("alloc", "mix", "drng"):
        base.update(cpus_busy=4 if state != "mix" else 2, running_jobs=1)
    base.update(kw)
    return classified(Worker(**base))


def snap(nodes=(), workers=(), demand=(), in_flight=(), **kw) -> Snapshot:
    return Snapshot(now=NOW, polled_at={"cloud": NOW - 5, "scheduler": NOW - 5},
                    cloud_nodes=tuple(nodes), workers=tuple(workers), demand=tuple(demand),
                    in_flight=tuple(in_flight), **kw)


def pool(states: dict[str, str], size: str = "small", **wkw) -> tuple[list, list]:
    """Cloud nodes named by the keys, each paired with a worker in the given SLURM state."""
    nodes = [node(n, size) for n in states]
    workers = [worker(n, s, **wkw) for n, s in states.items()]
    return nodes, workers


__all__ = ["NOW", "SMALL", "LARGE", "HOURLY", "settings", "node", "worker", "snap", "pool",
           "Demand", "InFlight"]


def plan_json(tmp_path, capsys, config: str, now: float, pairs, demand=()) -> dict:
    """``nodemanager plan --format json`` on a snapshot of ``pairs`` (cloud node, worker) as JSON
    objects, polled 5 s before ``now``, with ``config`` as the INI file."""
    import json

    from nodemanager.cli import main

    (tmp_path / "nm.ini").write_text(config)
    (tmp_path / "snap.json").write_text(json.dumps({
        "now": now, "polled_at": {"cloud": now - 5, "scheduler": now - 5},
        "cloud_nodes": [n for n, _ in pairs], "workers": [w for _, w in pairs], "demand": list(demand)}))
    code = main(["plan", "--snapshot", str(tmp_path / "snap.json"), "--config", str(tmp_path / "nm.ini"),
                 "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)
