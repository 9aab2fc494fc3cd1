"""What every disruption reason is: a small object with a name, the stage it runs in, and
``propose(candidates, context) -> decisions``. Pure."""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Callable, ClassVar, Mapping, NamedTuple, Protocol, Sequence

from nodemanager.core.facts import MatrixLookup
from nodemanager.core.plan_node import Decision
from nodemanager.core.victims import Estimator
from nodemanager.model import InFlight, Snapshot, Worker
from nodemanager.core.settings import CoreSettings

__all__ = ["Stage", "Context", "Reason", "Escalation"]

Escalation = Callable[[Worker, InFlight, float], "str | None"]


class Stage(enum.Enum):
    """When in the plan a reason runs, and what its candidates are."""

    # first, before the guards; candidates: every listed node, undecided. A reason here gives a
    # node back through the matrix: it relabels the node's worker_state (the facts' tuple, rule and
    # matrix action: :func:`nodemanager.core.consolidate.relabelled`) or names its next change,
    # and the later stages act on what the matrix says of the new state
    LABELS = "labels"

    # before demand is placed; candidates: nodes no guard stopped and no earlier reason claimed.
    # The first reason to return a decision for a node claims it (even with no action).
    WANTS = "wants"
    # demand placed (``Decision.needed`` set), before the freezes and budgets; not when halted
    AFTER_DEMAND = "after demand"
    # freezes and budgets applied; not when halted
    AFTER_GATES = "after gates"
    # overrides after everything, even when halted (the reason checks ``Context.frozen``); their
    # items come after all others, in the order returned
    LAST = "last"


class Context(NamedTuple):
    """What a reason may read besides its candidates."""

    snapshot: Snapshot
    settings: CoreSettings
    frozen: bool                     # drains and destroys are held back (halted or frozen)
    escalation: Escalation | None    # the drain escalation callback (None: none configured)
    matrix: MatrixLookup             # the matrix the plan reads (a relabel looks its new tuple up)
    estimator: Estimator             # prices victims (seeds 000/003)
    # from stage AFTER_DEMAND: the warm nodes that give way to queued jobs (node id -> why)
    gives_way: Mapping[str, str] = MappingProxyType({})


class Reason(Protocol):
    """A disruption reason: proposes actions (or blocks) for some of its candidates, each decision
    with ``cause`` naming this reason and the matrix rule, operator command or recovery rule
    behind it. Returns new records (``candidate._replace(...)``); candidates it leaves out keep
    their decision. A reason class names this protocol as its base, and declares what the rest
    of the tree asks of it where the defaults below do not hold: the budgets read ``budget``, the
    simulator's cycle skipping ``switches`` and ``time_settings``, ``matrix explain`` ``relabels``."""

    # the word a ``[Budget NAME]`` section's ``reasons`` names it by: the nodes it gives back (a
    # LABELS reason: the nodes it relabelled, whatever the matrix then does) draw on the budgets
    # that name it; None: not budgeted
    budget: ClassVar[str | None] = None
    # the CoreSettings fields that turn it on when set (true or above 0); empty: always on
    switches: ClassVar[tuple[str, ...]] = ()
    # those that, set, make what it proposes depend on time alone or on other nodes than the one
    # it decides (not only on that node's records)
    time_settings: ClassVar[tuple[str, ...]] = ()
    # a LABELS reason: the worker state it relabels a busy node into
    relabels: ClassVar[str | None] = None

    @property
    def name(self) -> str: ...

    @property
    def stage(self) -> Stage: ...

    def propose(self, candidates: Sequence[Decision], ctx: Context) -> list[Decision]: ...
