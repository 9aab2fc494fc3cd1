"""Typed settings the controller runs with, as frozen dataclasses (parsed from INI by ``config``).

What the pure core decides with (``CoreSettings``, ``DisruptionBudget``, ``DrainSettings``) lives
with the core (:mod:`nodemanager.core.settings`) and is handed on here; the other classes belong to
the daemon's shell. Defaults here are the documented defaults of ``config.example.ini``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from nodemanager.core.settings import CoreSettings, DisruptionBudget, DrainSettings
from nodemanager.model import EMPTY_MAP, Size

__all__ = ["DisruptionBudget", "CoreSettings", "CloudSettings", "SchedulerSettings", "DrainSettings",
           "ManageSettings", "PollSettings", "HASettings", "LogSettings", "StoreSettings", "Settings"]


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
    name: str = ""                              # a [Cloud NAME]'s NAME ("": the one [Cloud])
    max_nodes: int = 0                          # a [Cloud NAME]'s own cap on its nodes (0: none)


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
    spend_ledger: bool = True                   # who spent what, kept in the store ([Store])
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
class StoreSettings:
    """``[Store]``: where the daemon keeps what it remembers (docs/operations.md)."""

    url: str = ""                               # empty: SQLite <state_dir>/<cluster>.db; postgresql://...
    keep_ledger: float = 400 * 86400.0          # seconds a closed node's spend is kept
    keep_events: float = 90 * 86400.0           # seconds a node's events are kept
    keep_gone: float = 90 * 86400.0             # seconds a destroyed node's last facts are kept
    buffer: int = 200_000                       # records kept in memory while the store fails


@dataclass(frozen=True)
class Settings:
    core: CoreSettings = CoreSettings()
    drain: DrainSettings = DrainSettings()
    cloud: CloudSettings = CloudSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    poll: PollSettings = PollSettings()
    manage: ManageSettings = ManageSettings()
    ha: HASettings | None = None                # None: no [HA] section, the single-host lock only
    store: StoreSettings = StoreSettings()
    matrix_file: str = ""                       # empty = the default matrix shipped with the package
    dry_run: bool = False
    log_level: str = "INFO"
    log: LogSettings = LogSettings()
    source: str = ""                            # the config file this came from
    # the [Cloud NAME] sections, in file order (empty: the one [Cloud] is the cloud)
    clouds: tuple[CloudSettings, ...] = ()

    def cloud_of(self, size: Size | None) -> CloudSettings:
        """The cloud ``size`` is bought from (the one [Cloud] when it names none)."""
        name = size.cloud if size is not None else ""
        return next((c for c in self.clouds if c.name == name), self.cloud) if name else self.cloud
