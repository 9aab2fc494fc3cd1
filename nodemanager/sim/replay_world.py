"""One replay's world on a virtual clock: the simulated cloud, the pool its VMs join, the
controller and actuator the daemon runs, and the bookkeeping the figures need."""

from __future__ import annotations

from nodemanager.core.warm import warm_wanted
from nodemanager.model import Plan
from nodemanager.sim.baselines import Policy, SimParams
from nodemanager.sim.cloud import SimCloud
from nodemanager.sim.pool import SimPool
from nodemanager.sim.spot import SpotModel
from nodemanager.sim.skip import CycleWatch, booting_capacity, settles

__all__ = ["ReplayWorld"]



class ReplayWorld:
    """The cloud, the pool and the bookkeeping the figures need."""

    def __init__(self, policy: Policy, sim: SimParams, t0: float) -> None:
        self.now = t0
        settings = policy.settings
        self.pool = SimPool(self.clock, join_delay=sim.join_delay,
                            negotiation_interval=sim.negotiation_interval,
                            max_retirement=sim.max_retirement, mem_scaling=settings.core.node_mem_scaling,
                            sizes=settings.core.sizes, placement=sim.placement)
        specs = {c.name: c for c in sim.clouds}
        sized = [(s, specs[s.cloud]) for s in settings.core.sizes if s.cloud in specs]
        spot = SpotModel(rate_per_day=sim.spot_rate, by_size={s.name: c.spot_rate for s, c in sized
                                                               if c.spot_rate is not None}
                         ) if any(s.market == "spot" for s in settings.core.sizes) else None
        self.cloud = SimCloud(clock=self.clock, sizes=settings.core.sizes, boot_delay=sim.boot_delay,
                              on_running=self._running, on_terminated=self._terminated,
                              cluster=settings.cloud.cluster, spot=spot,
                              on_notice=self._notice, on_reclaim=self._reclaim,
                              boot_delays={s.name: c.boot_delay for s, c in sized if c.boot_delay is not None},
                              cloud_capacity={c.name: (c.capacity, tuple((t0 + a, t0 + b) for a, b in c.outages))
                                              for c in sim.clouds})
        self.reclaim_kills = [0, 0.0]             # jobs killed and their core-seconds, by reclaims
        self.running: dict[str, float] = {}       # node id -> when its VM came up (live ones)
        self.came_up: dict[str, float] = {}       # node id -> when its VM came up (all)
        self.launched: dict[str, float] = {}      # node id -> launch time (every node ever)
        self.gone: dict[str, float] = {}          # node id -> destroy time
        self.last_busy: dict[str, float] = {}     # node id -> last time it was seen with a job
        self.live: dict[str, None] = {}           # node ids launched and not destroyed
        self.boot_times: list[float] = []         # every successful boot, for destroy->boot pairs
        self.pool_changed = True
        # consolidation and the karpenter/cobald baselines read free cores with nothing queued;
        # so does idle_timing = wait (whether a size's busy nodes have a free core)
        keeps_free = settings.core.idle_grace_mode == "break-even" and settings.core.idle_timing == "wait"
        self.watch = CycleWatch(self.pool, self.live, self.running, policy.matrix.vocabulary.core_state,
                                # steering ranks nodes by their jobs: a job's start or end may rerank
                                free_matters=(settings.core.consolidate or policy.watch_load
                                              or settings.core.steering or warm_wanted(settings.core)
                                              or keeps_free),
                                # a spot VM taken back unseen leaves its worker carried as last seen
                                margin=settings.core.consolidate_margin
                                if settings.core.consolidate and not policy.watch_load and spot is None
                                and not settings.core.steering and not keeps_free
                                else None,
                                settles=None if policy.layer else settles(policy.matrix, settings.core),
                                booting=booting_capacity(settings.core))
        self._used: dict[str, int] = {}           # busy node id -> cores its jobs hold
        self._used_sum = 0
        self._load_at = t0                        # when load() last looked
        self._unloaded: set[str] = set()          # nodes changed since load() last looked

    def clock(self) -> float:
        return self.now

    def launch(self, node_id: str, t: float) -> None:
        self.launched[node_id] = t
        self.live[node_id] = None
        self.changed(node_id)

    def changed(self, node_id: str) -> None:
        """``node_id``'s VM or startd changed (the cycle check and the load count look again)."""
        self.watch.node_changed(node_id)
        self._unloaded.add(node_id)

    def sync(self) -> None:
        """Pass on the nodes whose startd changed since the last call."""
        touched = self.pool.touched
        for nid in touched:
            self.changed(nid)
        touched.clear()

    def _running(self, node, size) -> None:
        self.running[node.id] = self.now
        self.changed(node.id)
        self.came_up[node.id] = self.now
        self.pool.vm_started(node, size)

    def _terminated(self, node_id: str) -> None:
        self.running.pop(node_id, None)
        self.gone[node_id] = self.now
        self.live.pop(node_id, None)
        self.changed(node_id)
        self.pool.vm_stopped(node_id)
        self.pool_changed = True

    def _notice(self, node_id: str, deadline: float) -> None:
        self.pool.reclaim_notice(node_id, deadline)
        self.pool_changed = True

    def _reclaim(self, node_id: str) -> None:
        """The cloud takes a spot VM back now: what its termination kills is the cloud's doing."""
        before = self.pool.stats
        self.pool.vm_stopped(node_id)
        after = self.pool.stats
        # a job a drain was already evicting counts as evicted
        self.reclaim_kills[0] += after.killed - before.killed - (after.evicted - before.evicted)
        self.reclaim_kills[1] += after.badput - before.badput

    @property
    def up(self) -> int:
        return len(self.launched) - len(self.gone)

    def load(self) -> tuple[int, int]:
        """(nodes running at least one job, cores in use), from the live startds; looks only at
        the nodes that changed since the last call (the others hold what they held)."""
        self.sync()
        startd, used = self.pool.startd, self._used
        for nid in self._unloaded:
            st = startd(nid)
            if st is not None and st.dslots and nid in self.running:
                self._used_sum += st.cpus - st.free_cpus - used.get(nid, 0)
                used[nid] = st.cpus - st.free_cpus
            elif nid in used:
                # a look follows every change at the time it happens: busy until now, however
                # many cycles ran or were skipped since the look before
                self._used_sum -= used.pop(nid)
                self.last_busy[nid] = self.now
        self._unloaded.clear()
        self._load_at = self.now
        return len(used), self._used_sum

    def busy_until_now(self) -> None:
        """Bring ``last_busy`` up to the last look for the nodes busy then (at the end)."""
        for nid in self._used:
            self.last_busy[nid] = self._load_at

    def unchanged(self) -> bool:
        """True if a cycle now may be skipped (:meth:`CycleWatch.unchanged`)."""
        self.sync()
        return self.watch.unchanged()

    def mark(self, plan: Plan) -> None:
        """A cycle ran and planned ``plan`` (:meth:`CycleWatch.mark`)."""
        self.sync()
        self.watch.mark(plan)
