"""The policies a replay compares: ours, and the peers' as configurations of the same engine.

Every baseline runs through the same replay (same trace, simulated cloud, simulated pool, core
and actuator); a baseline differs only in its matrix, its settings and, for cluster-autoscaler,
Karpenter and COBalD, what the simulator's layer over the core adds (``baseline_layer.py``:
cluster-autoscaler's delay after add and random expander, Karpenter's consolidation, COBalD's
controller); each matrix is a shipped file,
``nodemanager/sim/matrices/<baseline>.matrix``. Each is described from its project's own
documentation as summarised in ``../shared/notes/`` (see ``docs/simulator.md`` for the sources):

* ``static``: the peak node count of the no-wait schedule kept up for the whole window
  (``min_nodes = max_nodes = peak``, nothing idle is ever drained).
* ``arvados``: Arvados Node Manager's defaults: its final ``transitions`` table (not the policy matrix page's:
  ``down`` in boot wait is shut down only while the window is open), ``poll_time`` 60 s,
  ``consecutive_idle_count`` 2 (idle is "exceeded" on the second consecutive idle poll, i.e. after
  one poll period of idleness: ``idle_grace = (2 - 1) x 60 s``), billing windows ``54, 5, 1``
  (open in minutes 54-59 of each hour of uptime), ``boot_fail_after`` 1800 s; paired nodes are
  drained before shutdown (its SLURM shutdown actor).
* ``cluster-autoscaler``: a node is removed after ``--scale-down-unneeded-time`` 10 min unneeded
  (empty), drained before removal, ``--max-drain-parallelism`` 1, no scale-down for
  ``--scale-down-delay-after-add`` 10 min after any scale-up, ``--scan-interval`` 10 s,
  ``--max-node-provision-time`` 15 min, no billing-window awareness.
* ``slurm-power-save``: power down after ``SuspendTime`` idle (300 s, slurm-gcp's generated
  value; Slurm's own default is off), without draining; resume on demand; ``ResumeTimeout`` 300 s
  (slurm-gcp) as the boot grace; ``power_save_interval`` 10 s.
* ``karpenter``: ``consolidationPolicy: WhenEmptyOrUnderutilized``, ``consolidateAfter`` 0 s,
  budget ``nodes: "10%"``, 10 s polling, 15 s validation; underutilised nodes drained, not evicted.
* ``cobald``: COBalD's ``LinearController`` (0.9 / 0.9, rate 1 core/s, Limiter minimum 1) over a
  TARDIS ``FactoryPool`` of the largest size, every 30 s; it never reads the job queue.

With several sizes, static and cobald run the largest size; the others choose as the core does
(the cheapest sizes that fit: Karpenter's, Arvados' and Slurm's node weights by price), except
cluster-autoscaler, whose default ``--expander=random`` picks a fitting size at random.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

import policy_matrix
from nodemanager.model import Size
from nodemanager.configuration.settings import CoreSettings, PollSettings, Settings
from policy_matrix import Matrix

__all__ = ["Policy", "SimParams", "default_size", "ours", "static", "arvados", "cluster_autoscaler",
           "slurm_power_save", "karpenter", "cobald", "several_sizes_caps", "baselines", "apply_param", "SWEEPABLE", "MATRIX_DIR",
           "baseline_matrix"]

MATRIX_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matrices")


def baseline_matrix(name: str) -> Matrix:
    """A peer's shipped matrix file, ``nodemanager/sim/matrices/<name>.matrix``."""
    return policy_matrix.load(os.path.join(MATRIX_DIR, f"{name}.matrix"))


@dataclass(frozen=True)
class SimParams:
    """The simulated world, the same for every policy of a run.

    ``boot_delay``: seconds from create to a running VM; ``join_delay``: from running to the
    worker's first appearance in the pool; ``negotiation_interval``: how often the pool matches
    queued jobs to free slots (HTCondor's ``NEGOTIATOR_INTERVAL`` default, 60 s); ``tail``: after
    the last job ends, how long the replay goes on letting policies give their nodes back (nodes
    still up then are paid until then); ``sample_every``: the nodes-over-time plot's resolution;
    ``placement``: how the pool's negotiator picks a startd for a job (``breadth``, ``depth``,
    ``steered``, ``ends`` or ``ends-oracle``, see :class:`~nodemanager.sim.pool.SimPool`); ``max_retirement``: every startd's
    ``MaxJobRetirementTime``, how long a graceful drain lets a running job run from its start
    before evicting it.
    """

    boot_delay: float = 90.0
    join_delay: float = 30.0
    negotiation_interval: float = 60.0
    tail: float = 6 * 3600.0
    sample_every: float = 300.0
    # a seeded fraction of the jobs needing a GPU / HasDocker (nodemanager.sim.constrained)
    gpu_fraction: float = 0.0
    constrained_fraction: float = 0.0
    job_seed: int = 1
    placement: str = "breadth"
    max_retirement: float = 30 * 86400.0
    spot_rate: float | None = None   # spot reclaims per VM-day the market has (None: as configured)
    clouds: tuple[Any, ...] = ()    # simulate --clouds: nodemanager.sim.clouds_file.SimCloudSpec each
    spend_by: str = ""              # user, group or size: who spent what is reported (empty: not)
    give_up_after: float = 0.0      # stop this long after every job would have ended unwaited (0: never)


def default_size(cores: int = 8, *, billing_period: int = 0, min_charge: int = 60) -> Size:
    """The simulator's one node size when the configuration has none: ``cores`` cores, 4 GB per
    core, an on-demand-like price, per-second billing with a one-minute minimum."""
    return Size(name=f"sim{cores}", cores=cores, ram_mb=4096 * cores, price=0.0425 * cores,
                billing_period=billing_period, min_charge=min_charge)


@dataclass(frozen=True)
class Policy:
    """One row of the comparison: settings and matrix for the shared replay engine.

    ``scale_down_delay_after_boot`` (cluster-autoscaler's ``--scale-down-delay-after-add``)
    holds back drains and destroys of idle nodes for that long after any boot; 0 = no gate.
    ``params`` are the knobs that define the row, shown in reports and sweeps. ``layer`` names
    the behaviour :func:`nodemanager.sim.baseline_layer.layer_planner` adds to the core's plan.
    """

    name: str
    settings: Settings
    matrix: Matrix
    scale_down_delay_after_boot: float = 0.0
    baseline: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    # the simulator's layer over the core for what no matrix says (sim/baseline_layer.py)
    layer: str = ""
    watch_load: bool = False         # it reads free cores even with no job queued

    @property
    def cycle_interval(self) -> float:
        return self.settings.poll.cycle_interval


def _with(settings: Settings, *, poll: Mapping[str, Any] | None = None,
          sizes: tuple[Size, ...] | None = None, **core: Any) -> Settings:
    new_core = replace(settings.core, **core)
    if sizes is not None:
        new_core = replace(new_core, sizes=sizes)
    return replace(settings, core=new_core,
                   poll=replace(settings.poll, **(poll or {})) if poll else settings.poll)


def ours(settings: Settings, matrix: Matrix | None = None, name: str = "nodemanager") -> Policy:
    """Our policy as configured (default: the shipped matrix and the embedded defaults)."""
    m = matrix if matrix is not None else policy_matrix.load_default()
    c = settings.core
    return Policy(name=name, settings=settings, matrix=m, baseline=name,
                  params={"idle_grace": c.idle_grace, "boot_grace": c.boot_grace,
                          "cycle_interval": settings.poll.cycle_interval,
                          "max_concurrent_drains": c.max_concurrent_drains})


def several_sizes_caps(settings: Settings, nodes: int) -> Settings:
    """With several sizes, ``nodes`` of the largest are the cap: as many of the smallest may be up
    at once as hold the same cores, and ``max_total_price`` is what ``nodes`` of the largest cost
    (the dearest of them: one cloud's largest size may cost more than another's)."""
    sizes = settings.core.sizes
    big = max(sizes, key=lambda s: (s.cores, s.price))
    small = min(s.cores for s in sizes)
    return _with(settings, max_nodes=max(1, nodes * big.cores // small),
                 max_total_price=nodes * big.price)


def _largest(settings: Settings) -> tuple[Size, ...]:
    """The largest size alone (none if there is none)."""
    sizes = settings.core.sizes
    return (max(sizes, key=lambda s: s.cores),) if sizes else ()


def static(settings: Settings, nodes: int) -> Policy:
    # a static pool holds the largest size: the peak it is sized by counts nodes of that size
    s = _with(settings, min_nodes=nodes, max_nodes=nodes, sizes=_largest(settings),
              max_total_price=0.0)
    return Policy(name="static", settings=s, matrix=baseline_matrix("static"),
                  baseline="static", params={"nodes": nodes})


def arvados(settings: Settings, *, poll_time: float = 60.0, consecutive_idle_count: int = 2,
            windows: tuple[int, ...] = (54, 5, 1), boot_fail_after: float = 1800.0) -> Policy:
    sizes = tuple(replace(s, shutdown_windows=windows) for s in settings.core.sizes)
    s = _with(settings, sizes=sizes, idle_grace=(consecutive_idle_count - 1) * poll_time,
              boot_grace=boot_fail_after, poll={"cycle_interval": poll_time})
    return Policy(name="arvados", settings=s, matrix=baseline_matrix("arvados"),
                  baseline="arvados",
                  params={"poll_time": poll_time, "consecutive_idle_count": consecutive_idle_count,
                          "shutdown_windows": ",".join(map(str, windows))})


def cluster_autoscaler(settings: Settings, *, unneeded_time: float = 600.0,
                       delay_after_add: float = 600.0, max_drain_parallelism: int = 1,
                       scan_interval: float = 10.0, provision_time: float = 900.0) -> Policy:
    s = _with(settings, idle_grace=unneeded_time, max_concurrent_drains=max_drain_parallelism,
              boot_grace=provision_time, poll={"cycle_interval": scan_interval})
    return Policy(name="cluster-autoscaler", settings=s,
                  matrix=baseline_matrix("cluster-autoscaler"),
                  scale_down_delay_after_boot=delay_after_add, baseline="cluster-autoscaler",
                  params={"scale_down_unneeded_time": unneeded_time,
                          "scale_down_delay_after_add": delay_after_add,
                          "max_drain_parallelism": max_drain_parallelism, "expander": "random"},
                  layer="expander-random")


def slurm_power_save(settings: Settings, *, suspend_time: float = 300.0,
                     resume_timeout: float = 300.0, interval: float = 10.0,
                     suspend_rate: int = 60) -> Policy:
    # SuspendRate nodes per minute, over power_save_interval: this many per cycle
    per_cycle = max(1, int(suspend_rate * interval / 60.0))
    s = _with(settings, idle_grace=suspend_time, boot_grace=resume_timeout,
              max_concurrent_drains=per_cycle, poll={"cycle_interval": interval})
    return Policy(name="slurm-power-save", settings=s,
                  matrix=baseline_matrix("slurm-power-save"),
                  baseline="slurm-power-save",
                  params={"suspend_time": suspend_time, "resume_timeout": resume_timeout})


def karpenter(settings: Settings, *, consolidate_after: float = 0.0, validation: float = 15.0,
              budget: float = 0.10, polling: float = 10.0) -> Policy:
    # an empty node goes once consolidateAfter passed and the 15 s validation still finds it empty
    s = _with(settings, idle_grace=consolidate_after + validation, max_concurrent_drains=10**6,
              poll={"cycle_interval": polling})
    return Policy(name="karpenter", settings=s, matrix=baseline_matrix("karpenter"),
                  baseline="karpenter", layer="karpenter", watch_load=True,
                  params={"consolidation_policy": "WhenEmptyOrUnderutilized",
                          "consolidate_after": consolidate_after, "budget": budget})


def cobald(settings: Settings, *, low_utilisation: float = 0.9, high_allocation: float = 0.9,
           rate: float = 1.0, minimum: float = 1.0, interval: float = 30.0,
           memory_ratio: bool = False) -> Policy:
    big = _largest(settings)
    cap = settings.core.max_total_price
    # one machine type, the largest: several_sizes_caps' price cap is that many of them
    nodes = (int(cap / big[0].price + 1e-9) if cap > 0 and big and big[0].price > 0
             else settings.core.max_nodes)
    s = _with(settings, sizes=big, max_total_price=0.0, poll={"cycle_interval": interval},
              max_concurrent_drains=10**6, max_nodes=nodes)
    return Policy(name="cobald", settings=s, matrix=baseline_matrix("cobald"), baseline="cobald",
                  layer="cobald", watch_load=True,
                  params={"low_utilisation": low_utilisation, "high_allocation": high_allocation,
                          "rate": rate, "minimum": minimum, "interval": interval,
                          "memory_ratio": memory_ratio})


def baselines(settings: Settings, static_nodes: int) -> list[Policy]:
    """The peer baselines, on ``settings``' sizes and limits."""
    return [static(settings, static_nodes), arvados(settings), cluster_autoscaler(settings),
            slurm_power_save(settings), karpenter(settings), cobald(settings)]


_CORE_FIELDS = {f.name for f in fields(CoreSettings)} - {"sizes"}
_POLL_FIELDS = {f.name for f in fields(PollSettings)}
_SIZE_FIELDS = {"warm_nodes", "warm_cores"}  # set on every size, for our policies only
SWEEPABLE: tuple[str, ...] = tuple(sorted(_CORE_FIELDS | _POLL_FIELDS | _SIZE_FIELDS
                                          | {"nodes", "scale_down_delay"}))


def apply_param(policy: Policy, key: str, value: float) -> Policy | None:
    """``policy`` with one knob changed (for ``--sweep``), or None if the knob means nothing to it.

    ``nodes`` is the static pool's size (only static has it); ``idle_grace`` is what each
    baseline calls its idle timeout (Arvados: one poll period per extra consecutive idle poll,
    cluster-autoscaler: scale-down-unneeded-time, Slurm: SuspendTime); the static pool has none.
    ``scale_down_delay`` is cluster-autoscaler's delay after add; ``warm_nodes`` and ``warm_cores``
    are set on every size of our own policies. Other keys are CoreSettings or PollSettings fields.
    """
    if key not in SWEEPABLE:
        raise ValueError(f"cannot sweep {key!r}; choose from: {', '.join(SWEEPABLE)}")
    sweep = {**policy.params.get("sweep", {}), key: value}
    policy = replace(policy, name=f"{policy.baseline} {key}={value:g}")
    if key == "nodes":
        if policy.baseline != "static":
            return None
        n = int(value)
        s = _with(policy.settings, min_nodes=n, max_nodes=n)
        return replace(policy, settings=s, params={**policy.params, "nodes": n, "sweep": sweep})
    if key == "scale_down_delay":
        if policy.baseline != "cluster-autoscaler":
            return None
        return replace(policy, scale_down_delay_after_boot=float(value),
                       params={**policy.params, "sweep": sweep})
    if policy.baseline == "static" and key in ("idle_grace", "max_concurrent_drains"):
        return None
    if key in _SIZE_FIELDS:
        if policy.layer or not policy.baseline.startswith("nodemanager"):
            return None
        changed_size: dict[str, Any] = {key: int(value)}
        sizes = tuple(replace(z, **changed_size) for z in policy.settings.core.sizes)
        return replace(policy, settings=_with(policy.settings, sizes=sizes), params={**policy.params, "sweep": sweep})
    if key in _POLL_FIELDS:
        s = replace(policy.settings, poll=replace(policy.settings.poll, **{key: float(value)}))
    else:
        current = getattr(policy.settings.core, key)
        cast = type(current) if isinstance(current, (int, float)) else float
        changed: dict[str, Any] = {key: cast(value)}
        s = _with(policy.settings, **changed)
    return replace(policy, settings=s, params={**policy.params, "sweep": sweep})
