"""Typed settings the controller runs with, as frozen dataclasses (parsed from INI by ``config``).

``CoreSettings`` is all the pure core needs; the other classes belong to the daemon's shell.
Defaults here are the documented defaults of ``config.example.ini``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import TYPE_CHECKING, Mapping

from nodemanager.model import EMPTY_MAP, Size

if TYPE_CHECKING:
    from nodemanager.core.schedule import Schedule

__all__ = ["BUDGET_REASONS", "DisruptionBudget", "CoreSettings", "CloudSettings", "SchedulerSettings", "DrainSettings",
           "ManageSettings", "PollSettings", "HASettings", "Settings"]


# the disruption reasons a [Budget NAME] may name (nodemanager.core.disruption_budgets)
BUDGET_REASONS = ("consolidate", "drift", "max_lifetime", "matrix_drain", "matrix_shutdown", "warm_gives_way")


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


@dataclass(frozen=True)
class CloudSettings:
    driver: str = "simulated"                   # libcloud provider name (ec2, gce, ...) or simulated
    driver_args: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    create_args: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    tags: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    cluster: str = "nodemanager"
    node_name_template: str = "{cluster}-{size}-{seq}"
    calls_per_second: float = 5.0
    quota_backoff: float = 600.0
    # capacity circuit breakers (nodemanager.core.breaker): a capacity error holds the size off for
    # capacity_cooldown, doubling per further error up to capacity_max_cooldown, then one probe
    # boot decides; 0: a capacity error holds the size off for quota_backoff
    capacity_cooldown: float = 0.0
    capacity_max_cooldown: float = 1800.0
    deployment_id: str = ""                     # set, or made at the first start (state_dir)


@dataclass(frozen=True)
class SchedulerSettings:
    kind: str = "simulated"                      # htcondor | slurm | simulated
    options: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)


@dataclass(frozen=True)
class PollSettings:
    cloud_interval: float = 60.0
    scheduler_interval: float = 10.0
    cycle_interval: float = 10.0
    max_backoff: float = 300.0
    watchdog: float = 600.0


@dataclass(frozen=True)
class ManageSettings:
    address: str = "127.0.0.1"
    port: int = 8989                            # -1 disables the status server
    token: str = ""                             # admin API token; empty disables the admin API
    state_file: str = ""                        # holds, forced drains, pause kept here; empty: memory only
    state_dir: str = ""                         # lock and local records; config.load fills the default
    allowed_hosts: tuple[str, ...] = ()         # Host names the status server answers to, besides its own
    spend_ledger: bool = True                   # who spent what: <state_dir>/<cluster>.spend.json
    spend_top: int = 10                         # users and groups with their own metric series
    loopback_snapshot: bool = True              # GET /snapshot.json from this host needs no token


@dataclass(frozen=True)
class HASettings:
    """``[HA]``: a leader lease on etcd; only the leader acts (docs/ha.md)."""

    backend: str = "etcd"
    endpoints: tuple[str, ...] = ("http://127.0.0.1:2379",)
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    user: str = ""
    password: str = ""
    lease_ttl: float = 15.0                     # seconds
    stop_margin: float = 5.0                    # the leader stops acting this long before its lease can end
    deployment: str = ""                        # the election's name; empty: recorded in state_dir at first start
    election_key: str = ""                      # empty: /nodemanager/<deployment>/leader
    admin_key: str = ""                         # empty: /nodemanager/<deployment>/admin
    timeout: float = 2.0                        # one etcd request


@dataclass(frozen=True)
class LogSettings:
    """``[Daemon] log_format``, ``log_file``: how and where the log is written (stderr always)."""

    format: str = "text"                        # text: one line per record; json: one object per line
    file: str = ""                              # empty: stderr only (journald)
    file_max_mb: int = 50                       # the file is rotated at this size, 1..10240
    file_keep: int = 5                          # rotated files kept, 1..100


@dataclass(frozen=True)
class Settings:
    core: CoreSettings = CoreSettings()
    drain: DrainSettings = DrainSettings()
    cloud: CloudSettings = CloudSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    poll: PollSettings = PollSettings()
    manage: ManageSettings = ManageSettings()
    ha: HASettings | None = None                # None: no [HA] section, the single-host lock only
    matrix_file: str = ""                       # empty = the default matrix shipped with the package
    dry_run: bool = False
    log_level: str = "INFO"
    log: LogSettings = LogSettings()
    source: str = ""                            # the config file this came from
