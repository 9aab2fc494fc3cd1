"""The settings the pure core decides with, as frozen dataclasses: ``[Daemon]``'s decision options
with the sizes (:class:`CoreSettings`), the ``[Budget NAME]`` sections (:class:`DisruptionBudget`)
and ``[Drain]``'s escalation (:class:`DrainSettings`). :mod:`nodemanager.configuration` parses the
INI file into them; defaults here are the documented defaults of ``config.example.ini``.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

from nodemanager.core.schedule import Schedule
from nodemanager.model import Size

__all__ = ["DisruptionBudget", "CoreSettings", "DrainSettings"]


@dataclass(frozen=True)
class DisruptionBudget:
    """A ``[Budget NAME]`` section: at most ``nodes`` (or ``percent`` of the nodes up, rounded
    up) given back at once for the ``reasons`` it names (empty: every budgeted reason), only
    inside the ``schedule``'s windows (None: always)."""

    name: str
    reasons: frozenset[str] = frozenset()
    nodes: int = 0
    percent: float | None = None
    schedule: Schedule | None = None

    def allowed(self, up: int) -> int:
        """How many nodes may be going at once when ``up`` nodes count as up."""
        return self.nodes if self.percent is None else math.ceil(up * self.percent / 100.0 - 1e-9)

    @property
    def limit(self) -> str:
        """``2 node(s)`` or ``10%``: the limit as written."""
        return f"{self.nodes} node(s)" if self.percent is None else f"{self.percent:g}%"


@dataclass(frozen=True)
class CoreSettings:
    """Options of ``[Daemon]`` that decisions depend on, plus the sizes. Durations in seconds."""

    sizes: tuple[Size, ...] = ()
    min_nodes: int = 0
    max_nodes: int = 8
    max_total_price: float = 0.0          # per hour; 0 = no limit
    boot_grace: float = 1800.0
    idle_grace: float = 300.0
    node_stale_after: float = 600.0       # a worker not heard from for this long is "down"
    poll_stale_after: float = 300.0       # an input older than this freezes drains and destroys
    max_concurrent_drains: int = 10
    max_destroys_per_hour: int = 0        # 0 = no limit
    max_boots_per_hour: int = 0           # 0 = no limit
    down_freeze_count: int = 3            # freeze when more than this many nodes are down at once...
    down_freeze_fraction: float = 0.5     # ...and they are more than this fraction of paired nodes
    node_mem_scaling: float = 0.95
    victim_horizon: float = 7200.0        # prefer nodes that can go within this time (victim order)
    clock_tolerance: float = 30.0         # timestamps this far in the future are believed
    max_clock_skew: float = 300.0         # cloud clock off by more: drains/destroys frozen (0 = never)
    reclaim_foreign_after: float = 0.0    # [Drain]: someone else's drain is reclaimed after; 0 = never
    paid_idle_after: float = 10800.0      # idle past idle_grace this much longer: flagged as paid idle
    reclaim_penalty: float = 0.0          # seconds of node time a spot reclaim costs besides the re-run
    max_rerun_share: float = 0.05         # a spot market takes a job expected to lose at most this to re-runs
    reclaim_prior: float = 2592000.0      # seconds of spot VM time the configured reclaim rate is worth
    # protected mode: a size whose VMs fail to join this many times in a row is not booted for a
    # back-off doubling from protect_backoff up to protect_max_backoff (0 = never)
    protect_after_failed_boots: int = 3
    protect_backoff: float = 600.0
    protect_max_backoff: float = 14400.0
    # the cost profile: consolidation, lifetimes (nodemanager.core.consolidate)
    consolidate: bool = False             # relabel busy nodes "underused" when capacity is spare
    consolidate_margin: int = 8           # free cores kept beyond the queue's needs
    min_lifetime: float = 0.0             # no drain/destroy by the matrix before this age; 0 = none
    max_lifetime: float = 0.0             # busy nodes older than this are "expired"; 0 = never
    rebuy_hold: float = 0.0               # no boot this long after a destroy; 0 = none
    size_digests: tuple[tuple[str, str], ...] = ()  # size -> settings_digest, tagged at boot (drift)
    cloud_max_nodes: tuple[tuple[str, int], ...] = ()  # [Cloud NAME] -> its own max_nodes (several clouds)
    idle_grace_mode: str = "fixed"        # fixed | break-even (nodemanager.core.idle_timing)
    # money | wait: break-even gives every idle node its grace, or keeps each size's last free cores
    idle_timing: str = "money"
    # with wait: fixed keeps the last free cores idle_grace; arrivals, while a job is likely soon
    # (nodemanager.core.arrival_keeper): at least arrival_chance of the recent gaps so long ended
    # within arrival_window more
    wait_grace: str = "fixed"
    arrival_chance: float = 0.2
    arrival_window: float = 120.0
    steering: bool = False                # rank our nodes for the scheduler's placement (core.steering)
    # off | recent | auto: running jobs' ends and queued runtimes predicted from their users' recent
    # jobs (runtime_prediction); auto is recent where a spot size is configured, else off
    runtime_prediction: str = "auto"
    disruption_budgets: tuple[DisruptionBudget, ...] = ()  # [Budget NAME] (nodemanager.core.disruption_budgets)
    # consolidation that measures its bets and backs off (nodemanager.core.consolidation_backoff)
    consolidate_backoff: bool = False

    @property
    def prediction(self) -> str:
        """The runtime prediction in force: ``recent`` or ``off`` (``auto`` resolved by the sizes:
        spot prices a group by how long it runs, so a spot size turns it on)."""
        if self.runtime_prediction != "auto":
            return self.runtime_prediction
        return "recent" if any(s.market == "spot" for s in self.sizes) else "off"

    def size(self, name: str) -> Size | None:
        for s in self.sizes:
            if s.name == name:
                return s
        return None


@dataclass(frozen=True)
class DrainSettings:
    """``[Drain]``: how drains are carried out and escalated (HTCondor's eviction policy RFC)."""

    schedule: str = "graceful"                  # graceful | quick | fast
    escalate_quick: str = ""                    # ClassAd expression: turn the drain quick
    escalate_fast: str = ""                     # ClassAd expression: turn the drain fast (kill)
    deadline: float = 0.0                       # seconds; 0 = never force (only the matrix kills)
