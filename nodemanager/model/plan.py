"""The core's answer: a :class:`Plan` of actions on nodes (:class:`PlanItem`), boots and each
node's explanation (:class:`NodeExplanation`); and what an actuator did with it (:class:`Outcome`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from policy_matrix.vocabulary import Action, StateTuple

__all__ = ["ItemKind", "PlanItem", "BootRequest", "CloudChoice", "Unmet", "Blocked", "Freeze", "Cause", "NodeExplanation", "Plan", "Outcome",
           "BudgetUse"]


class ItemKind(str, enum.Enum):
    """What an actuator is asked to do to a node."""

    DRAIN = "drain"
    CANCEL_DRAIN = "cancel_drain"
    DESTROY = "destroy"
    ESCALATE = "escalate"  # turn a running drain of ours quick or fast (HTCondor's eviction policy RFC)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One action on one existing node. ``cancellable`` is False for shutdowns of unpaired/down
    nodes (nothing to give back to the scheduler)."""

    kind: ItemKind
    node_id: str
    node_name: str
    reason: str
    worker: str | None = None
    cancellable: bool = True
    request_id: str | None = None
    schedule: str | None = None  # for DRAIN/ESCALATE: graceful | quick | fast


@dataclass(frozen=True, slots=True)
class BootRequest:
    size: str
    count: int
    reason: str


@dataclass(frozen=True, slots=True)
class CloudChoice:
    """Where a queued group's new nodes are bought when sizes come from several clouds: ``cloud``
    and ``size`` for ``jobs`` jobs of ``what``, and why each other cloud lost, in words."""

    what: str
    jobs: int
    cloud: str
    size: str
    lost: tuple[str, ...] = ()

    @property
    def why(self) -> str:
        others = "; ".join(self.lost) if self.lost else "no other cloud has a size that fits"
        return f"{self.jobs} job(s) of {self.what} go to cloud {self.cloud} ({self.size}); {others}"


@dataclass(frozen=True, slots=True)
class Unmet:
    """Queued demand the plan does not boot for, and the one thing that binds.

    ``reason`` is one of :data:`nodemanager.console.whynot.DEMAND_REASONS` (``max_nodes``, ``quota``,
    ``max_total_price``, ``no_size``, ``backoff``, ``paused``, ``stale``); ``what`` names the
    demand (``"2 job(s) of 16 cpus, 0 MB"`` or ``"min_nodes 3"``), ``text`` says it in words.
    """

    what: str
    jobs: int
    reason: str
    text: str


class Blocked(enum.StrEnum):
    """What stopped a node's action (:attr:`NodeExplanation.blocked_by`). The values are the words
    the status JSON, the logs and the ``nodemanager_nodes_blocked`` metric's label print."""

    STALE = "stale"                  # an input is stale: nothing is done
    PAUSED = "paused"                # an operator paused all actions
    FROZEN = "frozen"                # drains and destroys frozen (clock skew, mass down)
    HELD = "held"                    # an operator holds the node
    DEMAND = "demand"                # queued jobs need the node
    MIN_NODES = "min_nodes"          # giving it back would go below min_nodes
    BUDGET = "budget"                # max_concurrent_drains or max_destroys_per_hour reached
    IN_FLIGHT = "in_flight"          # a destroy is under way
    NO_WORKER = "no_worker"          # the matrix asks for a drain but no worker is paired
    UNCONFIRMED = "unconfirmed"      # absence or silence not confirmed by this process's polls
    FOREIGN_DRAIN = "foreign_drain"  # someone else drains it
    AMBIGUOUS = "ambiguous"          # several workers or VMs match it: which runs jobs is unknown
    ID_CONFLICT = "id_conflict"      # a worker answers to its name or address with another VM's id
    MIN_LIFETIME = "min_lifetime"    # younger than min_lifetime: not given back yet
    WOULD_EVICT = "would_evict"      # a graceful drain would end by evicting its running jobs
    WARM = "warm"                    # one of its size's idle nodes kept warm (warm_nodes, warm_cores)


class Freeze(enum.StrEnum):
    """Why a plan does no drain or destroy (:attr:`Plan.frozen_by`); the values are the
    ``nodemanager_actions_frozen`` metric's ``reason`` label."""

    STALE = "stale"            # an input poll is too old (nothing at all is done)
    PAUSED = "paused"          # an operator paused all actions (nothing at all is done)
    CLOCK_SKEW = "clock_skew"  # the cloud's clock is off ours beyond max_clock_skew
    MASS_DOWN = "mass_down"    # too many nodes down at once: probably a scheduler outage


@dataclass(frozen=True, slots=True)
class Cause:
    """The disruption reason that proposed a node's action (``reason``: its name, e.g.
    ``matrix_drain``, ``resume_destroy``) and what made it (``by``: the matrix rule's
    ``file:line``, ``operator`` for an admin command, or the recovery rule)."""

    reason: str
    by: str

    def __str__(self) -> str:
        return f"{self.reason} ({self.by})"


# (when, what) of a change by time alone (a class field named ``tuple`` hides the builtin)
TimedChange = tuple[float, str]


class NodeExplanation(NamedTuple):
    """Why a node gets (or does not get) an action: the operator-facing answer per node.

    ``rule`` is ``file:line`` of the matrix rule that matched; ``action`` is what the plan does
    (None: nothing); ``blocked_by`` (a :class:`Blocked`) names what stopped the action and
    ``reason`` says it in words; ``cause`` names the reason that proposed it;
    ``next_change`` is when the tuple will next change by time alone (e.g. idle grace ends), if known.
    Immutable like the dataclasses here, but a named tuple: the core builds one per node per cycle
    and a tuple is built in less than half the time.
    """

    node_id: str
    name: str
    size: str
    tuple: StateTuple
    rule: str
    matrix_action: Action
    action: ItemKind | None
    blocked_by: str | None
    reason: str
    worker: str | None = None
    raw_state: str | None = None
    next_change: float | None = None
    next_change_what: str | None = None
    # facts the core computed once for this node: read them, do not recompute
    cause: Cause | None = None       # the disruption reason that proposed ``action`` (or was blocked)
    lost: bool = False               # its worker was last heard more than node_stale_after ago
    gone: bool = False               # the cloud lists it terminated or terminating (:func:`is_gone`)
    our_drain_since: float | None = None  # a drain of ours is under way, started then
    drained: bool = False            # ... and it finished: the worker is drained, no job runs
    up: bool = False                 # counts towards min_nodes (idle, busy or booting, staying)
    # when ``next_change`` is the boot grace end of a node whose worker joined (it no longer
    # matters to it): the change after it, (when, what); None: none by time alone
    after_boot: TimedChange | None = None
    budget: str | None = None        # the [Budget NAME] that holds the action back (blocked_by budget)
    idle_since: float | None = None  # its worker is idle since then (None: not idle)


@dataclass(frozen=True, slots=True)
class BudgetUse:
    """One ``[Budget NAME]`` this cycle: ``active`` (inside its schedule), ``allowed`` nodes
    given back at once (when active), ``held`` nodes it held back, ``text`` its words."""

    name: str
    active: bool
    allowed: int
    held: int
    text: str


@dataclass(frozen=True)
class Plan:
    """The core's answer for one snapshot: actions on existing nodes, boots, and a per-node why.

    ``frozen`` is a reason string when drains/destroys are frozen (stale input, mass down, paused).
    """

    now: float
    items: tuple[PlanItem, ...] = ()
    boots: tuple[BootRequest, ...] = ()
    nodes: tuple[NodeExplanation, ...] = ()
    frozen: str | None = None
    notes: tuple[str, ...] = ()  # plan-wide reasons in words (demand not met and why, caps hit)
    unmet: tuple[Unmet, ...] = ()  # the same demand not booted for, typed (see Unmet)
    frozen_by: Freeze | None = None  # why ``frozen``, typed (see Freeze)
    budgets: tuple[BudgetUse, ...] = ()  # each [Budget NAME] this cycle
    clouds: tuple[CloudChoice, ...] = ()  # several clouds: where each queued group is bought


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an actuator did with a plan item or boot: ``kind`` is the item kind or ``boot``;
    ``result`` is ``ok``, ``refused``, ``failed`` or ``skipped``; ``detail`` says why, in words;
    ``launched_at`` is the node's launch time on a destroy that went through (for the billing);
    ``request`` the boot's or drain's request id (no epoch in it)."""

    kind: str
    node: str
    result: str
    detail: str
    at: float
    size: str | None = None
    launched_at: float | None = None
    request: str | None = None       # the boot's or drain's request id as operators read it
