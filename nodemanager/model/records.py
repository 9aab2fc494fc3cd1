"""The controller's inputs: sizes, cloud nodes, workers, demand, actions in flight and the
:class:`Snapshot` that holds them all. Times are epoch seconds (float). Pollers build these from
the cloud and the scheduler."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from policy_matrix.vocabulary import Action, StateTuple

__all__ = [
    "Action",
    "StateTuple",
    "Size",
    "CloudNode",
    "provider_id",
    "GONE_STATES",
    "is_gone",
    "Classified",
    "RunningJob",
    "FinishedJob",
    "Worker",
    "JobOwner",
    "Demand",
    "InFlight",
    "VictimCost",
    "Snapshot",
    "frozen_map",
    "EMPTY_MAP",
]

EMPTY_MAP: Mapping[str, Any] = MappingProxyType({})


def frozen_map(d: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy of ``d`` (for dataclass fields that hold tags or ads)."""
    return MappingProxyType(dict(d)) if d else EMPTY_MAP


@dataclass(frozen=True, slots=True)
class Size:
    """A node size (cloud instance type) the operator allows, from a ``[Size NAME]`` section.

    Billing: ``billing_period`` 0 means per-second billing, with ``min_charge`` seconds charged at
    least. Otherwise the node is charged per started period, and the shutdown window is the last
    ``shutdown_window`` seconds of each period, counted from the cloud's launch time (default 120:
    the period is paid anyway, so a node is kept for demand until just enough time is left to
    drain and destroy it).
    ``shutdown_windows`` (minutes, Arvados style: closed, open, closed, ...) overrides both.
    """

    name: str
    cores: int
    ram_mb: int
    price: float = 0.0
    scratch_mb: int = 0
    billing_period: int = 0
    min_charge: int = 60
    shutdown_window: int = 120
    shutdown_windows: tuple[int, ...] = ()
    instance_type: str = ""
    # what the size offers jobs
    gpus: int = 0
    gpu_type: str = ""
    features: frozenset[str] = frozenset()
    attributes: tuple[tuple[str, str], ...] = ()
    partitions: frozenset[str] = frozenset()
    # per-size node limits (0: none) and cloud create options over [Cloud Create]
    min_nodes: int = 0
    max_nodes: int = 0
    # idle nodes (or idle cores, in whole nodes) kept up beyond the demand, for jobs to start at once
    warm_nodes: int = 0
    warm_cores: int = 0
    # when warm capacity is kept: a nodemanager.core.schedule.Schedule (None: always)
    warm_schedule: Any = None
    create_args: tuple[tuple[str, str], ...] = ()
    # the market it is bought on
    market: str = "on-demand"
    max_price: float | None = None
    interruptions_per_day: float = 0.0  # expected reclaims of one VM per day (spot only)
    # ``price`` as configured when price_override or licence_price set the effective ``price``
    # (nodemanager.core.pricing.effective_price); None: ``price`` is the configured one
    list_price: float | None = None
    cloud: str = ""  # the [Cloud NAME] it is bought from ("": the one [Cloud])

    @property
    def cloud_type(self) -> str:
        """The cloud's name for this size (``instance_type``, else the section name)."""
        return self.instance_type or self.name


@dataclass(frozen=True, slots=True)
class CloudNode:
    """A VM as the cloud lists it. ``launched_at`` comes from the cloud, never from our memory.

    ``tags`` holds what must survive a controller restart (cluster, size, boot request id, and the
    markers the actuators set: drain started, destroy requested).
    """

    id: str
    name: str
    size: str
    launched_at: float
    state: str = "running"
    private_ip: str | None = None
    hostname: str | None = None
    tags: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    # when the cloud takes (or took) this spot VM back, from its listing; None: no notice
    reclaim_at: float | None = None
    # the [Cloud NAME] that lists it ("": the one [Cloud]); with a name, ``id`` is ``NAME:<the
    # cloud's id>``, so two clouds' ids never collide
    cloud: str = ""


def provider_id(node: CloudNode) -> str:
    """The node's id as its own cloud knows it (what a worker's ``cloud_id`` names)."""
    return node.id[len(node.cloud) + 1:] if node.cloud else node.id


# States in which a listed VM is on its way out or gone: the core ignores such nodes.
GONE_STATES = frozenset({"terminated", "shutting-down"})


def is_gone(node: CloudNode) -> bool:
    """True when the cloud reports the node terminated or terminating."""
    return node.state in GONE_STATES


@dataclass(frozen=True, slots=True)
class Classified:
    """A scheduler adapter's verdict on its own raw record: the matrix's ``worker_state``, why (in
    words), for an idle worker the time it became idle (None: unknown; the core caps it at now),
    and someone else's drain reason when another party drains it (None: not draining, or ours)."""

    state: str
    why: str
    idle_since: float | None = None
    foreign_drain: str | None = None


class JobOwner(NamedTuple):
    """Who runs on a worker: the job's ``user``, its ``group`` (SLURM account, HTCondor accounting
    group; empty: none) and the ``cores`` it holds there."""

    user: str
    group: str
    cores: int


@dataclass(frozen=True, slots=True)
class RunningJob:
    """One job running on a worker, as runtime prediction keys it: the job's ``user`` and, where
    the scheduler has it, its ``name`` (SLURM's job name, HTCondor's ``Cmd``, a trace's
    executable); ``start`` when it started; ``limit`` its own time limit in seconds (None: none)."""

    job_id: str
    user: str
    start: float
    name: str | None = None
    limit: float | None = None


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """``job`` completed (not killed) at ``end``, since the last poll: runtime prediction learns
    ``end - job.start`` from it."""

    job: RunningJob
    end: float


@dataclass(frozen=True, slots=True)
class Worker:
    """A node as the scheduler reports it (a SLURM node, or an HTCondor startd).

    ``state`` is the raw scheduler state: for SLURM as ``sinfo %t`` prints it (``idle``, ``mix``,
    ``drng``, ``down*``...); for HTCondor the partitionable slot's ``State/Activity``. ``ad`` holds
    the startd's ad (HTCondor) so the classifier and victim estimator can read its attributes.
    ``state_since`` is when the scheduler says the node entered its current state (SLURM: the time
    the node last became idle, when known; HTCondor: ``EnteredCurrentState`` or the idle-since time).
    ``registered_at`` is when this scheduler record began (daemon start / slurmd registration), used
    to refuse pairing a record older than the VM (a recycled hostname). ``drain_since`` is when the
    current drain began (SLURM: the reason's time; HTCondor: ``LastDrainStartTime``), 0: unknown.
    ``job_end_times`` are the running jobs' expected ends, where known (a job not counted there
    has no known end); ``retirement_end`` is when a graceful drain ends by evicting what still runs.
    ``jobs`` names the running jobs where the adapter knows them (runtime prediction learns from
    them); ``predicted_end_times`` are their predicted ends, set by the controller when runtime
    prediction is on (empty: none; ``job_end_times`` stay the guaranteed limits).
    ``classified`` is the adapter's classification of this record (see
    :func:`nodemanager.scheduler.classified`); the core leaves an unclassified worker alone (busy).
    ``native_ad`` says ``ad`` is the scheduler's own whole machine ad (HTCondor's p-slot ad): drain
    escalation expressions read it as it is, where for other schedulers the core builds one from
    these fields.
    """

    name: str
    scheduler: str
    state: str | None = None
    cloud_id: str | None = None
    address: str | None = None
    last_heard: float = 0.0
    state_since: float = 0.0
    registered_at: float | None = None
    cpus: int = 0
    cpus_busy: int = 0
    ram_mb: int = 0
    running_jobs: int = 0
    job_end_times: tuple[float, ...] = ()
    # when a graceful drain (begun at this record's time, or under way) evicts jobs still running:
    # HTCondor's ExpectedMachineGracefulDrainingCompletion; inf: never (SLURM); None: unknown
    retirement_end: float | None = None
    draining: bool = False
    drain_reason: str | None = None
    drain_request_id: str | None = None
    drain_since: float = 0.0
    ad: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAP)
    classified: Classified | None = None
    native_ad: bool = False
    # whose jobs run here, as the scheduler records them (who-spent-what accounting only)
    jobs_by: tuple[JobOwner, ...] = ()
    jobs: tuple[RunningJob, ...] = ()
    predicted_end_times: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Demand:
    """``count`` queued jobs each needing ``cpus`` cores and ``ram_mb`` memory (optionally a size)."""

    cpus: int = 1
    ram_mb: int = 0
    count: int = 1
    scratch_mb: int = 0
    size: str | None = None
    oldest_submit: float | None = None
    # what the jobs need beyond cores, memory and disk
    gpus: int = 0
    requirements: str | None = None
    features: str | None = None
    partition: str | None = None
    sizes: frozenset[str] | None = None
    unmatched: str | None = None
    # how long the jobs asked to run, seconds (None: the scheduler gave no walltime)
    walltime: float | None = None
    # whose jobs these are and their job name, when the scheduler groups its demand by them (the
    # key runtime prediction looks up; None: jobs of several users or names)
    user: str | None = None
    name: str | None = None
    # how long the jobs are predicted to run, seconds, rounded up to a walltime bucket (set by
    # nodemanager.core.demand_runtime; None: priced by ``walltime``)
    runtime: float | None = None


@dataclass(frozen=True, slots=True)
class InFlight:
    """An action under way, recorded in cloud tags or scheduler state so it survives a restart.

    ``action`` is ``drain``, ``destroy``, ``boot`` or ``cancel_drain``; ``node`` is the cloud node id
    (for a boot, the boot request id); ``request_id`` is the scheduler's drain request id, if any.
    """

    node: str
    action: str
    since: float
    size: str | None = None
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class VictimCost:
    """What giving a node back costs (after Sfiligoi et al.): (a) seconds until it can go away if drained now,
    (b) draining waste and (c) kill waste, both in core-seconds. ``stuck`` marks a node whose
    information is stale (pilot heartbeat missed), which should be chosen first."""

    time_to_go: float = 0.0
    drain_waste: float = 0.0
    kill_waste: float = 0.0
    stuck: bool = False
    priority: float = 0.0
    winding_down: bool = False  # the pilot starts no new jobs (the pilot paper's CAN_POSTPONE_LAST_JOB false)


@dataclass(frozen=True)
class Snapshot:
    """Everything the core needs for one decision, as seen at ``now``.

    ``polled_at`` maps each input (``cloud``, ``scheduler``) to the time of its last good poll.
    ``held`` are node ids (or names) the operator holds; ``forced_drains`` node ids the operator asked
    to drain now; ``paused`` a reason string while an operator paused all actions.
    ``quota`` is a node count the cloud taught us (None: unknown); ``blocked_sizes`` sizes the cloud
    refused recently (quota or capacity) that must not be booted now.
    ``recent_destroys`` are the times of destroys in the last hour (for ``max_destroys_per_hour``).
    ``unconfirmed`` are node ids the controller's own fresh polls have not yet shown unpaired or
    down for ``min(node_stale_after, boot_grace)`` (after a restart or an outage an ad may just be
    late or old): such a node, unpaired or down for silence, is not shut down yet.
    ``cloud_clock_skew`` is the cloud's clock minus ours in seconds, as measured from the cloud's
    replies (None: unknown); the ``launched_at`` times are already on our clock.
    ``cancel_drains`` are node ids whose drain of ours an operator asked to cancel this cycle;
    ``destroyed`` node ids this process destroyed so recently that the listing may still show them
    (a ``TAG_DESTROY`` on them is not a destroy to resume).
    """

    now: float
    polled_at: Mapping[str, float]
    cloud_nodes: tuple[CloudNode, ...] = ()
    workers: tuple[Worker, ...] = ()
    demand: tuple[Demand, ...] = ()
    in_flight: tuple[InFlight, ...] = ()
    held: frozenset[str] = frozenset()
    forced_drains: frozenset[str] = frozenset()
    paused: str | None = None
    quota: int | None = None
    blocked_sizes: frozenset[str] = frozenset()
    recent_destroys: tuple[float, ...] = ()
    unconfirmed: frozenset[str] = frozenset()
    cloud_clock_skew: float | None = None
    # sizes in protected mode after failed joins -> why, in words: not booted
    protected_sizes: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    # operator cancels and our own recent destroys, decided on in the core
    cancel_drains: frozenset[str] = frozenset()  # node ids whose drain of ours an operator cancels
    destroyed: frozenset[str] = frozenset()      # node ids this process destroyed, maybe still listed
    # idle_grace_mode = break-even: size -> (idle grace seconds, its words); a size not here: idle_grace
    idle_graces: Mapping[str, tuple[float, str]] = field(default_factory=lambda: EMPTY_MAP)
    # wait_grace = arrivals: the recent instants new jobs were seen (queued or started), oldest first
    arrivals: tuple[float, ...] = ()
    # spot size -> (reclaims per hour its market was seen to have lately, in words); absent: configured
    reclaim_rates: Mapping[str, tuple[float, str]] = field(default_factory=lambda: EMPTY_MAP)
    # capacity breakers (nodemanager.core.breaker): open sizes -> why, not booted; half-open sizes
    # are booted one probe at a time
    open_breakers: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    probe_sizes: frozenset[str] = frozenset()
    # consolidate_backoff: size -> (times the consolidate_margin kept, inf: paused; its words)
    consolidation_backoff: Mapping[str, tuple[float, str]] = field(default_factory=lambda: EMPTY_MAP)
    # size no longer configured -> its last configured price per hour (for its VMs without a price tag)
    known_prices: Mapping[str, float] = field(default_factory=lambda: EMPTY_MAP)
    # when our boots of the last hour were requested (listed, terminated or not listed yet): max_boots_per_hour
    recent_boots: tuple[float, ...] = ()
    # how far the scheduler's clock runs ahead of ours, as its idle-since times show (None: not seen)
    scheduler_clock_ahead: float | None = None
    # [Cloud NAME] -> the time of its last good listing (several clouds); a cloud's listing older
    # than poll_stale_after freezes its own nodes and sizes only
    cloud_polled: Mapping[str, float] = field(default_factory=lambda: EMPTY_MAP)
